"""Compiled modules kept on disk by code hash, so that a restarted node does not compile again.

A file holds wasmtime's serialized module after a magic and the SHA-256 of what follows, so a
truncated or damaged file (a crash mid-write, a bad disk) is found and compiled anew rather
than handed to wasmtime, which trusts what it deserializes. wasmtime itself refuses an
artefact of another version or configuration, and that too means compiling again. The files
live in the node's data directory, which the node alone writes (as it does its LevelDB
store); nothing here comes from a peer.

Bounded by count (the least recently used go first): a few MiB each at the size limit.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
from pathlib import Path

import structlog
import wasmtime

log = structlog.get_logger("contracts")

MAGIC = b"BORCWASM1\n"
MAX_FILES = 256


class ArtefactDir:
    """code hash -> compiled module, in ``path`` (made on first write)."""

    def __init__(self, path: Path, max_files: int = MAX_FILES) -> None:
        self.path = path
        self.max_files = max_files
        self._lock = threading.Lock()

    def _file(self, digest: bytes) -> Path:
        return self.path / f"{digest.hex()}.cwasm"

    def load(self, engine: wasmtime.Engine, digest: bytes) -> wasmtime.Module | None:
        """The module compiled earlier from the code of ``digest``, or None (not kept, or
        kept damaged or for another engine: the file is removed)."""
        path = self._file(digest)
        try:
            data = path.read_bytes()
        except OSError:
            return None
        head = len(MAGIC) + 32
        body = memoryview(data)[head:]
        if data[: len(MAGIC)] != MAGIC or hashlib.sha256(body).digest() != data[len(MAGIC) : head]:
            log.warning("compiled_contract_damaged", file=path.name)
            self._remove(path)
            return None
        try:
            module = wasmtime.Module.deserialize(engine, bytes(body))
        except wasmtime.WasmtimeError as err:
            log.info("compiled_contract_stale", file=path.name, why=str(err).splitlines()[0])
            self._remove(path)
            return None
        with contextlib.suppress(OSError):
            os.utime(path)  # recently used: evicted last
        return module

    def store(self, digest: bytes, module: wasmtime.Module) -> None:
        """Keep ``module``; a failure to is logged and costs only a compilation later."""
        body = module.serialize()
        path = self._file(digest)
        temp = path.with_suffix(f".tmp{threading.get_ident()}")
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            with open(temp, "wb") as f:
                f.write(MAGIC + hashlib.sha256(body).digest())
                f.write(body)
            os.replace(temp, path)  # whole or absent, whatever happens mid-write
        except OSError as err:
            log.warning("compiled_contract_not_kept", file=path.name, why=str(err))
            self._remove(temp)
            return
        self._evict()

    def _evict(self) -> None:
        with self._lock:
            try:
                files = [(p.stat().st_mtime, p) for p in self.path.glob("*.cwasm")]
            except OSError:
                return
            if len(files) <= self.max_files:
                return
            files.sort()
            for _, path in files[: len(files) - self.max_files]:
                self._remove(path)

    @staticmethod
    def _remove(path: Path) -> None:
        with contextlib.suppress(OSError):
            path.unlink()
