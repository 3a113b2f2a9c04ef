"""The sync manager as a scheduler, with a fake clock and fake peers."""

from __future__ import annotations

from p2p.blocksync.manager import DropPeer, FetchRange, Stage
from p2p.wire.messages import GoAwayReason
from tests.p2p.blocksync.rig import deliver, deliver_only, manager, stage


def test_a_catch_up_ends_on_the_peers_head_even_within_the_allowance() -> None:
    """A peer one block ahead does not start a catch-up, but a catch-up under way fetches up
    to the peers' head: a node joining a chain finalized one block below its head (or one
    that is not producing) ends on the head, not short of it."""
    sync, _ = manager()
    assert sync.peer_position("a", lib=150, head=151) == [FetchRange("a", 1, 100)]
    deliver(sync, "a", 1, 100)
    actions = deliver(sync, "a", 101, 150)
    assert FetchRange("a", 151, 151) in actions and stage(sync) == Stage.HEAD_CATCHUP
    sync.block_received("a", 151)
    sync.chain_advanced(151, 150)
    assert stage(sync) == Stage.IN_SYNC
    assert sync.peer_position("a", lib=150, head=153) == [], "two ahead, in step: no catch-up"
    assert stage(sync) == Stage.IN_SYNC


def test_a_peer_started_from_a_snapshot_is_never_asked_for_older_blocks() -> None:
    """A peer whose first block is 500 serves nothing below it: ranges below go to a peer
    holding the whole history, and with no such peer nothing is asked at all."""
    sync, _ = manager()
    assert sync.peer_position("snap", lib=900, head=910, first=500) == []
    assert stage(sync) == Stage.LIB_CATCHUP
    assert sync.peer_position("full", lib=900, head=910) == [FetchRange("full", 1, 100)]
    deliver(sync, "full", 1, 100)
    sync2, _ = manager()
    sync2.chain_advanced(600, 590)
    assert sync2.peer_position("snap", lib=900, head=910, first=500) == [
        FetchRange("snap", 601, 700)
    ], "above its first block it serves like any peer"


def test_ranges_from_lib_plus_one_spread_over_peers() -> None:
    """Ranges from our LIB + 1 go one per peer up to max_ranges; a delivered range frees a slot for
    a waiting peer."""
    sync, _ = manager()
    assert sync.peer_position("a", lib=450, head=460) == [FetchRange("a", 1, 100)]
    assert stage(sync) == Stage.LIB_CATCHUP and sync.target == 450
    assert sync.peer_position("b", lib=450, head=460) == [FetchRange("b", 101, 200)]
    assert sync.peer_position("c", lib=440, head=455) == [FetchRange("c", 201, 300)]
    assert sync.peer_position("d", lib=450, head=460) == [], "at most three ranges in flight"
    actions = deliver(sync, "a", 1, 100)
    assert FetchRange("d", 301, 400) in actions
    assert sync.status().sources == ("b", "c", "d")


def test_last_range_stops_at_the_target_then_head_catchup_then_in_sync() -> None:
    """The last range stops at the peers' LIB; head catch-up then fetches up to their head, and
    after it we are in sync."""
    sync, _ = manager(sync_ranges=1)
    assert sync.peer_position("a", lib=150, head=160) == [FetchRange("a", 1, 100)]
    assert FetchRange("a", 101, 150) in deliver(sync, "a", 1, 100)
    actions = deliver(sync, "a", 101, 150)
    assert stage(sync) == Stage.HEAD_CATCHUP
    assert FetchRange("a", 151, 160) in actions
    deliver(sync, "a", 151, 160)
    assert stage(sync) == Stage.IN_SYNC


def test_a_stalled_range_is_reassigned_first() -> None:
    """A range that stalls past the timeout has its undelivered rest sent out again before anything
    new, and its peer earns a stall (not a drop: it delivered before)."""
    sync, clock = manager(sync_ranges=2)
    for name in ("slow", "fast", "spare"):
        sync.peer_position(name, lib=1000, head=1000)
    assert [r.peer for r in sync.ranges] == ["slow", "fast"]
    deliver(sync, "slow", 1, 10)  # then slow stalls in the middle of 1..100
    clock.now += 3
    deliver_only(sync, "fast", 101, 150)
    clock.now += 3
    # The rest of slow's range is the next needed part: it goes out before anything new.
    assert sync.tick() == [FetchRange("spare", 11, 100)]
    assert sync.peers["slow"].stalls == 1 and not sync.peers["slow"].dropping


