"""Fake peers and switch for reactor tests: what a reactor sends is recorded, not sent."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from types import SimpleNamespace
from typing import cast

from p2p.transport.peer import Peer
from p2p.wire.messages import GoAwayReason, Message


class FakePeer:
    """Records what is offered to it; ``outbox`` holds what a reactor puts there (serving)."""

    def __init__(self, peer_id: str) -> None:
        self.id = peer_id
        self.offered: list[Message] = []
        self.outbox: asyncio.Queue[Message] = asyncio.Queue()
        self.handshake = SimpleNamespace(first_block=1)

    def offer(self, message: Message) -> bool:
        self.offered.append(message)
        return True


class FakeSwitch:
    """The switch's face to reactors (``p2p.transport.reactor.PeerSet``) over fake peers, recording
    who was punished (banned) and who sent away."""

    def __init__(self, peers: Iterable[FakePeer]) -> None:
        self._peers = {p.id: p for p in peers}
        self.punished: list[tuple[str, GoAwayReason, str]] = []
        self.sent_away: list[str] = []

    def peers(self) -> Iterable[Peer]:
        return cast(Iterable[Peer], list(self._peers.values()))

    def get(self, peer_id: str) -> Peer | None:
        return cast(Peer | None, self._peers.get(peer_id))

    def punish(self, peer_id: str, reason: GoAwayReason, detail: str) -> None:
        self.punished.append((peer_id, reason, detail))

    def send_away(self, peer_id: str, reason: GoAwayReason, detail: str) -> None:
        self.sent_away.append(peer_id)
