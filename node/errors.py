"""Errors of the node package."""

from __future__ import annotations


class NodeError(Exception):
    """Base class of node errors."""


class ConfigError(NodeError):
    """An invalid configuration option; names the option."""

    def __init__(self, option: str, reason: str) -> None:
        super().__init__(f"config option {option!r}: {reason}")
        self.option = option
        self.reason = reason
