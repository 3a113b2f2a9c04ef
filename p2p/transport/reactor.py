"""Reactors: each owns one concern of the peer layer and the message types that go with it.

The switch routes every message a peer sends to the one reactor that declared its type in
``accepts`` (CometBFT's reactors own their channels the same way), tells every reactor when a
peer comes and goes, and runs each reactor's ``run`` in its task group, so a reactor that
crashes stops the network (and the node) instead of dying silently. Reactors reach peers
only through ``PeerSet``, the switch's narrow face.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar, Protocol

from p2p.transport.peer import Peer
from p2p.wire.messages import GoAwayReason, Message


class PeerSet(Protocol):
    """What a reactor may ask of the switch."""

    def peers(self) -> Iterable[Peer]: ...

    def get(self, peer_id: str) -> Peer | None: ...

    def punish(self, peer_id: str, reason: GoAwayReason, detail: str) -> None:
        """Ban the peer's node (with back-off) and send it away."""
        ...

    def send_away(self, peer_id: str, reason: GoAwayReason, detail: str) -> None:
        """Send the peer away without a ban (it may come back)."""
        ...


class Reactor:
    """Base of every reactor; the hooks do nothing unless overridden."""

    accepts: ClassVar[tuple[type[Message], ...]] = ()
    _switch: PeerSet | None = None

    def bind(self, switch: PeerSet) -> None:
        """Called once by the switch that routes to this reactor."""
        self._switch = switch

    @property
    def switch(self) -> PeerSet:
        assert self._switch is not None, "a reactor is used only once a switch holds it"
        return self._switch

    def add_peer(self, peer: Peer) -> None:
        """A peer finished its handshake; called before any of its messages arrive."""

    def remove_peer(self, peer: Peer) -> None:
        """A peer's session ended; no message of it follows."""

    async def receive(self, peer: Peer, message: Message) -> None:
        """A message of a type in ``accepts`` from ``peer`` (already decoded and checked)."""

    async def run(self) -> None:
        """The reactor's long-lived work, in the switch's task group."""
