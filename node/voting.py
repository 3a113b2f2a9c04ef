"""This node's finalizers: they vote on each new head, and never forget how they voted.

After every new head the service asks each of its keys' safety rules
(``chain.core.consensus.finalizer.decide_vote``) whether to vote, signs the votes, writes every
key's safety info to ``<data-dir>/finalizer/safety.dat`` and fsyncs it (file and directory), and
only then hands the votes to the network. A node killed at any instant therefore restarts
with a record at least as new as any vote it sent, and cannot vote against one (Spring's
``safety.dat``). A key with no record starts locked on the node's LIB.

A head is voted on while the node is in sync, or when it is from one of the last
``IN_STEP_SLOTS`` slots whatever peers claim (a stranger's claims must not silence our
finalizers), and looked at again every ``RECHECK_SECONDS``: a head skipped while the node
was out of sync gets its vote once it is back, even when no new head comes (a paused
producer waits for exactly that vote).

A deleted or lost safety file is the one way to make an honest finalizer double-vote: an
operator who moves a finalizer key to another host moves the file with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import structlog

from chain.core.consensus.dpos import HeaderState
from chain.core.consensus.finality import BlockRef, finalizer_policy
from chain.core.consensus.finalizer import SafetyInfo, VoteDecision, decide_vote, decode_safety_info
from chain.core.consensus.qc import Vote
from chain.core.primitives.crypto import PrivateKey, public_key_to_text
from chain.core.primitives.encoding import pack, unpack
from chain.core.primitives.errors import ChainError
from chain.core.primitives.params import slot_of_ms
from chain.core.primitives.types import PublicKey
from chain.events import ChainUpdate
from chain.view import ChainView
from node.errors import NodeError
from node.producer import IN_STEP_SLOTS

__all__ = ["SAFETY_FILE", "FinalizerService", "load_safety", "save_safety"]

log = structlog.get_logger("finalizer")

SAFETY_FILE = "safety.dat"
# How often a head not yet considered is looked at again without a new head: half a slot,
# so that a node back in sync votes within it (a check costs one comparison).
RECHECK_SECONDS = 0.25


def load_safety(path: Path) -> dict[PublicKey, SafetyInfo]:
    """Every key's safety info from ``path`` (empty if there is no file yet)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return {}
    except OSError as err:
        raise NodeError(f"cannot read the finalizer safety file {path}: {err.strerror}") from err
    try:
        raw: Any = unpack(data, "finalizer safety file")
        if type(raw) is not list:
            raise ChainError("not a list of records")
        return {PublicKey(key): decode_safety_info(record) for key, record in raw}
    except (ChainError, TypeError, ValueError) as err:
        # Never vote from a damaged record: the operator must look (and restore it).
        raise NodeError(f"the finalizer safety file {path} is damaged: {err}") from err


def save_safety(path: Path, infos: dict[PublicKey, SafetyInfo]) -> None:
    """Write ``infos`` durably: a temporary file, fsync, rename over the old one, fsync
    the directory (a rename is only durable once its directory is)."""
    tmp = path.with_suffix(".tmp")
    data = pack([[key, info.encode()] for key, info in sorted(infos.items())])
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


class FinalizerService:
    """Owns the finalizer keys and their safety info; one task (``run``) decides, persists
    and sends, so votes and the file never race."""

    def __init__(
        self,
        keys: dict[PublicKey, PrivateKey],
        directory: Path,
        view: Callable[[], ChainView],
        send: Callable[[Vote], None],
        may_vote: Callable[[], bool] = lambda: True,  # False while catching up
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.keys = keys
        self._clock = clock
        self.path = directory / SAFETY_FILE
        self._view = view
        self._send = send
        self._may_vote = may_vote
        directory.mkdir(parents=True, exist_ok=True)
        self.safety = load_safety(self.path)
        self._changed = asyncio.Event()
        self._considered: bytes | None = None
        self.cast = 0

    def chain_updated(self, update: ChainUpdate) -> None:
        """A subscriber of the chain's updates: a new head may deserve our votes."""
        if update.view.head.id != self._considered:
            self._changed.set()

    def may_vote(self, view: ChainView) -> bool:
        """In sync, or our head is from one of the last slots: then it is the network's head
        as far as anyone can tell, and a peer claiming more cannot keep us from voting."""
        now_slot = slot_of_ms(int(self._clock() * 1000))
        return self._may_vote() or now_slot - view.head.slot <= IN_STEP_SLOTS

    def _safety_of(self, key: PublicKey, view: ChainView) -> SafetyInfo:
        info = self.safety.get(key)
        if info is None:
            info = SafetyInfo.starting_at(BlockRef(view.lib_id, view.lib_slot, 0))
        return info

    def decide(self, head: HeaderState, view: ChainView) -> tuple[list[Vote], bool]:
        """The votes our keys cast on ``head`` and whether any safety info changed."""
        core = head.core
        if core is None:
            return [], False
        policy = finalizer_policy(view.params, head.active)
        votes: list[Vote] = []
        changed = False
        for finalizer in policy.finalizers:
            key = self.keys.get(finalizer.key)
            if key is None:
                continue
            before = self._safety_of(finalizer.key, view)
            decision, after = decide_vote(before, core)
            if after != before:
                self.safety[finalizer.key] = after
                changed = True
            if decision is not VoteDecision.NO_VOTE:
                strong = decision is VoteDecision.STRONG
                votes.append(Vote.sign(view.chain_id, head.id, strong, key))
        return votes, changed

    async def run(self) -> None:
        if self.keys:
            log.info("finalizer_started", keys=len(self.keys), safety_file=str(self.path))
        while self.keys:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), RECHECK_SECONDS)
            self._changed.clear()
            view = self._view()
            if view.head.id == self._considered or not self.may_vote(view):
                continue
            self._considered = view.head.id
            votes, changed = self.decide(view.head, view)
            if changed:
                # The record reaches the disk before any vote leaves the process.
                await asyncio.to_thread(save_safety, self.path, dict(self.safety))
            for vote in votes:
                self.cast += 1
                self._send(vote)

    def status(self) -> list[dict[str, Any]]:
        """Each key's safety info, for get_finalizer_info."""
        view = self._view()
        out = []
        for key in sorted(self.keys):
            info = self._safety_of(key, view)
            last = info.last_vote
            out.append(
                {
                    "key": public_key_to_text(key),
                    "lock": {"block_num": info.lock.num, "block_id": info.lock.id.hex()},
                    "last_vote": None
                    if last is None
                    else {"block_num": last.num, "block_id": last.id.hex(), "slot": last.slot},
                }
            )
        return out
