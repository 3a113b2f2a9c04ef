"""Types of the compiled core (``_fastcore.pyx``); ``engine`` is its only importer."""

from typing import Any

def apply_transfers(view: Any, txs: list[Any], start: int, ctx: Any, check_auth: bool) -> int: ...