def test_a_closed_peer_is_replaced() -> None:
    """When the peer holding a range closes, its range goes to another peer."""
    sync, _ = manager(sync_ranges=1)
    sync.peer_position("a", lib=500, head=500)
    sync.peer_position("b", lib=500, head=500)
    assert [(r.peer, r.start) for r in sync.ranges] == [("a", 1)]
    assert sync.peer_closed("a") == [FetchRange("b", 1, 100)]


def test_strikes_drop_a_peer_and_rewind() -> None:
    """A rejected block is refetched from another peer; at max_strikes the bad peer is dropped for
    VALIDATION."""
    sync, _ = manager(sync_ranges=1, max_strikes=2)
    sync.peer_position("bad", lib=500, head=500)
    sync.peer_position("good", lib=500, head=500)
    deliver(sync, "bad", 1, 5)
    first = sync.block_rejected("bad", 6, "bad signature")
    assert first == [FetchRange("good", 6, 105)], "refetched from the next needed block"
    second = sync.block_rejected("bad", 7, "bad signature")
    assert DropPeer("bad", GoAwayReason.VALIDATION, "bad signature") in second


def test_stale_blocks_of_one_branch_are_one_strike() -> None:
    """A peer whose blocks conflict with our irreversible chain (it was cut off and produced on
    its own branch, each block the child of the one before) is not dropped for them, however
    many it sends; what it was asked for goes to another peer."""
    sync, _ = manager(sync_ranges=1, max_strikes=2)
    sync.peer_position("behind", lib=500, head=500)
    sync.peer_position("good", lib=500, head=500)
    deliver(sync, "behind", 1, 5)
    actions = [
        a for n in range(6, 12) for a in sync.block_stale("behind", n, b"b%d" % n, b"b%d" % (n - 1))
    ]
    assert not any(isinstance(a, DropPeer) for a in actions), actions
    assert FetchRange("good", 6, 100) in actions, "the rest of its range, from another peer"
    assert sync.peers["behind"].unlinkable == 1


def test_stale_blocks_with_made_up_parents_drop_the_peer_for_unlinkable() -> None:
    """A stranger whose trickled blocks fall at or below our LIB (numbered after a head it
    heard late), each with a random parent, is dropped for UNLINKABLE at the
    (max_strikes + 1)th, as for blocks above the LIB that link to nothing; a block new to
    us in between starts the count again."""
    sync, _ = manager(max_strikes=3)
    sync.chain_advanced(head=60, lib=58)
    sync.peer_position("x", lib=58, head=110)
    for num in (49, 53):
        assert not any(isinstance(a, DropPeer) for a in sync.block_stale("x", num, b"x", b"?"))
    sync.block_kept("x", 61, new=True)
    actions: list[object] = []
    for num in (57, 57, 61, 61):
        actions += sync.block_stale("x", num, b"x%d" % len(actions), b"random")
    drops = [a for a in actions if isinstance(a, DropPeer)]
    assert [d.reason for d in drops] == [GoAwayReason.UNLINKABLE], actions


def test_a_peer_that_sent_nothing_keeps_its_range_until_the_timeout_drops_it() -> None:
    """A liar claiming LIB 10⁹ beside an honest peer that relays each new block to us: the
    liar's range, which the honest peer then holds too, is not taken from it as slow and
    given back anew (on 3 real producers that went on until its claims stopped counting, and
    it was never dropped), so it is dropped at the timeout, 5 s after it was asked."""
    sync, clock = manager(timeout=5.0, claim_trust=10.0)
    sync.chain_advanced(head=20, lib=18)
    sync.peer_position("honest", lib=18, head=20)
    assert sync.peer_position("liar", lib=10**9, head=10**9)[0] == FetchRange("liar", 21, 120)
    drops: list[DropPeer] = []
    head = 20
    while not drops and clock.now < 115:
        clock.now += 0.25
        if clock.now * 4 % 2 == 0:  # a block every 0.5 s, relayed by the honest peer
            head += 1
            sync.block_received("honest", head)
            sync.block_applied("honest", head)
            sync.chain_advanced(head=head, lib=head - 2)
        drops += [a for a in sync.tick() if isinstance(a, DropPeer)]
    assert [(d.peer, d.reason) for d in drops] == [("liar", GoAwayReason.BENIGN_OTHER)]
    assert clock.now <= 106, "at the timeout"


def test_back_to_catchup_when_a_peer_lib_passes_our_head() -> None:
    """A peer's LIB passing our head puts us back in LIB catch-up from our head; an unlinkable block
    then refetches from our LIB + 1."""
    sync, _ = manager()
    sync.chain_advanced(head=50, lib=40)
    sync.peer_position("a", lib=40, head=50)
    sync.peer_position("a", lib=40, head=51)
    assert stage(sync) == Stage.IN_SYNC
    actions = sync.peer_position("a", lib=300, head=310)
    assert stage(sync) == Stage.LIB_CATCHUP
    assert actions == [FetchRange("a", 51, 150)], "continue from our head"
    # Block 51 does not link: our 41..50 are on an abandoned branch. Fetch from LIB + 1.
    assert sync.block_unlinkable("a", 51) == [FetchRange("a", 41, 140)]


def test_requests_stay_within_the_window_above_head() -> None:
    """No range reaches more than the window above our head, and the window moves up as blocks
    arrive."""
    sync, _ = manager(window=250, sync_ranges=5)
    for name in "abcde":
        sync.peer_position(name, lib=10_000, head=10_000)
    assert max(r.end for r in sync.ranges) == 250
    deliver(sync, "a", 1, 100)
    assert max(r.end for r in sync.ranges) <= 350


def test_faster_peers_are_preferred() -> None:
    """With one range at a time, the peer that delivered faster gets the next range."""
    sync, clock = manager(sync_ranges=1, peer_limit=1)
    sync.peer_position("a", lib=5000, head=5000)
    sync.peer_position("b", lib=5000, head=5000)
    # a delivers its range slowly, b its range quickly
    clock.now += 10
    deliver(sync, "a", 1, 100)
    assert sync.ranges[0].peer == "b"
    clock.now += 1
    deliver(sync, "b", 101, 200)
    assert sync.ranges[0].peer == "b", "b is faster, so it keeps being chosen"


def test_a_branch_that_lost_the_fork_choice_does_not_hold_us_in_catchup() -> None:
    """Our branch ranks higher (by LIB) than a longer one: once we hold the peer's head and
    it did not become ours, we are in sync again (and our producer may go on)."""
    sync, _ = manager()
    sync.chain_advanced(head=27, lib=20)
    assert sync.peer_position("a", lib=8, head=32) == [FetchRange("a", 28, 32)]
    assert sync.block_unlinkable("a", 28) == [FetchRange("a", 21, 32)]
    for num in range(21, 33):
        sync.block_received("a", num)
        sync.block_kept("a", num)
    assert stage(sync) == Stage.IN_SYNC
    sync.peer_position("a", lib=8, head=34)
    assert stage(sync) == Stage.IN_SYNC, "within the allowance of the branch we hold"
    assert sync.peer_position("a", lib=8, head=40) == [FetchRange("a", 28, 40)]


def test_an_unlinkable_block_from_a_shorter_branch_fetches_that_branch_from_its_peer() -> None:
    """A peer behind us relays a block we cannot link: its branch may rank higher (a higher
    LIB), so fetch it from LIB + 1 to its head — from that peer only."""
    sync, _ = manager()
    sync.chain_advanced(head=33, lib=8)
    sync.peer_position("b", lib=8, head=33)
    sync.peer_position("c", lib=8, head=27)
    assert stage(sync) == Stage.IN_SYNC
    assert sync.block_unlinkable("c", 28) == [FetchRange("c", 9, 28)]
    assert stage(sync) == Stage.HEAD_CATCHUP
    for num in range(9, 29):
        sync.block_received("c", num)
    assert stage(sync) == Stage.IN_SYNC and sync.fork is None


def test_a_fork_fetch_ends_when_its_peer_goes() -> None:
    """A fork fetch ends when its peer closes, and we are in sync again."""
    sync, _ = manager()
    sync.chain_advanced(head=33, lib=8)
    sync.peer_position("c", lib=20, head=27)
    sync.block_unlinkable("c", 28)
    sync.peer_closed("c")
    assert stage(sync) == Stage.IN_SYNC and sync.fork is None


def test_a_fork_fetch_ends_when_our_lib_passes_the_branch() -> None:
    """A fork peer that goes silent does not hold us in catch-up once our LIB is past the end
    of its branch (the branch can no longer win)."""
    sync, _ = manager()
    sync.chain_advanced(head=33, lib=8)
    sync.peer_position("c", lib=20, head=27)
    sync.block_unlinkable("c", 28)
    assert stage(sync) == Stage.HEAD_CATCHUP
    sync.chain_advanced(head=40, lib=28)
    assert stage(sync) == Stage.IN_SYNC and sync.fork is None


def test_a_rewind_never_asks_for_blocks_our_lib_has_since_passed() -> None:
    """After an unlinkable block we refetch from LIB + 1; should our LIB advance meanwhile,
    the next range starts above the new LIB (final blocks would come back stale)."""
    sync, _ = manager(sync_ranges=1, sync_fetch_span=5)
    sync.chain_advanced(head=30, lib=10)
    sync.peer_position("a", lib=10, head=40)
    assert sync.block_unlinkable("a", 31) == [FetchRange("a", 11, 15)]
    assert sync.chain_advanced(head=30, lib=20) == []
    assert FetchRange("a", 21, 25) in deliver_only(sync, "a", 11, 15)


def test_a_gap_is_clipped_to_the_window_when_our_head_went_back() -> None:
    """A fork switch to a shorter branch lowers our head: a range given up afterwards goes
    out again only up to the window above the new head, the rest later."""
    sync, _ = manager(window=20, sync_ranges=2, sync_fetch_span=10)
    sync.chain_advanced(head=10, lib=5)
    for name in "abc":
        sync.peer_position(name, lib=5, head=100)
    assert [(r.peer, r.start, r.end) for r in sync.ranges] == [("a", 11, 20), ("b", 21, 30)]
    sync.chain_advanced(head=7, lib=5)
    assert sync.peer_closed("b") == [FetchRange("c", 21, 27)]
    assert sync.gaps == [(28, 30)]


def test_a_range_above_a_peers_new_head_is_reassigned_at_once() -> None:
    """A peer whose head went back (its fork switch) cannot serve the range we asked above
    it: the range goes to another peer now, not after the timeout."""
    sync, _ = manager(sync_ranges=2, sync_fetch_span=10)
    for name in "abc":
        sync.peer_position(name, lib=0, head=100)
    assert [(r.peer, r.start) for r in sync.ranges] == [("a", 1), ("b", 11)]
    assert sync.peer_position("b", lib=0, head=5) == [FetchRange("c", 11, 20)]


def test_a_slow_peer_loses_the_range_our_chain_waits_on_and_gets_small_ranges() -> None:
    """A peer sending 1 block/s holds the next blocks we need while a faster peer exists: its
    range is given up after SLOW_AFTER (no strike: it delivers, slowly), it gets ranges sized
    to its pace, and the rest goes to the fast peer as soon as it is free."""
    sync, clock = manager(sync_ranges=2, sync_fetch_span=100)
    sync.peer_position("slow", lib=1000, head=1000)
    sync.peer_position("fast", lib=1000, head=1000)
    assert [(r.peer, r.start) for r in sync.ranges] == [("slow", 1), ("fast", 101)]
    clock.now += 0.1
    deliver_only(sync, "fast", 101, 200)  # then fast holds 201..300
    clock.now += 1
    deliver(sync, "slow", 1, 1)
    assert sync.tick() == [], "judged only after SLOW_AFTER"
    clock.now += 1
    deliver(sync, "slow", 2, 2)
    assert sync.tick() == [FetchRange("slow", 3, 3)], "what it delivers in RANGE_SECONDS"
    assert sync.peers["slow"].stalls == 0
    clock.now += 0.1
    assert FetchRange("fast", 4, 100) in deliver_only(sync, "fast", 201, 300)
    (again,) = [x for x in deliver(sync, "slow", 3, 3) if isinstance(x, FetchRange)]
    assert again.peer == "slow" and again.end - again.start < 10, "small, while fast is busy"


def test_claims_alone_hold_production_for_the_grace_once() -> None:
    """Peers' claims alone hold the producer for pause_grace seconds, and not again until a
    block backs them (a liar reconnecting under a fresh key gets no second grace); blocks from
    peers joining our chain hold it for pause_grace seconds each; in sync never holds it."""
    sync, clock = manager(pause_grace=10.0)
    assert not sync.holds_production()
    sync.peer_position("liar", lib=10**9, head=10**9)
    assert sync.holds_production()
    clock.now += 10.5
    assert not sync.holds_production()
    sync.peer_closed("liar")
    sync.peer_position("liar2", lib=10**9, head=10**9)
    assert stage(sync) == Stage.LIB_CATCHUP and not sync.holds_production()
    sync.block_applied("liar2", 1)
    assert sync.holds_production()
    clock.now += 9
    assert sync.holds_production()
    clock.now += 2
    assert not sync.holds_production()


def test_a_peer_several_times_slower_is_left_out_while_a_faster_one_is_free() -> None:
    """Rotation among the best peers skips one SLOW_FACTOR times slower than the fastest free
    peer, even when it has waited longest."""
    sync, clock = manager(
        sync_ranges=0, sync_fetch_span=50
    )  # nothing goes out until both are known
    sync.chain_advanced(head=10, lib=5)
    for name in ("slow", "fast"):
        sync.peer_position(name, lib=5, head=200)
    sync.peers["slow"].rate, sync.peers["slow"].last_used = 1.0, 0.0
    sync.peers["fast"].rate, sync.peers["fast"].last_used = 500.0, clock.now
    sync.config.sync_ranges = 1
    assert sync.tick() == [FetchRange("fast", 11, 60)]


# --- after a partition heals (tests/netns: the half with the higher LIB is behind) ----------


def test_a_peer_whose_lib_is_above_ours_has_blocks_we_need_though_its_head_is_below_ours() -> None:
    """A LIB only grows along a branch, so a peer whose LIB is above ours while its head is not
    above ours is on another branch, one that outranks ours (fork choice ranks by LIB first):
    its branch is fetched from our LIB + 1 to its head, from that peer, once."""
    sync, _ = manager()
    sync.chain_advanced(head=55, lib=23)
    assert sync.peer_position("c", lib=23, head=55) == [], "a peer in step with us"
    assert sync.peer_position("a", lib=27, head=51, head_id=b"y51") == [FetchRange("a", 24, 51)]
    assert stage(sync) == Stage.HEAD_CATCHUP and sync.fork == ("a", 51)
    assert sync.peer_position("b", lib=27, head=51, head_id=b"y51") == [], "one fetch at a time"
    deliver_only(sync, "a", 24, 51)
    assert sync.fork is None, "and not again from b, whose head is the one just fetched"
    sync.peer_closed("c")  # (else we would fetch its head, on the branch we left, to weigh it)
    sync.chain_advanced(head=51, lib=27)  # the fork database switched to it
    assert stage(sync) == Stage.IN_SYNC and sync.ranges == []


def test_a_peer_on_our_branch_with_a_lib_ahead_of_ours_fetches_nothing() -> None:
    """A peer one block ahead on our branch may have moved its LIB first: its head is above
    ours, so its claims are what they seem, and nothing is fetched."""
    sync, _ = manager()
    sync.chain_advanced(head=55, lib=23)
    sync.peer_position("a", lib=23, head=55)
    assert sync.peer_position("a", lib=24, head=56) == []
    assert stage(sync) == Stage.IN_SYNC


def test_a_peer_met_again_a_block_ahead_has_that_block_fetched() -> None:
    """Blocks a peer made before we met are not relayed to us: when the only peer of a node
    that was a block short of its head goes silent and comes back, the node fetches that
    block even though it is within the allowance, then is in sync."""
    sync, _ = manager()
    sync.peer_position("a", lib=305, head=306)
    deliver(sync, "a", 1, 305)
    assert sync.peer_closed("a") == [] and stage(sync) == Stage.IN_SYNC
    assert sync.peer_position("a", lib=305, head=306) == [FetchRange("a", 306, 306)]
    sync.block_received("a", 306)
    assert sync.chain_advanced(head=306, lib=305) == []
    assert stage(sync) == Stage.IN_SYNC and not sync.ranges


