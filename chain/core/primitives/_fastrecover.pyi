"""Types of the compiled batch recovery (``_fastrecover.pyx``); ``engine`` is its only importer."""

from collections.abc import Callable
from typing import Any

class BatchRecovery:
    def __init__(
        self,
        ctx: int,
        parse: int,
        recover: int,
        serialize: int,
        flags: int,
        keep: object,
        reference: Callable[[list[Any]], list[Any]],
    ) -> None: ...
    def __call__(self, items: list[tuple[bytes, bytes]]) -> list[Any]: ...
