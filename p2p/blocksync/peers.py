"""What the sync manager knows of each peer: what it claims, and what it did.

Claims (LIB, head and its id) come from handshakes and notices and cost nothing to make up;
a claimed head that is a block we hold (``HeldBlocks``) is not ahead of us. The record
(blocks delivered, blocks/s, strikes, stalls, blocks that link to nothing) is what the peer
did when asked. Ranges go by the record: untried peers first, then the fastest few in turn,
leaving out those several times slower than the fastest free peer, each range sized to what
its peer delivers in a few seconds. The sync manager (``p2p.blocksync.manager``) decides when a
record gets a peer dropped; like it, this module does no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

PeerId = str

# Delivered blocks/s is an exponentially weighted average with this weight for the newest
# sample, so that a peer that slows down loses its rank within a few ranges.
RATE_WEIGHT = 0.3
# A peer is slow when another delivers this many times faster: it then loses the range our
# chain waits on and is not picked while faster peers are free. Four, so that the noise of
# one measurement (RTT, our own load) never moves a range back and forth.
SLOW_FACTOR = 4.0
# A peer whose rate we know gets ranges of what it delivers in this long (at most ``span``):
# well inside the sync timeout, and a range taken from a slow peer costs about this much.
RANGE_SECONDS = 2.0
# Held blocks remembered at most: a peer's head is recent, and 2,000 blocks (17 minutes of
# 0.5 s blocks, the sync window) cover any branch a peer still stands on, in 260 KiB.
HELD_BLOCKS = 2000


@dataclass(slots=True)
class PeerRecord:
    id: PeerId
    lib: int = 0
    head: int = 0
    first: int = 1  # the lowest block it holds (started from a snapshot there)
    rtt: float | None = None
    rate: float | None = None  # None until measured: an untried peer ranks first
    strikes: int = 0  # its blocks that failed validation
    stalls: int = 0  # its ranges reassigned for silence since it last delivered one in full
    delivered: int = 0  # blocks it sent of ranges we asked it for
    unlinkable: int = 0  # blocks that link to nothing, since its last block new to us
    dropping: bool = False  # sent away: its claims no longer count
    last_used: float = 0.0
    # The highest head of this peer's that we hold and that lost the fork choice to ours:
    # its branch is not ahead of us until it grows past this.
    lost_at: int = 0
    head_id: bytes | None = None  # as its last handshake or notice said
    branch_lib: int = 0  # its LIB when we last fetched its branch for outranking ours
    # When its claims last went ahead of ours, or a block of it last backed them (one that
    # came in order in a range we asked for, or that joined our chain or was new to us).
    backed_at: float = float("-inf")
    ahead: bool = False  # whether its claims were ahead of ours when last looked at
    orphan_tip: bytes | None = None  # the id of its last block that linked to nothing

    def measured(self, blocks: int, seconds: float) -> None:
        """A range of ours ended after ``blocks`` blocks in ``seconds``."""
        if seconds <= 0:
            return
        sample = blocks / seconds
        old = self.rate
        self.rate = sample if old is None else (1 - RATE_WEIGHT) * old + RATE_WEIGHT * sample

    def span(self, most: int) -> int:
        """Blocks to ask of this peer at once: ``most``, or what it delivers in
        ``RANGE_SECONDS`` once its rate is known."""
        if self.rate is None:
            return most
        return max(1, min(most, int(self.rate * RANGE_SECONDS)))

    def outranks(self, lib: int, head: int) -> bool:
        """Whether this peer is on a branch that outranks ours (LIB ``lib``, head ``head``)
        though its head is not above ours, and we have not fetched it for this LIB yet. A LIB
        only grows along a branch, so a peer whose LIB is above ours while its head is not
        above ours is on another branch, which fork choice ranks higher (by LIB first) even
        though it is shorter; catch-up, which looks above our head only, would never fetch
        it."""
        return not self.dropping and self.lib > max(lib, self.branch_lib) and self.head <= head

    def outpaces(self, rate: float) -> bool:
        """Untried, or measured ``SLOW_FACTOR`` times faster than ``rate`` blocks/s."""
        return self.rate is None or self.rate > rate * SLOW_FACTOR


def pick(candidates: Sequence[PeerRecord], limit: int) -> PeerRecord | None:
    """The peer for the next range: of the ``limit`` best by rate (then RTT), leaving out
    those slow beside the fastest, the one used least recently."""
    if not candidates:
        return None

    def rank(p: PeerRecord) -> tuple[float, float]:
        rate = float("inf") if p.rate is None else p.rate
        return -rate, p.rtt if p.rtt is not None else 1.0

    ranked = sorted(candidates, key=rank)
    fastest = ranked[0]
    best = [p for p in ranked[:limit] if p.rate is None or not fastest.outpaces(p.rate)]
    return min(best, key=lambda p: p.last_used)


@dataclass(slots=True)
class HeldBlocks:
    """Blocks above our LIB that we hold and that did not become our head (id -> number): a
    peer whose head is one of them is not ahead of us, whichever peer sent us the block. At
    most ``limit``, the oldest forgotten first (they matter least)."""

    limit: int = HELD_BLOCKS
    _nums: dict[bytes, int] = field(default_factory=dict)

    def hold(self, block_id: bytes, num: int, peers: Iterable[PeerRecord]) -> None:
        self._nums[block_id] = num
        if len(self._nums) > self.limit:
            del self._nums[next(iter(self._nums))]
        for p in peers:
            if p.head_id == block_id:
                p.lost_at = max(p.lost_at, num)

    def seen_head(self, p: PeerRecord) -> None:
        """``p`` told us its head: if we hold it, its branch is not ahead of ours."""
        if p.head_id in self._nums:
            p.lost_at = max(p.lost_at, p.head)

    def forget_upto(self, lib: int) -> None:
        for block_id in [i for i, num in self._nums.items() if num <= lib]:
            del self._nums[block_id]