def test_a_claimed_outranking_branch_is_fetched_once_per_lib_and_a_liar_is_dropped() -> None:
    """A peer claiming a higher LIB whose branch brings nothing new is asked again only when it
    claims a higher LIB still, and is dropped when that makes more than max_strikes branches
    without a block new to us (as for blocks that link to nothing)."""
    sync, _ = manager(max_strikes=2)
    sync.chain_advanced(head=55, lib=23)
    actions: list[object] = list(sync.peer_position("a", lib=27, head=51))
    for claim in range(27, 31):
        deliver_only(sync, "a", 24, 51)  # blocks we have: nothing new
        assert sync.peer_position("a", lib=claim, head=51) == [], "asked once per LIB"
        actions += sync.peer_position("a", lib=claim + 1, head=51)
    fetches = [a for a in actions if isinstance(a, FetchRange)]
    assert fetches == [FetchRange("a", 24, 51)] * 2
    (drop,) = [a for a in actions if isinstance(a, DropPeer)]
    assert drop.reason == GoAwayReason.UNLINKABLE


def test_a_peer_whose_head_we_hold_on_a_losing_branch_does_not_hold_us_in_catchup() -> None:
    """Two peers on a longer branch with a lower LIB: once that branch, fetched from one of
    them, lost the fork choice, the other (whose head is a block we hold) does not keep us in
    head catch-up with nothing to ask, which would hold our producer."""
    sync, _ = manager()
    sync.chain_advanced(head=51, lib=27)
    sync.peer_position("c", lib=23, head=55, head_id=b"x55")
    sync.peer_position("d", lib=23, head=55, head_id=b"x55")
    assert sync.ranges[0].peer == "c" and stage(sync) == Stage.HEAD_CATCHUP
    sync.block_unlinkable("c", 52)
    assert sync.fork == ("c", 55)
    for num in range(28, 56):
        sync.block_received("c", num)
        sync.block_kept("c", num, new=True, block_id=f"x{num}".encode())
    assert stage(sync) == Stage.IN_SYNC
    sync.peer_position("e", lib=23, head=55, head_id=b"x55")
    assert stage(sync) == Stage.IN_SYNC, "a peer that says so later does not either"


def test_blocks_held_above_a_gap_nobody_asks_for_are_asked_of_the_peer_that_sent_them() -> None:
    """Our head went back (a fork switch to a shorter branch with a higher LIB) below what was
    already asked for; the new branch's blocks relayed since wait above block 53, which was
    lost. The gap is asked of the peer that sent them: it has their parents."""
    sync, _ = manager()
    sync.chain_advanced(head=63, lib=23)
    assert sync.peer_position("d", lib=23, head=66) == [FetchRange("d", 64, 66)]
    deliver_only(sync, "d", 64, 66)
    sync.chain_advanced(head=52, lib=27)
    sync.peer_position("a", lib=27, head=52)
    deliver_only(sync, "a", 54, 56)  # relayed
    assert stage(sync) == Stage.HEAD_CATCHUP and sync.ranges == [] and sync.gaps == []
    assert sync.applier_waits(("a", 54)) == [FetchRange("a", 53, 53)]
    assert sync.applier_waits(("a", 54)) == [], "asked once while the range is out"


def test_with_nothing_held_blocks_below_ranges_in_flight_are_asked_again() -> None:
    """Our head went back below the ranges in flight: with nothing held for it, the blocks
    between our head and the first range are asked next, of anyone."""
    sync, _ = manager(sync_fetch_span=10, sync_ranges=2)
    sync.chain_advanced(head=33, lib=20)
    assert sync.peer_position("b", lib=20, head=60) == [FetchRange("b", 34, 43)]
    assert sync.peer_position("c", lib=20, head=60) == [FetchRange("c", 44, 53)]
    sync.chain_advanced(head=30, lib=20)
    assert sync.applier_waits(("c", 31)) == [], "block 31 is held: it is pushed next"
    assert sync.applier_waits(None) == []  # both peers are busy
    assert sync.gaps == [(31, 33)]
    assert FetchRange("b", 31, 33) in deliver_only(sync, "b", 34, 43)


def test_a_fork_fetch_ends_when_its_peer_leaves_the_branch() -> None:
    """The peer whose branch we fetch switches to another (it met a branch that outranks its
    own, maybe ours) and tells a lower head: the rest of the branch will not come, so we stop
    waiting for it instead of staying in catch-up with nothing to ask."""
    sync, _ = manager()
    sync.chain_advanced(head=10, lib=8)
    assert sync.peer_position("y", lib=6, head=14) == [FetchRange("y", 11, 14)]
    assert sync.block_unlinkable("y", 11) == [FetchRange("y", 9, 14)]
    deliver_only(sync, "y", 9, 10)
    sync.peer_position("y", lib=8, head=10)
    assert sync.fork is None and stage(sync) == Stage.IN_SYNC
