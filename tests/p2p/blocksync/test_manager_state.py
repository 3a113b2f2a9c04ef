"""The sync scheduler under random event sequences (Hypothesis state machine, fake clock).

The machine keeps its own model of what the peers claimed and of our chain, and checks the
scheduler's ranges and stage against it after every event.
"""

from __future__ import annotations

import itertools

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from p2p.blocksync.manager import HEAD_ALLOWANCE, Action, DropPeer, FetchRange, Stage, SyncManager
from p2p.wire.messages import GoAwayReason
from tests.p2p.configs import sync_config

PEERS = st.sampled_from(["a", "b", "c", "d"])
HEIGHT = st.integers(0, 120)


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class SyncMachine(RuleBasedStateMachine):
    """Random event sequences keep the scheduler's invariants."""

    def __init__(self) -> None:
        super().__init__()
        self.clock = FakeClock()
        self.sync = SyncManager(sync_config(), clock=self.clock)
        self.config = self.sync.config
        # The model: what each peer claimed (LIB, head), its strikes, stalls, blocks delivered
        # and unlinkable blocks, who was dropped, our chain, the fork fetch.
        self.claims: dict[str, tuple[int, int]] = {}
        self.strikes: dict[str, int] = {}
        self.stalls: dict[str, int] = {}
        self.delivered: dict[str, int] = {}
        self.unlinkable: dict[str, int] = {}
        self.lost_at: dict[str, int] = {}  # the peer's head, held by us, lost the fork choice
        self.branch_lib: dict[str, int] = {}  # its LIB when its branch was fetched as outranking
        self.dropped: set[str] = set()
        self.head = 0
        self.lib = 0
        self.fork: tuple[str, int] | None = None
        self.stage = Stage.IN_SYNC  # as of the previous step
        self.finish_at = 0  # the peers' head when catch-up was last needed
        self.met_ahead = False  # a peer met since the last step holds blocks above our head

    @initialize(
        span=st.integers(1, 12),
        max_ranges=st.integers(1, 4),
        window=st.integers(1, 40),
        max_strikes=st.integers(1, 3),
        peer_limit=st.integers(1, 3),
    )
    def configure(
        self, span: int, max_ranges: int, window: int, max_strikes: int, peer_limit: int
    ) -> None:
        self.config = sync_config(
            sync_fetch_span=span,
            sync_ranges=max_ranges,
            window=window,
            timeout=5.0,
            peer_limit=peer_limit,
            max_strikes=max_strikes,
            # Claims that no block backs stop counting after a while: pinned apart
            # (test_sync.py), since the model would repeat the rule's bookkeeping.
            claim_trust=float("inf"),
        )
        self.sync.config = self.config

    # --- events ---------------------------------------------------------------------------

    def check_actions(self, actions: list[Action], drops: set[str] | None = None) -> None:
        """What the scheduler asks for at the moment it asks: above our LIB, within the
        window above our head, of a peer that claimed to have the start and was not
        dropped; and it drops exactly ``drops`` (each peer once)."""
        dropped = {a.peer for a in actions if isinstance(a, DropPeer)}
        assert dropped == (drops or set()), (dropped, drops)
        assert not dropped & self.dropped, "a peer is dropped once"
        for peer in dropped:
            self.drop(peer)
        for action in actions:
            if isinstance(action, FetchRange):
                assert self.lib < action.start <= action.end, action
                assert action.end <= self.head + self.config.window, action
                assert self.claims[action.peer][1] >= action.start, action
                assert action.peer not in self.dropped, action

    def outranking(self, drops: set[str]) -> set[str]:
        """After any event: the first peer (in the order they first told us where they are)
        whose LIB is above ours while its head is not above ours has its branch fetched, once
        per LIB it claims — or is dropped, when that makes more than max_strikes branches
        without a block new to us. Returns the peers dropped (besides ``drops``, the event's
        own, which end a fork fetch from them)."""
        if self.fork is not None and self.fork[0] in drops:
            self.fork = None
        dropped: set[str] = set()
        for peer, (lib, head) in self.claims.items():
            if self.fork is not None:
                break
            if peer in self.dropped | drops | dropped:
                continue
            if lib > max(self.lib, self.branch_lib[peer]) and head <= self.head:
                self.branch_lib[peer] = lib
                self.unlinkable[peer] += 1
                if self.unlinkable[peer] > self.config.max_strikes:
                    dropped.add(peer)
                else:
                    self.fork = (peer, head)
        return dropped

    def expect(self, actions: list[Action], drops: set[str] | None = None) -> None:
        """``check_actions``, once the fetch of an outranking branch is modelled too."""
        drops = drops or set()
        self.check_actions(actions, drops | self.outranking(drops))

    def drop(self, peer: str) -> None:
        self.dropped.add(peer)
        if self.fork is not None and self.fork[0] == peer:
            self.fork = None

    @rule(peer=PEERS, lib=HEIGHT, ahead=st.integers(0, 40))
    def peer_position(self, peer: str, lib: int, ahead: int) -> None:
        """A peer tells where it is; a dropped peer is not listened to."""
        for counts in (
            self.strikes,
            self.stalls,
            self.delivered,
            self.unlinkable,
            self.lost_at,
            self.branch_lib,
        ):
            counts.setdefault(peer, 0)
        if peer not in self.dropped:
            met = peer not in self.claims
            old_lib = self.claims.get(peer, (0, 0))[0]
            new_lib = max(old_lib, lib)
            self.claims[peer] = (new_lib, max(lib + ahead, new_lib))
            if met and self.claims[peer][1] > self.head:
                self.finish_at = max(self.finish_at, self.claims[peer][1])
                self.met_ahead = True
            if (
                self.fork is not None
                and self.fork[0] == peer
                and self.claims[peer][1] < self.fork[1]
            ):
                self.fork = None  # it left the branch we were fetching
        self.expect(self.sync.peer_position(peer, lib, lib + ahead))

    def received(self, peer: str, num: int) -> None:
        if peer in self.claims and num > self.claims[peer][1]:
            self.claims[peer] = (self.claims[peer][0], num)
        if self.fork is not None and self.fork[0] == peer and num >= self.fork[1]:
            self.fork = None
        for r in self.sync.ranges:
            if r.peer == peer and r.next_num <= num <= r.end:  # a block sent again is no progress
                self.delivered[peer] += 1
                if num >= r.end:
                    self.stalls[peer] = 0  # a range delivered in full
                break
        self.expect(self.sync.block_received(peer, num))

    @rule(peer=PEERS, num=HEIGHT)
    def block_received(self, peer: str, num: int) -> None:
        self.received(peer, num)

    @precondition(lambda self: bool(self.sync.ranges))
    @rule(which=st.integers(0, 3))
    def range_delivers_its_next_block(self, which: int) -> None:
        """The common case: a range's peer sends the next block; when it is the next one we
        need, it is applied and our chain advances."""
        r = self.sync.ranges[which % len(self.sync.ranges)]
        num = r.next_num
        self.received(r.peer, num)
        if num == self.head + 1:
            self.head = num
            self.expect(self.sync.chain_advanced(self.head, self.lib))

    @rule(peer=PEERS, num=HEIGHT)
    def block_rejected(self, peer: str, num: int) -> None:
        """A block fails validation: max_strikes of them drop the peer, for VALIDATION."""
        actions = self.sync.block_rejected(peer, num, "bad block")
        drops = set()
        if peer in self.claims:
            self.strikes[peer] += 1
            if self.strikes[peer] >= self.config.max_strikes and peer not in self.dropped:
                drops.add(peer)
                assert DropPeer(peer, GoAwayReason.VALIDATION, "bad block") in actions
        self.expect(actions, drops)

    @rule(peer=PEERS, above_lib=st.integers(1, 40))
    def block_unlinkable(self, peer: str, above_lib: int) -> None:
        """A block that does not link (the chain judges only blocks above its LIB so: those
        at or below it are stale or known). More than max_strikes in a row, with no block new
        to us in between, drop the peer; one while its branch is being fetched (not said to
        extend the previous one) counts as well, and extends the fetch up to it."""
        num = self.lib + above_lib
        drops = set()
        if self.fork is not None and self.fork[0] == peer and peer not in self.dropped:
            self.unlinkable[peer] += 1
            if self.unlinkable[peer] > self.config.max_strikes:
                drops.add(peer)
            else:
                self.fork = (peer, max(self.fork[1], num))  # its branch is on its way
        elif peer in self.claims and peer not in self.dropped:
            self.unlinkable[peer] += 1
            if self.unlinkable[peer] > self.config.max_strikes:
                drops.add(peer)
            else:
                self.fork = (peer, max(num, self.claims[peer][1]))
        self.expect(self.sync.block_unlinkable(peer, num), drops)

    @rule(peer=PEERS, num=HEIGHT, joined=st.booleans())
    def block_new_to_us(self, peer: str, num: int, joined: bool) -> None:
        """A valid block new to us: it joined our chain, or the fork database kept it (at
        the peer's head: its branch is not ahead of ours)."""
        if peer in self.unlinkable:
            self.unlinkable[peer] = 0
        if not joined and peer in self.claims and num >= self.claims[peer][1]:
            self.lost_at[peer] = max(self.lost_at[peer], num)
        if joined:
            actions = self.sync.block_applied(peer, num)
        else:
            actions = self.sync.block_kept(peer, num, new=True)
        self.expect(actions)

    @rule(peer=PEERS)
    def peer_closed(self, peer: str) -> None:
        self.claims.pop(peer, None)
        for counts in (
            self.strikes,
            self.stalls,
            self.delivered,
            self.unlinkable,
            self.lost_at,
            self.branch_lib,
        ):
            counts.pop(peer, None)
        self.dropped.discard(peer)
        if self.fork is not None and self.fork[0] == peer:
            self.fork = None
        actions = self.sync.peer_closed(peer)
        assert all(a.peer != peer for a in actions), "a closed peer is not asked again"
        self.expect(actions)

    @rule(forward=st.integers(0, 30), final=st.integers(0, 30))
    def chain_advanced(self, forward: int, final: int) -> None:
        """Our chain moves forward (we produced, or applied blocks relayed to us); the LIB
        never goes back nor above the head."""
        self.head += forward
        self.lib = min(self.head, self.lib + final)
        if self.fork is not None and self.fork[1] <= self.lib:
            self.fork = None  # the branch being fetched is all below our LIB: it cannot win
        self.expect(self.sync.chain_advanced(self.head, self.lib))

    @rule(back=st.integers(1, 6))
    def chain_switched_to_a_shorter_branch(self, back: int) -> None:
        """Our head goes back a few blocks: the fork database ranks a branch with a higher
        LIB above a longer one. Never below our LIB."""
        self.head = max(self.lib, self.head - back)
        self.expect(self.sync.chain_advanced(self.head, self.lib))

    @rule(peer=st.none() | PEERS, above=st.integers(2, 30))
    def applier_waits(self, peer: str | None, above: int) -> None:
        """The applier holds blocks above a gap, the lowest sent by ``peer`` (or nothing):
        if nothing brings our next block, it is asked for, of that peer when it can serve it,
        and never up to the block held."""
        lowest = None
        if peer is not None:
            lowest = (peer, self.head + above)
            self.received(*lowest)
        actions = self.sync.applier_waits(lowest)
        self.expect(actions)
        for action in actions:
            if isinstance(action, FetchRange) and lowest is not None:
                assert action.start > lowest[1] or action.end < lowest[1], action

    @rule(seconds=st.sampled_from([0.5, 2.0, 4.9, 5.1, 30.0]))
    def tick(self, seconds: float) -> None:
        """Stalled ranges are sent out again and earn their peers a stall; a peer that stalls
        before it delivered anything, or max_strikes times in a row, is dropped."""
        self.clock.now += seconds
        drops = set()
        for r in self.sync.ranges:
            if self.clock.now - r.progress_at > self.config.timeout:
                self.stalls[r.peer] += 1
                if self.delivered[r.peer] == 0 or self.stalls[r.peer] >= self.config.max_strikes:
                    drops.add(r.peer)
        actions = self.sync.tick()
        for r in self.sync.ranges:
            stalled_for = self.clock.now - r.progress_at
            assert stalled_for <= self.config.timeout, "a stalled range is sent out again"
        self.expect(actions, drops)

    # --- invariants -----------------------------------------------------------------------

    @invariant()
    def ranges_in_flight_are_bounded(self) -> None:
        """Never more than max_ranges ranges in flight, and at most one per peer."""
        peers = [r.peer for r in self.sync.ranges]
        assert len(peers) <= self.config.sync_ranges
        assert len(set(peers)) == len(peers)

    @invariant()
    def every_range_is_with_a_known_peer_that_has_its_start(self) -> None:
        """A range in flight belongs to a peer still connected whose head reaches its start."""
        for r in self.sync.ranges:
            assert r.peer in self.claims, r
            assert self.claims[r.peer][1] >= r.start, (r, self.claims[r.peer])
            assert r.start <= r.next_num <= r.end + 1, r

    @invariant()
    def no_two_ranges_overlap(self) -> None:
        """No block is asked of two peers at once."""
        spans = sorted((r.start, r.end) for r in self.sync.ranges)
        for (_, end), (start, _) in itertools.pairwise(spans):
            assert end < start, spans

    @invariant()
    def a_struck_or_dropped_peer_is_never_assigned(self) -> None:
        """A peer that earned max_strikes, or was dropped, holds no range (until it reconnects
        afresh)."""
        for r in self.sync.ranges:
            assert self.strikes[r.peer] < self.config.max_strikes, r
            assert r.peer not in self.dropped, r

    @invariant()
    def a_fork_branch_comes_from_its_own_peer(self) -> None:
        """While a fork branch is fetched, a range goes to that peer, or to a peer for which
        the whole range is final (final blocks are the same on every branch)."""
        if self.fork is None:
            return
        for r in self.sync.ranges:
            assert r.peer == self.fork[0] or self.claims[r.peer][0] >= r.end, (r, self.fork)

    @invariant()
    def stage_agrees_with_the_claims(self) -> None:
        """LIB catch-up while some peer's LIB is above our head; head catch-up while fetching
        a fork branch (a block that did not link, or a peer whose LIB is above ours while its
        head is not) or while some peer's head is more than the allowance ahead, and then
        until our head reaches the head they had (or their highest, if lower), and so when a
        peer first met holds blocks above our head; in sync otherwise, with nothing in flight.
        Claims of dropped peers do not count."""
        counted = [(p, c) for p, c in self.claims.items() if p not in self.dropped]
        known_lib = max((lib for _, (lib, _) in counted), default=0)
        known_head = max(
            (head for p, (_, head) in counted if head > self.lost_at[p] + HEAD_ALLOWANCE),
            default=0,
        )
        ahead = known_head > self.head + HEAD_ALLOWANCE
        if known_lib > self.head or (self.fork is None and ahead):
            self.finish_at = known_head
        finishing = (self.stage != Stage.IN_SYNC or self.met_ahead) and self.head < min(
            self.finish_at, known_head
        )
        self.met_ahead = False
        expected = Stage.IN_SYNC
        if known_lib > self.head:
            expected = Stage.LIB_CATCHUP
        elif self.fork is not None or ahead or finishing:
            expected = Stage.HEAD_CATCHUP
        assert self.sync.stage == expected, (self.sync.stage, self.claims, self.head, self.fork)
        self.stage = expected
        if expected == Stage.IN_SYNC:
            assert not self.sync.ranges


# One test: random event sequences keep the scheduler's invariants (about 10 s).
TestSyncScheduler = SyncMachine.TestCase
TestSyncScheduler.settings = settings(
    max_examples=300,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
