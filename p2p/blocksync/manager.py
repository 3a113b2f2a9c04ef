"""The sync manager: decides which block ranges to ask of which peer. It does no I/O.

Inputs are events (a peer's chain position, a block received or rejected, a peer gone, our
chain advanced, a clock tick); outputs are actions (``FetchRange``, ``DropPeer``) that the
block-sync reactor (``p2p.blocksync.reactor``) carries out. Stages as in EOSIO: ``lib_catchup``
while a peer's LIB is above our head, ``head_catchup`` while a peer's head is ahead by more
than a couple of blocks, or while we fetch a branch we do not know, ``in_sync`` otherwise —
and back to catch-up whenever a peer's LIB passes our head.

A branch we do not know is fetched from our LIB + 1, from the peer on it, when one of its
blocks does not link, and when the peer's LIB outranks ours while its head is not above ours
(``PeerRecord.outranks``).

What EOSIO's and CometBFT's users asked for (reference section 5) is built in: ranges
``[next, min(next + span - 1, target)]`` (fewer blocks for slow peers); several ranges in
flight from different peers, bounded to a window above our head; the range holding the next
needed block is re-requested first whenever it stalls, so look-ahead never starves it; peers
ranked by delivered blocks/s and RTT and rotated; a peer that closes is replaced.

Claims are not facts (CometBFT's block pool drops peers that time out or send too slowly):
a range with no block for ``timeout`` seconds is reassigned and earns its peer a stall; a
peer that stalls before it ever sent a block we asked for, or stalls ``max_strikes`` times
without delivering a range in full in between, is dropped (the switch bans it with back-off).
So are peers whose blocks fail validation ``max_strikes`` times, and peers that keep sending
blocks that link to nothing (or, below our LIB, to a made-up parent). A dropped peer's claims
stop counting at once, and a claim that stays ahead of us with no block of the peer's behind
it stops counting after ``claim_trust`` seconds (``_trusted``): it cannot keep us out of sync
for good. A slow peer is demoted instead (one that has sent nothing yet is not slow: the
timeout judges it): the range our chain waits on is taken from it when another peer could
serve it several times faster, and ranges go by each peer's record (``p2p.blocksync.peers``). Peers'
claims hold our producer back only while blocks back them (``holds_production``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from p2p.blocksync.actions import Action, DropPeer, FetchRange, Stage, SyncConfig, SyncStatus
from p2p.blocksync.peers import HeldBlocks, PeerId, PeerRecord, pick
from p2p.blocksync.progress import Progress, SyncProgress
from p2p.wire.messages import GoAwayReason

__all__ = [
    "Action",
    "DropPeer",
    "FetchRange",
    "Stage",
    "SyncConfig",
    "SyncManager",
    "SyncStatus",
]

# A peer whose head is at most this many blocks ahead is in step with us (0.5 s blocks, a
# network hop and an apply each way).
HEAD_ALLOWANCE = 2
# A range that our chain waits on is judged for slowness after this long: a range from a
# healthy peer is done by then (500 blocks take ~0.3 s on loopback, bench_sync.py).
SLOW_AFTER = 2.0


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
class SyncManager:
    config: SyncConfig
    clock: Callable[[], float] = time.monotonic
    head: int = 0
    lib: int = 0
    stage: Stage = Stage.IN_SYNC
    target: int = 0
    next_request: int = 1
    peers: dict[PeerId, PeerRecord] = field(default_factory=dict)
    ranges: list[_Range] = field(default_factory=list)
    gaps: list[tuple[int, int]] = field(default_factory=list)
    rewound: bool = False  # requesting blocks at or below our head again, after an unlinkable
    # A peer on a branch we do not know, and how far to fetch it (from LIB + 1) so that the
    # fork database can weigh it against ours: set by an unlinkable block.
    fork: tuple[PeerId, int] | None = None
    _progress: SyncProgress = field(init=False)
    # When peers' blocks last joined our chain, or catch-up began on claims alone (once, until
    # a block backs them: a liar reconnecting under fresh keys gets no second grace).
    _backed_at: float = float("-inf")
    _claim_grace: bool = True
    _held: HeldBlocks = field(default_factory=HeldBlocks)
    # The head of the last branch fetched because it outranks ours: a peer with the same head
    # claims the same branch, which is on its way or here.
    _outranking_head: bytes | None = None
    # The peers' head when catch-up was last needed: where it ends (``_stage``).
    _finish_at: int = 0
    # A peer met since the last stage decision holds blocks above our head: blocks made before
    # we met are not relayed to us, so catch-up fetches them even within the allowance.
    _met_ahead: bool = False

    def __post_init__(self) -> None:
        self._progress = SyncProgress(self.config.sync_progress_interval_ms / 1000)

    # --- events ---------------------------------------------------------------------------

    def chain_advanced(self, head: int, lib: int, txs: int = 0) -> list[Action]:
        """Our chain's head and LIB are now ``head`` and ``lib``, after applying ``txs``
        transactions (which only the progress figures count)."""
        self.head, self.lib = head, lib
        self._held.forget_upto(lib)
        if self.fork is not None and self.fork[1] <= lib:
            # Our LIB passed the whole branch: it can no longer win, so stop waiting for it
            # (a silent fork peer would otherwise hold us in catch-up, and our producer idle).
            self.fork = None
        self._progress.advanced(self.clock(), head, txs)
        return self._schedule()

    def peer_position(
        self,
        peer: PeerId,
        lib: int,
        head: int,
        head_id: bytes | None = None,
        first: int | None = None,
    ) -> list[Action]:
        """A handshake or notice told us where ``peer`` is; a handshake also says the first
        block it holds (``first``)."""
        met = peer not in self.peers
        p = self.peers.setdefault(peer, PeerRecord(peer))
        if p.dropping:
            return []
        if first is not None:
            p.first = first
        p.lib = max(p.lib, lib)  # a LIB never goes back
        p.head = max(head, p.lib)  # a head may (fork switch)
        if met and p.head > self.head:
            self._finish_at = max(self._finish_at, p.head)
            self._met_ahead = True
        p.head_id = head_id
        self._held.seen_head(p)
        # Then the peer cannot serve what we asked above its head: reassign it now, not after
        # the timeout.
        for r in [r for r in self.ranges if r.peer == peer and r.next_num > p.head]:
            self._abandon(r)
        if self.fork is not None and self.fork[0] == peer and p.head < self.fork[1]:
            # It left the branch we fetch (it switched to one that outranks it, maybe ours):
            # the rest will not come. What came is the fork database's to weigh.
            self.fork = None
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
            # Only a block past what the range brought so far is progress: one sent again and
            # again (a stranger's block numbered our head + 1) must not keep the range alive.
            if r.peer == peer and r.next_num <= num <= r.end:
                r.next_num = num + 1
                r.received += 1
                r.progress_at = now
                if p is not None:
                    p.delivered += 1
                    p.backed_at = now
                if num >= r.end:
                    self._finish(r, now)
                break
        if self.fork is not None and self.fork[0] == peer and num >= self.fork[1]:
            self.fork = None  # all of the branch is here: the fork database decides
        return self._schedule()

    def block_applied(self, peer: PeerId, num: int) -> list[Action]:
        """A block from ``peer`` joined our chain: validated progress, which is what lets
        catch-up hold our producer (``holds_production``)."""
        self._backed_at = self.clock()
        self._claim_grace = True
        p = self.peers.get(peer)
        if p is not None:
            p.unlinkable = 0
            p.backed_at = self._backed_at
        return []

    def block_kept(
        self, peer: PeerId, num: int, new: bool = False, block_id: bytes | None = None
    ) -> list[Action]:
        """A valid block from ``peer`` did not become our head (our branch ranks higher, or
        we had it: ``new`` is False). At the head of ``peer`` (or of any peer whose head is
        ``block_id``), that branch is not ahead of ours: stop catching up with it, which also
        lets our producer go on."""
        p = self.peers.get(peer)
        if p is not None:
            if new:
                p.unlinkable = 0
                p.backed_at = self.clock()
            if num >= p.head:
                p.lost_at = max(p.lost_at, num)
        if block_id is not None and num > self.lib:
            self._held.hold(block_id, num, self.peers.values())
        return self._schedule()

    def block_rejected(self, peer: PeerId, num: int, detail: str) -> list[Action]:
        """A block from ``peer`` failed validation: strike it and fetch that part again."""
        actions: list[Action] = []
        p = self.peers.get(peer)
        if p is not None:
            p.strikes += 1
            if p.strikes >= self.config.max_strikes:
                actions += self._drop(p, GoAwayReason.VALIDATION, detail)
        self._release(peer)
        # Everything above our head is suspect now: ask again from the next needed block.
        self.gaps.clear()
        for r in list(self.ranges):
            self.ranges.remove(r)
        self.next_request = self.head + 1
        return actions + self._schedule()

    def block_stale(
        self, peer: PeerId, num: int, block_id: bytes | None = None, parent: bytes | None = None
    ) -> list[Action]:
        """A block from ``peer`` conflicts with our irreversible chain: the peer is on a branch
        we finalized away from (it was cut off, or came back behind and produced on its old
        head). Honest nodes do that after a partition, each block the child of the one before
        (``block_id``, ``parent``): so that branch costs one strike, and the peer stays
        connected to sync our branch from us; what it was asked for is asked of others. But a
        block whose parent is made up counts as one that links to nothing: a stranger whose
        blocks fall at or below our LIB must not trickle them for good."""
        p = self.peers.get(peer)
        if p is None or p.dropping:
            return []
        if parent is None or parent != p.orphan_tip:
            p.unlinkable += 1
        p.orphan_tip = block_id
        if p.unlinkable > self.config.max_strikes:
            return self._drop(p, GoAwayReason.UNLINKABLE, _unlinkable_detail(p)) + self._schedule()
        self._release(peer)
        return self._schedule()

    def block_unlinkable(
        self, peer: PeerId, num: int, block_id: bytes | None = None, parent: bytes | None = None
    ) -> list[Action]:
        """A block from ``peer`` does not link to any block we know: the peer is on a branch
        we have not seen (and may be on one the network abandoned). Fetch the peer's branch
        from our LIB + 1 up to its head, from that peer, and let the fork database rank it —
        even when its head is below ours, since a branch can rank higher by its LIB. No
        strike for one: the peer may have done nothing wrong. But a peer whose blocks keep
        linking to nothing, while none of them is new to us, is making up branches: each
        such block counts, but for one whose ``parent`` is the peer's previous unlinkable
        block (``block_id``): that is the same unknown branch going on (the rest of a range
        asked before its first block showed the fork, or a block it relayed meanwhile)."""
        p = self.peers.get(peer)
        if p is None or p.dropping:
            return []
        same_branch = parent is not None and parent == p.orphan_tip
        p.orphan_tip = block_id
        if self.fork is not None and self.fork[0] == peer:
            if not same_branch:
                # A stranger trickling or flooding blocks with random parents: without this
                # count, its branch "on its way" would shelter it for good.
                p.unlinkable += 1
                if p.unlinkable > self.config.max_strikes:
                    detail = _unlinkable_detail(p)
                    return self._drop(p, GoAwayReason.UNLINKABLE, detail) + self._schedule()
            # Its branch is on its way: fetch up to this block as well, without starting over
            # (which, on every block it produces, would never let the fetch finish).
            self.fork = (peer, max(self.fork[1], num))
            return self._schedule()
        return self._fetch_branch(p, max(num, p.head)) + self._schedule()

    def applier_waits(self, lowest: tuple[PeerId, int] | None) -> list[Action]:
        """The applier pushed what it could and still holds ``lowest`` (the peer that sent the
        lowest block it holds, and its number; None: nothing). If nothing brings our next
        block (no range, gap or plan covers it: it was asked for and lost, as when it did not
        link then or our head went back since), ask for the blocks up to the next one held or
        planned: of that peer, which has their descendant, or else of anyone."""
        start = self.head + 1
        covered = [r.start <= start <= r.end for r in self.ranges]
        covered += [s <= start <= e for s, e in self.gaps]
        covered += [self.next_request <= start, lowest is not None and lowest[1] <= start]
        if self.stage == Stage.IN_SYNC or self.fork is not None or any(covered):
            return []
        planned = [r.start for r in self.ranges] + [s for s, _ in self.gaps]
        planned += [self.next_request, start + self.config.window] + ([lowest[1]] if lowest else [])
        end = min(n for n in planned if n > start) - 1
        p = self.peers.get(lowest[0]) if lowest else None
        if p is not None and any(q is p for q in self._free(start)):
            return [self._assign(p, start, self._end_for(p, start, end))]
        self.gaps = sorted([*self.gaps, (start, end)])
        return self._schedule()

    def peer_closed(self, peer: PeerId) -> list[Action]:
        self.peers.pop(peer, None)
        if self.fork is not None and self.fork[0] == peer:
            self.fork = None
        self._release(peer)
        return self._schedule()

    def tick(self) -> list[Action]:
        """Reassign ranges that made no progress for ``timeout`` seconds (a stall for their
        peer), and the range our chain waits on if its peer is slow."""
        now = self.clock()
        actions: list[Action] = []
        for r in list(self.ranges):
            if now - r.progress_at > self.config.timeout:
                actions += self._stalled(r, now)
            elif self._slow(r, now) and self.peers[r.peer].delivered:
                # A peer that has sent nothing we asked for is not slow but unproven: it
                # keeps the range until the timeout judges it. Taken away at 2 s, a liar's
                # ranges would never stall, with a peer on our head present (3 producers).
                p = self.peers[r.peer]
                p.rate = r.received / (now - r.sent_at)  # what it does now, not its average
                p.last_used = now
                self._abandon(r)
        return actions + self._schedule()

    # --- state ------------------------------------------------------------------------------

    def holds_production(self) -> bool:
        """Whether our producer should wait for catch-up. Peers' claims alone hold it for at
        most ``pause_grace`` seconds (and only once until blocks back them); after that only
        blocks from peers joining our chain do, each for ``pause_grace`` seconds."""
        return (
            self.stage != Stage.IN_SYNC and self.clock() - self._backed_at < self.config.pause_grace
        )

    def status(self) -> SyncStatus:
        progress = self.progress()
        return SyncStatus(
            stage=self.stage,
            head=self.head,
            lib=self.lib,
            target=self.target,
            next_expected=self.head + 1,
            sources=tuple(sorted({r.peer for r in self.ranges})),
            ranges_in_flight=len(self.ranges),
            blocks_per_s=progress.blocks_per_s,
            txs_per_s=progress.txs_per_s,
            eta_s=progress.eta_s,
            peers=self.peer_count(),
            holds_production=self.holds_production(),
        )

    def progress(self) -> Progress:
        """How fast our head climbs (over the last seconds) and when it reaches the target."""
        return self._progress.reading(self.clock(), self.head, self.target)

    def progress_due(self) -> Progress | None:
        """A reading when a progress line is due (every ``sync_progress_interval_ms`` of a
        catch-up), else None."""
        if not self._progress.due(self.clock(), self.stage != Stage.IN_SYNC):
            return None
        return self.progress()

    def peer_count(self) -> int:
        """Peers whose claims we still hear (not being sent away)."""
        return sum(1 for p in self.peers.values() if not p.dropping)

    # --- internals --------------------------------------------------------------------------

    def _drop(self, p: PeerRecord, reason: GoAwayReason, detail: str) -> list[Action]:
        """Send ``p`` away (once) and stop counting its claims and holding ranges for it."""
        if p.dropping:
            return []
        p.dropping = True
        self._release(p.id)
        if self.fork is not None and self.fork[0] == p.id:
            self.fork = None
        return [DropPeer(p.id, reason, detail)]

    def _fetch_branch(self, p: PeerRecord, upto: int) -> list[Action]:
        """Fetch the branch of ``p`` from our LIB + 1 up to ``upto``, from ``p`` (see
        ``block_unlinkable``); a peer whose branches keep bringing nothing new is dropped."""
        p.unlinkable += 1
        if p.unlinkable > self.config.max_strikes:
            return self._drop(p, GoAwayReason.UNLINKABLE, _unlinkable_detail(p))
        self.ranges.clear()
        self.gaps.clear()
        self.next_request = self.lib + 1
        self.rewound = True
        self.fork = (p.id, upto)
        return []

    def _outranking(self) -> list[Action]:
        """Fetch the branch of a peer that outranks ours though its head is not above ours,
        once per LIB it claims."""
        actions: list[Action] = []
        for p in self.peers.values():
            if self.fork is not None:
                break
            if not p.outranks(self.lib, self.head):
                continue
            p.branch_lib = p.lib
            if p.head_id is None or p.head_id != self._outranking_head:
                self._outranking_head = p.head_id
                actions += self._fetch_branch(p, p.head)
        return actions

    def _stalled(self, r: _Range, now: float) -> list[Action]:
        self._abandon(r)
        p = self.peers.get(r.peer)
        if p is None:
            return []
        p.rate = 0.5 * (p.rate or 0.0)
        p.last_used = now  # rotate away from it
        p.stalls += 1
        waited = round(now - r.progress_at, 1)
        if p.delivered == 0:
            # It claimed blocks up to ``head`` and sent none of those we asked for.
            detail = f"claimed head {p.head}, sent none of {r.start}..{r.end} in {waited} s"
            return self._drop(p, GoAwayReason.BENIGN_OTHER, detail)
        if p.stalls >= self.config.max_strikes:
            detail = f"{p.stalls} ranges not delivered in time"
            return self._drop(p, GoAwayReason.BENIGN_OTHER, detail)
        return []

    def _slow(self, r: _Range, now: float) -> bool:
        """The range holds the next block our chain needs, and another peer (untried, or
        several times faster) could serve it: once that one is free, since a range given up
        goes out before anything new."""
        elapsed = now - r.sent_at
        if r.start > self.head + 1 or elapsed < SLOW_AFTER:
            return False
        live = r.received / elapsed
        return any(q.outpaces(live) for q in self._usable(r.next_num) if q.id != r.peer)

    def _usable(self, start: int) -> list[PeerRecord]:
        return [
            p
            for p in self.peers.values()
            if not p.dropping and p.first <= start <= p.head and p.strikes < self.config.max_strikes
        ]

    def _end_for(self, p: PeerRecord, start: int, end: int) -> int:
        return min(end, start + p.span(self.config.sync_fetch_span) - 1)

    def _finish(self, r: _Range, now: float) -> None:
        self.ranges.remove(r)
        p = self.peers.get(r.peer)
        if p is not None:
            p.stalls = 0
            p.measured(r.received, now - r.sent_at)

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
        counted = [p for p in self.peers.values() if self._trusted(p)]
        known_lib = max((p.lib for p in counted), default=0)
        known_head = max(
            (p.head for p in counted if p.head > p.lost_at + HEAD_ALLOWANCE),
            default=0,
        )
        if known_lib > self.head:
            self._finish_at = known_head
            return Stage.LIB_CATCHUP, known_lib
        if self.fork is not None:
            return Stage.HEAD_CATCHUP, self.fork[1]
        if known_head > self.head + HEAD_ALLOWANCE:
            self._finish_at = known_head
            return Stage.HEAD_CATCHUP, known_head
        # A catch-up ends on the head the peers had when it was last needed, even when that is
        # within the allowance: a node joining a chain that does not produce, or that
        # finalizes a block below its head (finality by votes), would otherwise stop a block
        # or two short. Not on later heads, which relay brings (chasing them would keep a
        # producer in catch-up, held back from its own slots), but on the head of a peer just
        # met (or met again after every peer had gone): relay will not bring what it had.
        finish = min(self._finish_at, known_head)
        if (self.stage != Stage.IN_SYNC or self._met_ahead) and self.head < finish:
            return Stage.HEAD_CATCHUP, finish
        return Stage.IN_SYNC, self.head

    def _trusted(self, p: PeerRecord) -> bool:
        """Whether the claims of ``p`` count for the stage: not dropped, and backed by blocks.
        A claim that goes ahead of us is trusted for ``claim_trust`` seconds, and as long
        after each block of the peer's that came in order in a range we asked for, or joined
        our chain; a claim that stays ahead with no block behind it stops counting."""
        if p.dropping:
            return False
        now = self.clock()
        ahead = p.lib > self.head or p.head > max(self.head, p.lost_at)
        if ahead and not p.ahead:
            p.backed_at = max(p.backed_at, now)
        p.ahead = ahead
        return now - p.backed_at < self.config.claim_trust

    def _schedule(self) -> list[Action]:
        actions = self._outranking()
        stage, target = self._stage()
        self._met_ahead = False
        if stage != self.stage:
            if self.stage == Stage.IN_SYNC:
                self._progress.restart(self.clock(), self.head)
                if self._claim_grace:
                    self._backed_at = max(self._backed_at, self.clock())
                    self._claim_grace = False
                if not self.rewound:
                    # Entering catch-up: continue from our head. Should our blocks above the
                    # LIB be on a branch the network abandoned, the first block will not link
                    # and ``block_unlinkable`` rewinds to LIB + 1 (EOSIO always restarts
                    # there, and re-downloads what it has).
                    self.next_request = self.head + 1
                    self.gaps.clear()
            self.stage = stage
        self.target = target
        if stage == Stage.IN_SYNC:
            self.ranges.clear()
            self.gaps.clear()
            self.rewound = False
            return actions
        # Blocks at or below our LIB are final: never ask for them, even when rewound.
        self.next_request = max(self.next_request, self.lib + 1)
        if self.rewound and self.next_request > self.head:
            self.rewound = False
        if not self.rewound:
            self.next_request = max(self.next_request, self.head + 1)
            self.gaps = [(max(s, self.head + 1), e) for s, e in self.gaps if e > self.head]
        limit = self.head + self.config.window
        while len(self.ranges) < self.config.sync_ranges:
            if self.gaps:
                start, gap_end = self.gaps[0]
                end = min(gap_end, limit)  # our head may have gone back since (fork switch)
                if start > end:
                    break
            elif self.next_request <= min(target, limit):
                start = self.next_request
                end = min(target, limit)
            else:
                break
            peer = self._pick_peer(start, end)
            if peer is None:
                break
            end = self._end_for(peer, start, end)
            if self.gaps:
                if end < gap_end:
                    self.gaps[0] = (end + 1, gap_end)
                else:
                    self.gaps.pop(0)
            else:
                self.next_request = end + 1
            actions.append(self._assign(peer, start, end))
        return actions

    def _assign(self, p: PeerRecord, start: int, end: int) -> FetchRange:
        now = self.clock()
        p.last_used = now
        self.ranges.append(_Range(p.id, start, end, start, now, now))
        return FetchRange(p.id, start, end)

    def _free(self, start: int) -> list[PeerRecord]:
        """Usable peers holding no range, if another range may go out."""
        if len(self.ranges) >= self.config.sync_ranges:
            return []
        busy = {r.peer for r in self.ranges}
        return [p for p in self._usable(start) if p.id not in busy]

    def _pick_peer(self, start: int, end: int) -> PeerRecord | None:
        candidates = [
            p
            for p in self._free(start)
            # A branch comes from its own peer; blocks final on another peer are the same.
            if self.fork is None or p.id == self.fork[0] or p.lib >= self._end_for(p, start, end)
        ]
        return pick(candidates, self.config.peer_limit)


def _unlinkable_detail(p: PeerRecord) -> str:
    return f"{p.unlinkable} blocks or branches that link to no block we know or bring none new"
