"""Faults on namespaced hosts: partitions, a flapping link, a frozen node, a moved node.

Four producers, one per host. LIB needs more than two thirds of them (3 of 4) to have built on
a block (``chain.core.consensus.dpos.irreversible_candidate``), so a 2/2 split stops finality on
both sides while both keep producing in their own slots. A cut link drops frames without a word (no
``tc netem`` or ``iptables`` here, only ``ip link``): the nodes notice through keepalives.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

from chain.core.primitives.params import slot_of_ms, slot_start_ms
from scripts.netns import P2P_PORT
from tests.integration.conftest import wait_for
from tests.netns.conftest import TURN, Cluster, LibWatch, TxLoad, admin, quick
from tests.support.wait import hold

# A minute in the issue; CI may shorten it (BOR_NETNS_FLAP_SECONDS=20).
FLAP_SECONDS = float(os.environ.get("BOR_NETNS_FLAP_SECONDS", "60"))
FREEZE_SECONDS = float(os.environ.get("BOR_NETNS_FREEZE_SECONDS", "30"))
# Down, then up, in seconds: shorter than the keepalive's 6 s of silence (TCP retransmits and
# the session survives), and longer (the session is dropped and redialled).
FLAP_CYCLE = ((2.0, 3.0), (8.0, 3.0), (4.0, 2.0))
# Converging after a fault may wait for a dialler's back-off (up to 30 s) and a handshake.
CONVERGE_SECONDS = 90


def _lib(cluster: Cluster, *indexes: int) -> int:
    """The lowest LIB among nodes ``indexes`` (1-based; default all)."""
    nodes = [cluster.nodes[i - 1] for i in indexes] or cluster.nodes
    return min(int(i["last_irreversible_block_num"]) for i in cluster.infos(nodes))


def _check_schedule(cluster: Cluster) -> None:
    """Producers take turns of TURN slots in the order a, b, c, d (what the timing of the
    partition tests relies on)."""
    head = quick(cluster.nodes[0], "/v1/chain/get_info")["head_block_num"]
    block = quick(cluster.nodes[0], "/v1/chain/get_block", {"block_num_or_id": head})
    assert block["producer"] == f"producer{'abcd'[_turn_of(block['slot'])]}", block


def _turn_of(slot: int) -> int:
    return (slot % (4 * TURN)) // TURN


def _sleep_until_turn(producer: int, offset: float) -> None:
    """Sleep until ``offset`` seconds after the next turn of producer ``producer`` (a = 0 …
    d = 3) begins (negative: before it)."""
    slot = slot_of_ms(int((time.time() - offset) * 1000)) + 1
    while _turn_of(slot) != producer or slot % TURN:
        slot += 1
    time.sleep(max(0.0, slot_start_ms(slot) / 1000 + offset - time.time()))


def _split_2_2(cluster: Cluster) -> tuple[int, list[dict[str, Any]]]:
    """Split the network [1, 2] / [3, 4] and hold it for three rounds, checking that both
    halves produce and neither finalizes anything made after the split: (the highest head
    at the split, the nodes' get_info at the end)."""
    cluster.net.partition([1, 2], [3, 4])
    split_head = max(i["head_block_num"] for i in cluster.infos())
    hold(10, "a round (4 turns of 2 s) and the keepalive's 6 s: each half settles")
    settled = [i["last_irreversible_block_num"] for i in cluster.infos()]
    hold(12, "the LIB is checked unmoved across 12 s of the split")
    during = cluster.infos()
    assert [i["last_irreversible_block_num"] for i in during] == settled, "LIB moved"
    assert max(settled) <= split_head, "nothing made after the split is final"
    heads = [i["head_block_num"] for i in during]
    assert min(heads) > split_head + 4, f"both sides kept producing: {heads}"
    sides = {during[0]["head_block_id"], during[2]["head_block_id"]}
    assert len(sides) == 2, "the halves went separate ways"
    assert all(i["peer_count"] == 1 for i in during), "each node sees its half only"
    return split_head, during


def test_a_2_2_partition_stops_finality_on_both_sides_and_heals_to_one_chain(
    cluster: Cluster,
) -> None:
    """Split 2/2 under transaction load by moving the hosts onto two bridges: each node drops
    its peers across the cut, both halves keep producing, neither moves its LIB past the blocks
    that existed at the split; healed, all four converge on one chain, LIB moves on, and no
    block irreversible on any node was reverted.

    Timed so that the half with the higher LIB is ahead when it heals (split as a's turn
    begins, heal inside b's turn); the other case is the next test."""
    wait_for(lambda: cluster.converged(lib_above=4), 60, "a meshed network with a LIB")
    _check_schedule(cluster)
    with LibWatch(cluster) as watch, TxLoad(cluster, 1, 3) as load:
        _sleep_until_turn(0, -0.2)
        split_head, _ = _split_2_2(cluster)
        _sleep_until_turn(1, 1.0)
        cluster.net.heal()
        wait_for(lambda: cluster.converged(lib_above=split_head), CONVERGE_SECONDS, "one chain")
    assert load.sent > 1000, "the network was under load"
    assert watch.samples > 100
    assert watch.check_final() == []


def test_a_healing_when_the_half_with_the_higher_lib_is_behind_converges(
    cluster: Cluster,
) -> None:
    """Split as d's turn begins: half [1, 2] saw c's last blocks and ends with the higher
    LIB, half [3, 4] produces 4 blocks more. Healed 1 s before a's turn with the nodes
    redialled at once, the network must still converge and finalize."""
    wait_for(lambda: cluster.converged(lib_above=4), 60, "a meshed network with a LIB")
    _check_schedule(cluster)
    with LibWatch(cluster) as watch:
        _sleep_until_turn(3, -0.2)
        split_head, during = _split_2_2(cluster)
        assert during[0]["last_irreversible_block_num"] > during[2]["last_irreversible_block_num"]
        _sleep_until_turn(0, -1.0)
        cluster.net.heal()
        for host in cluster.net.hosts[:2]:
            for far in cluster.plan[2:]:
                admin(host, "/v1/net/connect", {"address": f"{far.p2p[0]}:{far.p2p[1]}"})
        wait_for(lambda: cluster.converged(lib_above=split_head), 30, "one chain")
    assert watch.check_final() == []


def test_b_a_flapping_link_then_convergence(cluster: Cluster) -> None:
    """Host 4's link goes down and up every few seconds (some outages shorter than the
    keepalive, some longer): the other three keep finalizing, and afterwards all converge."""
    wait_for(lambda: cluster.converged(lib_above=4), 60, "a meshed network with a LIB")
    with LibWatch(cluster) as watch:
        before = _lib(cluster)
        end = time.monotonic() + FLAP_SECONDS
        flaps = 0
        while time.monotonic() < end:
            down, up = FLAP_CYCLE[flaps % len(FLAP_CYCLE)]
            cluster.net.set_link(4, up=False)
            hold(down, "the link down for this flap")
            cluster.net.set_link(4, up=True)
            hold(up, "the link up for this flap")
            flaps += 1
        during = _lib(cluster, 1, 2, 3)
        assert during > before, "three of four producers kept finalizing"
        wait_for(lambda: cluster.converged(lib_above=during), CONVERGE_SECONDS, "one chain")
    assert watch.check_final() == []


def test_c_a_node_frozen_by_sigstop_catches_up(cluster: Cluster) -> None:
    """A producer stopped with SIGSTOP (the pid we hold is the node's, not `ip netns exec`'s)
    for 30 s stops answering; the others keep finalizing; resumed, it catches up to them."""
    wait_for(lambda: cluster.converged(lib_above=4), 60, "a meshed network with a LIB")
    frozen = cluster.nodes[1]
    assert frozen.proc is not None
    cmdline = Path(f"/proc/{frozen.proc.pid}/cmdline").read_bytes().split(b"\0")
    assert any(arg.endswith(b"bor-node") for arg in cmdline), cmdline
    with LibWatch(cluster) as watch:
        os.kill(frozen.proc.pid, signal.SIGSTOP)
        try:
            stopped_at = _lib(cluster, 1, 3, 4)
            hold(2, "long enough that a node merely slow would have answered")
            try:
                quick(frozen, "/v1/chain/get_info")
                raise AssertionError("a stopped node answered")
            except OSError:
                pass
            hold(FREEZE_SECONDS - 2, "the rest of the freeze")
            lib_then = _lib(cluster, 1, 3, 4)
            assert lib_then > stopped_at, "three of four producers kept finalizing"
        finally:
            os.kill(frozen.proc.pid, signal.SIGCONT)
        wait_for(lambda: cluster.converged(lib_above=lib_then), CONVERGE_SECONDS, "catch-up")
    assert watch.check_final() == []


def test_d_a_node_that_moves_dials_its_peers_again(cluster: Cluster) -> None:
    """Node 4 restarts on a new address (its peers only know the old one): it dials the peers
    in its config as it starts, they accept, and they see it at its new address."""
    wait_for(lambda: cluster.converged(lib_above=4), 60, "a meshed network with a LIB")
    moved = cluster.nodes[3]
    assert moved.stop() == 0
    new = "10.88.0.44"
    cluster.net.move(4, new)
    moved.args += ["--p2p-listen-endpoint", f"{new}:{P2P_PORT}"]
    lib = _lib(cluster, 1, 2, 3)
    moved.start()

    def found() -> bool:
        for node in cluster.nodes[:3]:
            addresses = [p["remote"] for p in quick(node, "/v1/net/peers")["peers"]]
            if not any(a.startswith(new + ":") for a in addresses):
                return False
        return True

    wait_for(found, 30, "every peer to see node 4 at its new address")
    wait_for(lambda: cluster.converged(lib_above=lib), CONVERGE_SECONDS, "node 4 to catch up")


def test_d_a_node_that_moves_is_redialled_by_peers_that_know_its_name(
    named_cluster: Cluster,
) -> None:
    """Node 1 dials nobody; the others dial it as ``h1``. It restarts after its host moved and
    the name was updated (as DNS would be): the peers' next dial resolves the name anew and
    reaches it, with nothing changed in any config."""
    cluster = named_cluster
    wait_for(lambda: cluster.converged(lib_above=4), 60, "a meshed network with a LIB")
    moved = cluster.nodes[0]
    assert moved.stop() == 0
    new = "10.88.0.11"
    cluster.net.move(1, new)
    lib = _lib(cluster, 2, 3, 4)
    moved.start()
    wait_for(
        lambda: quick(moved, "/v1/chain/get_info")["peer_count"] == 3, 60, "all peers redialled"
    )
    for peer in quick(moved, "/v1/net/peers")["peers"]:
        assert peer["direction"] == "inbound", "they dialled it, not it them"
    wait_for(lambda: cluster.converged(lib_above=lib), CONVERGE_SECONDS, "node 1 to catch up")
