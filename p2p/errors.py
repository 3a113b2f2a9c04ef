"""The error hierarchy of the p2p package."""

from __future__ import annotations


class P2PError(Exception):
    """Base class of p2p errors."""


class MalformedMessage(P2PError):
    """Bytes from a peer that are not a valid frame or message."""


class OversizedFrame(MalformedMessage):
    """A frame whose announced length exceeds the limit (refused before reading it)."""


class ChannelClosed(P2PError):
    """The channel was closed (by us or cleanly by the peer)."""


class ChannelBroken(ChannelClosed):
    """The channel failed underneath (reset, broken pipe, timeout)."""


class HandshakeFailed(P2PError):
    """The peer was refused during the handshake; carries the go_away reason."""

    def __init__(self, reason: int, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail
