"""Types of the compiled decoder (``_fastdecode.pyx``); ``engine`` is its only importer."""

from collections.abc import Callable
from typing import Any

def decode_transactions(
    wire: list[Any], kept: dict[bytes, Any], reference: Callable[[Any], Any]
) -> tuple[Any, ...]: ...
