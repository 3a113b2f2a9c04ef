"""BoR's Python client SDK: the node's RPC and its chain stream, typed.

``Client`` (sync) and ``AsyncClient`` (asyncio) have one method per public route, answer
with frozen dataclasses (``bor_client.results``) and raise ``bor_client.errors`` errors.
With a ``Signer`` (keys from memory or a bor-wallet file) they build, sign and push
transactions, singly or in batches, native actions and contract actions (by the contract's
ABI); ``AsyncClient.stream`` follows the chain and resumes from its cursor. docs/sdk.md
shows each in use.
"""

from bor_client.aio import AsyncClient
from bor_client.client import Client
from bor_client.errors import (
    BadUrl,
    ClientError,
    KeyMissing,
    NodeUnreachable,
    NotFound,
    Rejected,
    RpcError,
    Unauthorized,
)
from bor_client.frames import (
    ActionsFrame,
    BlockFrame,
    Cursor,
    Lib,
    TransactionsFrame,
    Undo,
)
from bor_client.keys import Signer
from bor_client.requests import MAX_BATCH, RowsQuery
from bor_client.stream import Stream

__all__ = [
    "MAX_BATCH",
    "ActionsFrame",
    "AsyncClient",
    "BadUrl",
    "BlockFrame",
    "Client",
    "ClientError",
    "Cursor",
    "KeyMissing",
    "Lib",
    "NodeUnreachable",
    "NotFound",
    "Rejected",
    "RowsQuery",
    "RpcError",
    "Signer",
    "Stream",
    "TransactionsFrame",
    "Unauthorized",
    "Undo",
]
