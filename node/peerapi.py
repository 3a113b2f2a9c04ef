"""``NetworkApi`` over today's ``PeerManager``, until the peer layer provides it itself.

The RPC codes against ``node.rpc.NetworkApi``; this adapter is the only place that knows
which attributes of the peer manager hold those answers.
"""

from __future__ import annotations

from typing import Any

from p2p.manager import PeerManager


class PeerManagerApi:
    def __init__(self, manager: PeerManager) -> None:
        self.manager = manager

    def status(self) -> dict[str, Any]:
        return self.manager.status()

    def sync_status(self) -> dict[str, Any]:
        return self.manager.sync.status()

    def summary(self) -> dict[str, Any]:
        sync = self.manager.sync.status()
        return {
            "peer_count": len(self.manager.peers),
            "sync_stage": sync["stage"],
            "sync_target": sync["target"],
            "sync_blocks_per_s": sync["blocks_per_s"],
            "sync_eta_s": sync["eta_s"],
            "rdma": self.manager.rdma_status,
        }

    def connect(self, address: tuple[str, int]) -> bool:
        return self.manager.connect(address)

    async def disconnect(self, peer_id: str) -> bool:
        return await self.manager.disconnect(peer_id)
