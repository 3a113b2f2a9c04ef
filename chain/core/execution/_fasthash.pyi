"""Types of the compiled commitment and the changes it hashes (``_fasthash.pyx``); ``engine``
is its only importer."""

from collections.abc import Iterable, Sequence
from typing import Any

def sum_into(lanes: Any, entries: Iterable[tuple[bytes, bytes]], hasher: Any) -> None: ...
def move(
    lanes: Any,
    changes: Sequence[tuple[bytes, bytes | None]],
    before: Any,
    hasher: Any,
    memo: dict[bytes, bytes],
    bound: int,
) -> None: ...
def changes(view: Any) -> list[tuple[bytes, bytes | None]]: ...
