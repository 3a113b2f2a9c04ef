"""The sync manager: decides which block ranges to ask of which peer. It does no I/O.

Inputs are events (a peer's chain position, a block received or rejected, a peer gone, our
chain advanced, a clock tick); outputs are actions (``FetchRange``, ``DropPeer``) that the
block-sync reactor (``p2p.blocksync``) carries out. Stages as in EOSIO: ``lib_catchup``
while a peer's LIB is above our head, ``head_catchup`` while a peer's head is ahead by more
than a couple of blocks, ``in_sync`` otherwise — and back to catch-up whenever a peer's
LIB passes our head.

What EOSIO's and CometBFT's users asked for (reference section 5) is built in: ranges
``[next, min(next + span - 1, target)]``; several ranges in flight from different peers,
bounded to a window above our head; the range holding the next needed block is re-requested
first whenever it stalls, so look-ahead never starves it; peers ranked by delivered blocks/s
and RTT and rotated; a range with no progress for ``timeout`` seconds is reassigned; a peer
that closes is replaced; rejected blocks earn strikes and enough strikes drop the peer.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from p2p.messages import GoAwayReason

PeerId = str

# A peer whose head is at most this many blocks ahead is in step with us (0.5 s blocks, a
# network hop and an apply each way).
HEAD_ALLOWANCE = 2
# Delivered blocks/s is an exponentially weighted average with this weight for the newest
# sample, so that a peer that slows down loses its rank within a few ranges.
RATE_WEIGHT = 0.3


class Stage(StrEnum):
    LIB_CATCHUP = "lib_catchup"
    HEAD_CATCHUP = "head_catchup"
    IN_SYNC = "in_sync"


@dataclass(frozen=True, slots=True)
class FetchRange:
    peer: PeerId
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class DropPeer:
    peer: PeerId
    reason: GoAwayReason
    detail: str


Action = FetchRange | DropPeer


@dataclass(slots=True)
class _Peer:
    id: PeerId
    lib: int = 0
    head: int = 0
    rtt: float | None = None
    rate: float | None = None  # None until measured: an untried peer ranks first
    strikes: int = 0
    last_used: float = 0.0
    # The highest head of this peer's that we hold and that lost the fork choice to ours:
    # its branch is not ahead of us until it grows past this.
    lost_at: int = 0


@dataclass(slots=True)
class _Range:
    peer: PeerId
    start: int
    end: int
    next_num: int
    sent_at: float
    progress_at: float
    received: int = 0


@dataclass(slots=True)
class SyncConfig:
    span: int = 500
    max_ranges: int = 3
    window: int = 2000  # blocks above our head that may be requested (the memory bound)
    timeout: float = 5.0
    peer_limit: int = 3
    max_strikes: int = 3


@dataclass(slots=True)
class SyncManager:
    config: SyncConfig = field(default_factory=SyncConfig)
    clock: Callable[[], float] = time.monotonic
    head: int = 0
    lib: int = 0
    stage: Stage = Stage.IN_SYNC
    target: int = 0
    next_request: int = 1
    peers: dict[PeerId, _Peer] = field(default_factory=dict)
    ranges: list[_Range] = field(default_factory=list)
    gaps: list[tuple[int, int]] = field(default_factory=list)
    rewound: bool = False  # requesting blocks at or below our head again, after an unlinkable
    # A peer on a branch we do not know, and how far to fetch it (from LIB + 1) so that the
    # fork database can weigh it against ours: set by an unlinkable block.
    fork: tuple[PeerId, int] | None = None
    _progress: deque[tuple[float, int]] = field(default_factory=lambda: deque(maxlen=64))

    # --- events ---------------------------------------------------------------------------

    def chain_advanced(self, head: int, lib: int) -> list[Action]:
        self.head, self.lib = head, lib
        if self.fork is not None and self.fork[1] <= lib:
            # Our LIB passed the whole branch: it can no longer win, so stop waiting for it
            # (a silent fork peer would otherwise hold us in catch-up, and our producer idle).
            self.fork = None
        self._progress.append((self.clock(), head))
        return self._schedule()

    def peer_position(self, peer: PeerId, lib: int, head: int) -> list[Action]:
        """A handshake or notice told us where ``peer`` is."""
        p = self.peers.setdefault(peer, _Peer(peer))
        p.lib = max(p.lib, lib)  # a LIB never goes back
        p.head = max(head, p.lib)  # a head may (fork switch)
        # Then the peer cannot serve what we asked above its head: reassign it now, not after
        # the timeout.
        for r in [r for r in self.ranges if r.peer == peer and r.next_num > p.head]:
            self._abandon(r)
        return self._schedule()

    def peer_rtt(self, peer: PeerId, rtt: float) -> None:
        if peer in self.peers:
            self.peers[peer].rtt = rtt

    def block_received(self, peer: PeerId, num: int) -> list[Action]:
        now = self.clock()
        p = self.peers.get(peer)
        if p is not None and num > p.head:
            p.head = num
        for r in self.ranges:
            if r.peer == peer and r.start <= num <= r.end:
                r.next_num = max(r.next_num, num + 1)
                r.received += 1
                r.progress_at = now
                if num >= r.end:
                    self._finish(r, now)
                break
        if self.fork is not None and self.fork[0] == peer and num >= self.fork[1]:
            self.fork = None  # all of the branch is here: the fork database decides
        return self._schedule()

    def block_kept(self, peer: PeerId, num: int) -> list[Action]:
        """A valid block from ``peer`` did not become our head (our branch ranks higher, or
        we had it). At the peer's head, its branch is not ahead of ours: stop catching up
        with it, which also lets our producer go on."""
        p = self.peers.get(peer)
        if p is not None and num >= p.head:
            p.lost_at = max(p.lost_at, num)
        return self._schedule()

    def block_rejected(self, peer: PeerId, num: int, detail: str) -> list[Action]:
        """A block from ``peer`` failed validation: strike it and fetch that part again."""
        actions: list[Action] = []
        p = self.peers.get(peer)
        if p is not None:
            p.strikes += 1
            if p.strikes >= self.config.max_strikes:
                actions.append(DropPeer(peer, GoAwayReason.VALIDATION, detail))
        self._release(peer)
        # Everything above our head is suspect now: ask again from the next needed block.
        self.gaps.clear()
        for r in list(self.ranges):
            self.ranges.remove(r)
        self.next_request = self.head + 1
        return actions + self._schedule()

    def block_unlinkable(self, peer: PeerId, num: int) -> list[Action]:
        """A block from ``peer`` does not link to any block we know: the peer is on a branch
        we have not seen (and may be on one the network abandoned). Fetch the peer's branch
        from our LIB + 1 up to its head, from that peer, and let the fork database rank it —
        even when its head is below ours, since a branch can rank higher by its LIB. No
        strike: the peer did nothing wrong."""
        p = self.peers.get(peer)
        if p is None:
            return []
        self.ranges.clear()
        self.gaps.clear()
        self.next_request = self.lib + 1
        self.rewound = True
        self.fork = (peer, max(num, p.head))
        return self._schedule()

    def peer_closed(self, peer: PeerId) -> list[Action]:
        self.peers.pop(peer, None)
        if self.fork is not None and self.fork[0] == peer:
            self.fork = None
        self._release(peer)
        return self._schedule()

    def tick(self) -> list[Action]:
        """Reassign ranges that made no progress for ``timeout`` seconds."""
        now = self.clock()
        for r in list(self.ranges):
            if now - r.progress_at > self.config.timeout:
                slow = self.peers.get(r.peer)
                if slow is not None:
                    slow.rate = 0.5 * (slow.rate or 0.0)
                    slow.last_used = now  # rotate away from it
                self._abandon(r)
        return self._schedule()

    # --- state ------------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        rate = self.blocks_per_second()
        behind = max(0, self.target - self.head)
        return {
            "stage": str(self.stage),
            "head": self.head,
            "lib": self.lib,
            "target": self.target,
            "next_expected": self.head + 1,
            "sources": sorted({r.peer for r in self.ranges}),
            "ranges_in_flight": len(self.ranges),
            "blocks_per_s": round(rate, 1),
            "eta_s": round(behind / rate, 1) if rate > 0 and behind else None,
        }

    def blocks_per_second(self) -> float:
        if len(self._progress) < 2:
            return 0.0
        (t0, n0), (t1, n1) = self._progress[0], self._progress[-1]
        return (n1 - n0) / (t1 - t0) if t1 > t0 else 0.0

    # --- internals --------------------------------------------------------------------------

    def _finish(self, r: _Range, now: float) -> None:
        self.ranges.remove(r)
        p = self.peers.get(r.peer)
        if p is not None and now > r.sent_at:
            sample = r.received / (now - r.sent_at)
            p.rate = sample if p.rate is None else (1 - RATE_WEIGHT) * p.rate + RATE_WEIGHT * sample

    def _abandon(self, r: _Range) -> None:
        self.ranges.remove(r)
        start = max(r.next_num, self.head + 1)
        if start <= r.end:
            self.gaps.append((start, r.end))
            self.gaps.sort()

    def _release(self, peer: PeerId) -> None:
        for r in [r for r in self.ranges if r.peer == peer]:
            self._abandon(r)

    def _stage(self) -> tuple[Stage, int]:
        known_lib = max((p.lib for p in self.peers.values()), default=0)
        known_head = max(
            (p.head for p in self.peers.values() if p.head > p.lost_at + HEAD_ALLOWANCE),
            default=0,
        )
        if known_lib > self.head:
            return Stage.LIB_CATCHUP, known_lib
        if self.fork is not None:
            return Stage.HEAD_CATCHUP, self.fork[1]
        if known_head > self.head + HEAD_ALLOWANCE:
            return Stage.HEAD_CATCHUP, known_head
        return Stage.IN_SYNC, self.head

    def _schedule(self) -> list[Action]:
        stage, target = self._stage()
        if stage != self.stage:
            if self.stage == Stage.IN_SYNC and not self.rewound:
                # Entering catch-up: continue from our head. Should our blocks above the LIB be
                # on a branch the network abandoned, the first block will not link and
                # ``block_unlinkable`` rewinds to LIB + 1 (EOSIO always restarts there, and
                # re-downloads what it has).
                self.next_request = self.head + 1
                self.gaps.clear()
            self.stage = stage
        self.target = target
        if stage == Stage.IN_SYNC:
            self.ranges.clear()
            self.gaps.clear()
            self.rewound = False
            return []
        # Blocks at or below our LIB are final: never ask for them, even when rewound.
        self.next_request = max(self.next_request, self.lib + 1)
        if self.rewound and self.next_request > self.head:
            self.rewound = False
        if not self.rewound:
            self.next_request = max(self.next_request, self.head + 1)
            self.gaps = [(max(s, self.head + 1), e) for s, e in self.gaps if e > self.head]
        actions: list[Action] = []
        limit = self.head + self.config.window
        while len(self.ranges) < self.config.max_ranges:
            if self.gaps:
                start, gap_end = self.gaps[0]
                end = min(gap_end, limit)  # our head may have gone back since (fork switch)
                if start > end:
                    break
            elif self.next_request <= min(target, limit):
                start = self.next_request
                end = min(start + self.config.span - 1, target, limit)
            else:
                break
            peer = self._pick_peer(start, end)
            if peer is None:
                break
            if self.gaps:
                if end < gap_end:
                    self.gaps[0] = (end + 1, gap_end)
                else:
                    self.gaps.pop(0)
            else:
                self.next_request = end + 1
            now = self.clock()
            peer.last_used = now
            self.ranges.append(_Range(peer.id, start, end, start, now, now))
            actions.append(FetchRange(peer.id, start, end))
        return actions

    def _pick_peer(self, start: int, end: int) -> _Peer | None:
        busy = {r.peer for r in self.ranges}
        candidates = [
            p
            for p in self.peers.values()
            if p.id not in busy
            and p.head >= start
            and p.strikes < self.config.max_strikes
            # A branch comes from its own peer; blocks final on another peer are the same.
            and (self.fork is None or p.id == self.fork[0] or p.lib >= end)
        ]
        if not candidates:
            return None

        def rank(p: _Peer) -> tuple[float, float]:
            rate = float("inf") if p.rate is None else p.rate
            return -rate, p.rtt if p.rtt is not None else 1.0

        ranked = sorted(candidates, key=rank)
        best = ranked[: self.config.peer_limit]
        return min(best, key=lambda p: p.last_used)
