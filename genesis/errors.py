"""Errors of the genesis package."""

from __future__ import annotations


class GenesisError(Exception):
    """A genesis file that is missing, unreadable or inconsistent; names the field."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"genesis field {field!r}: {reason}")
        self.field = field
        self.reason = reason
