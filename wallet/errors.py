"""The wallet CLI's own errors (its arguments and files); the CLI prints them, and the SDK's
(``bor_client.errors``: the node, the wallet file), as one line."""

from __future__ import annotations


class WalletError(Exception):
    """Base class of the wallet CLI's errors."""


class WalletFileError(WalletError):
    """A file the CLI reads (the password file) is missing or unreadable."""
