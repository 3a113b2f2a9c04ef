"""The header chain a state sync follows, kept in the data dir across restarts."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import structlog

from chain.core.header_chain import Checkpoint, HeaderChain
from chain.core.primitives.errors import ChainError
from chain.core.primitives.params import ChainParams

log = structlog.get_logger("state_sync")

HEADER_CHECKPOINT = "state-sync-headers"


class HeaderCheckpointFile:
    """The last ``HeaderChain.checkpoint`` taken, in one file written whole or not at all
    (a temporary file, synced, renamed over it): a node killed in the middle of a state sync
    follows the headers on from there, not from genesis."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def load(self, params: ChainParams, chain_id: bytes) -> HeaderChain | None:
        """The chain kept, or None (none kept, or one that cannot be read back: dropped)."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as err:
            log.warning("header_checkpoint_discarded", why=str(err))
            return None
        try:
            chain = HeaderChain.resume(raw, params, chain_id)
        except ChainError as err:
            log.warning("header_checkpoint_discarded", why=str(err))
            self.remove()
            return None
        log.info("headers_resumed", lib=chain.lib)
        return chain

    async def save(self, checkpoint: Checkpoint) -> None:
        """Keep ``checkpoint`` (encoded and written on a worker thread); a failed write is
        logged and the previous checkpoint stays."""
        try:
            await asyncio.to_thread(self._write, checkpoint)
        except OSError as err:
            log.warning("header_checkpoint_not_saved", why=str(err))

    def _write(self, checkpoint: Checkpoint) -> None:
        raw = checkpoint.encode()
        part = self.path.with_name(self.path.name + ".part")
        with part.open("wb") as f:
            f.write(raw)
            f.flush()
            os.fsync(f.fileno())
        os.replace(part, self.path)

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)
        self.path.with_name(self.path.name + ".part").unlink(missing_ok=True)
