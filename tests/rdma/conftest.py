"""Real node processes for the RDMA tests (the integration harness, re-used)."""

from tests.integration.conftest import nodes

__all__ = ["nodes"]
