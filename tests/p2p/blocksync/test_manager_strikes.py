"""The sync manager's strikes: a peer that stalls, sends blocks that link to nothing or
claims what no block backs is dropped, and one that delivers in between is not."""

from __future__ import annotations

from p2p.blocksync.manager import DropPeer, FetchRange, Stage
from p2p.wire.messages import GoAwayReason
from tests.p2p.blocksync.rig import deliver, deliver_only, manager, stage


def test_a_peer_that_never_delivers_is_dropped_at_its_first_stall() -> None:
    """A peer claiming LIB 10⁹ that sends none of the range it was asked for is dropped at the
    first timeout (its claims were never backed), and its claims stop counting at once."""
    sync, clock = manager()
    sync.chain_advanced(head=20, lib=15)
    assert sync.peer_position("liar", lib=10**9, head=10**9) == [FetchRange("liar", 21, 120)]
    assert stage(sync) == Stage.LIB_CATCHUP
    clock.now += 4
    assert sync.tick() == [], "within the timeout"
    clock.now += 2
    (drop,) = sync.tick()
    assert isinstance(drop, DropPeer) and drop.peer == "liar"
    assert drop.reason == GoAwayReason.BENIGN_OTHER and "sent none of 21..120" in drop.detail
    assert stage(sync) == Stage.IN_SYNC and not sync.ranges
    assert sync.peer_position("liar", lib=10**9, head=10**9) == [], "no longer listened to"
    assert stage(sync) == Stage.IN_SYNC


def test_stalls_drop_a_peer_at_max_strikes_unless_it_delivers_a_range_in_between() -> None:
    """A peer that delivered before earns one stall per range it lets stall; a range delivered
    in full clears them; max_strikes stalls in a row drop it, once."""
    sync, clock = manager(sync_ranges=1, max_strikes=2, sync_fetch_span=10)
    sync.peer_position("a", lib=1000, head=1000)
    deliver(sync, "a", 1, 3)
    clock.now += 6
    assert sync.tick() == [FetchRange("a", 4, 4)], "struck, and its next range is small"
    assert sync.peers["a"].stalls == 1
    deliver(sync, "a", 4, 4)  # a range in full: the stall is forgiven
    assert sync.peers["a"].stalls == 0
    clock.now += 6
    assert not any(isinstance(x, DropPeer) for x in sync.tick())
    clock.now += 6
    actions = sync.tick()
    assert actions == [DropPeer("a", GoAwayReason.BENIGN_OTHER, "2 ranges not delivered in time")]
    clock.now += 6
    assert sync.tick() == [] and sync.block_rejected("a", 5, "bad") == [], "dropped once"


def test_blocks_that_link_to_nothing_drop_a_peer_unless_a_new_block_comes_between() -> None:
    """An unlinkable block fetches the peer's branch; more than max_strikes such fetches with no
    block new to us in between drop the peer for UNLINKABLE."""
    sync, _ = manager(max_strikes=2, sync_fetch_span=10)
    sync.chain_advanced(head=30, lib=10)
    sync.peer_position("a", lib=10, head=40)

    def fetch_branch_and_fail() -> list[object]:
        """The peer sends an unlinkable block, then serves its branch: blocks we have."""
        actions: list[object] = list(sync.block_unlinkable("a", 31))
        for num in range(11, 41):
            actions += sync.block_received("a", num)
        assert sync.fork is None, "the whole branch arrived: the fetch is over"
        return actions

    fetch_branch_and_fail()
    fetch_branch_and_fail()
    sync.block_kept("a", 35, new=True)  # its branch held a block new to us after all
    fetch_branch_and_fail()
    fetch_branch_and_fail()
    (drop,) = [x for x in fetch_branch_and_fail() if isinstance(x, DropPeer)]
    assert drop.reason == GoAwayReason.UNLINKABLE
    assert stage(sync) == Stage.IN_SYNC


def test_a_block_relayed_while_its_branch_is_fetched_extends_the_fetch() -> None:
    """A fork peer relays a new block of its branch while we fetch the branch: the fetch goes
    on (now up to that block) instead of starting over, and the peer earns nothing."""
    sync, _ = manager(sync_ranges=1, sync_fetch_span=10, max_strikes=1)
    sync.chain_advanced(head=33, lib=8)
    sync.peer_position("c", lib=8, head=27)
    assert sync.block_unlinkable("c", 28, b"c28", b"c27") == [FetchRange("c", 9, 18)]
    deliver_only(sync, "c", 9, 12)
    assert sync.block_unlinkable("c", 29, b"c29", b"c28") == []
    assert sync.fork == ("c", 29) and sync.ranges[0].next_num == 13
    assert FetchRange("c", 19, 28) in deliver_only(sync, "c", 13, 18)


