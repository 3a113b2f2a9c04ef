"""Errors of the wallet package; the CLI prints them as one line."""

from __future__ import annotations


class WalletError(Exception):
    """Base class of wallet errors."""


class WrongPassword(WalletError):
    """The password does not decrypt the wallet file."""


class WalletFileError(WalletError):
    """The wallet file is missing, unreadable or damaged."""


class BadUrl(WalletError):
    """The node's URL (``--url`` or ``BOR_URL``) is not one the wallet can call."""

    def __init__(self, url: str, reason: str) -> None:
        super().__init__(f"node URL {url!r}: {reason}")
        self.url = url
        self.reason = reason


class NodeUnreachable(WalletError):
    """The node's RPC could not be reached."""


class RpcFailure(WalletError):
    """The node answered with an error."""

    def __init__(self, status: int, name: str, what: str) -> None:
        super().__init__(f"node refused ({status} {name}): {what}")
        self.status = status
        self.name = name
        self.what = what