def test_a_trickle_of_blocks_with_random_parents_drops_the_peer_for_unlinkable() -> None:
    """A stranger claiming our LIB and head + 50 that sends, once a second, a block numbered
    our head + 1 that links to nothing (our head moving on as we produce) is dropped for
    UNLINKABLE at its (max_strikes + 1)th such block, though its branch is being fetched."""
    sync, clock = manager(max_strikes=3, sync_fetch_span=100)
    sync.chain_advanced(head=20, lib=10)
    sync.peer_position("x", lib=10, head=70)
    drops: list[DropPeer] = []
    for second in range(10):
        head = 20 + 2 * second
        sync.chain_advanced(head=head, lib=10)
        sync.block_received("x", head + 1)
        actions = sync.block_unlinkable("x", head + 1)
        drops += [a for a in actions if isinstance(a, DropPeer)]
        clock.now += 1
        sync.tick()
        if drops:
            break
    assert [d.reason for d in drops] == [GoAwayReason.UNLINKABLE]
    assert second == 3, "dropped at the fourth block"
    assert stage(sync) == Stage.IN_SYNC, "its claims no longer count"


def test_the_rest_of_a_range_on_an_unknown_branch_does_not_count_as_unlinkable() -> None:
    """After a partition heals, the range asked above our head brings a branch we do not
    know: its first block starts the branch fetch, and the next ones, each the child of the
    one before, are that branch going on, not blocks that link to nothing."""
    sync, _ = manager(max_strikes=3, sync_fetch_span=100)
    sync.chain_advanced(head=57, lib=20)
    sync.peer_position("a", lib=20, head=110)
    actions = deliver_only(sync, "a", 58, 110)  # read off the network, then pushed
    for num in range(58, 111):
        actions += sync.block_unlinkable("a", num, b"a%d" % num, b"a%d" % (num - 1))
    assert not [a for a in actions if isinstance(a, DropPeer)]
    assert sync.fork == ("a", 110) and sync.peers["a"].unlinkable == 1


def test_a_flood_of_unlinkable_blocks_drops_the_peer_once() -> None:
    """5,000 blocks with random parents at numbers within its claim: the peer is dropped for
    UNLINKABLE once, after max_strikes + 1 of them; the rest change nothing."""
    sync, _ = manager(max_strikes=3)
    sync.chain_advanced(head=20, lib=10)
    sync.peer_position("x", lib=10, head=70)
    actions: list[object] = []
    for i in range(5000):
        num = 21 + i % 40  # all below its claimed head: the branch fetch never completes
        actions += sync.block_received("x", num)
        actions += sync.block_unlinkable("x", num)
    drops = [a for a in actions if isinstance(a, DropPeer)]
    assert len(drops) == 1 and drops[0].reason == GoAwayReason.UNLINKABLE


def test_a_block_sent_again_is_no_progress_for_its_range() -> None:
    """A range whose peer sends the same block again and again stalls after the timeout, as
    one that sends nothing does."""
    sync, clock = manager(sync_fetch_span=10, timeout=5.0)
    sync.chain_advanced(head=20, lib=10)
    sync.peer_position("x", lib=10, head=70)
    assert sync.ranges[0].start == 21
    for _ in range(7):
        sync.block_received("x", 21)
        clock.now += 1
        sync.tick()
    assert all(r.peer != "x" or r.start > 21 for r in sync.ranges), sync.ranges
    assert sync.peers["x"].stalls == 1


def test_a_claim_no_block_backs_stops_counting_after_claim_trust() -> None:
    """A peer claiming head + 50 that is never asked (it claims to hold nothing we need) and
    sends nothing keeps us in head catch-up for claim_trust seconds, not for good; a claim
    that is backed by blocks joining our chain keeps counting."""
    sync, clock = manager(claim_trust=10.0)
    sync.chain_advanced(head=20, lib=10)
    sync.peer_position("liar", lib=10, head=70, first=60)
    assert stage(sync) == Stage.HEAD_CATCHUP
    clock.now += 9
    sync.tick()
    assert stage(sync) == Stage.HEAD_CATCHUP
    clock.now += 2
    sync.tick()
    assert stage(sync) == Stage.IN_SYNC, "an unbacked claim stops counting"
    sync.peer_position("honest", lib=10, head=70)
    for num in range(21, 30):
        clock.now += 2
        sync.block_received("honest", num)
        sync.block_applied("honest", num)
        sync.chain_advanced(head=num, lib=10)
    assert stage(sync) == Stage.HEAD_CATCHUP, "a claim backed by blocks keeps counting"
