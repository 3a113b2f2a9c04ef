"""A hostile peer against a real producing ``bor-node``: claims are not facts.

The liar is written with our own p2p classes: a real TCP connection, the preamble and TLS 1.3
that the node's default ``p2p-tls = on`` asks for (a stranger can run TLS as well as anyone), a
valid handshake signed by a fresh random key and bound to that TLS session (the default
``allowed-connection = any`` lets it in), a claimed head and LIB of 10⁹, answers to every
keepalive, and never a block.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from functools import partial
from pathlib import Path

from chain.core.primitives.types import BlockId
from node.commands.devnet import DevNode, prepare
from p2p.errors import P2PError
from p2p.wire.handshake import ChainPosition
from p2p.wire.messages import GoAwayReason
from scripts.peers import LyingPeer, TricklingPeer
from tests.integration.conftest import (
    NodeProcess,
    Nodes,
    free_port,
    loopback_plan,
    wait_for,
)
from tests.support.wait import SLOWDOWN, hold, pace


def test_a_lying_peer_neither_stops_production_nor_stays(nodes: Nodes, tmp_path: Path) -> None:
    """A stranger claiming head and LIB 10⁹ that never serves a block: the producer's head
    keeps advancing while it is connected, the liar is sent away for the ranges it never
    delivered, and its next dial is refused as banned."""
    plan = [DevNode("node1", "producera", ("127.0.0.1", free_port()), ("127.0.0.1", free_port()))]
    prepare(tmp_path, plan)
    producer = nodes.run(tmp_path / "node1", rpc_port=plan[0].rpc[1]).start(wait_head=2)
    info = producer.info()
    liar = LyingPeer(bytes.fromhex(info["chain_id"]), plan[0].p2p)
    liar.start()
    assert liar.connected.wait(10 * SLOWDOWN), producer.tail()
    wait_for(lambda: producer.info()["peer_count"] == 1, 5, "the liar to be a peer")
    head_before = producer.info()["head_block_num"]
    # 3 s (6 slots): the liar is sent away 5-6 s after it connected, which the waits above
    # may have used a second of.
    hold(3, "the head's advance is measured over 3 s")
    assert not liar.session_ended.is_set(), "measured while the liar is connected"
    advance = producer.info()["head_block_num"] - head_before
    print(f"head advanced by {advance} blocks in 3 s with the liar connected")
    assert advance >= 4, f"the head advanced by {advance} blocks in 3 s:\n{producer.tail()}"
    assert liar.session_ended.wait(20 * SLOWDOWN), "the liar is still connected"
    assert liar.sync_requests >= 1, "the liar was asked for blocks before it was sent away"
    assert liar.sent_away is not None
    assert producer.info()["peer_count"] == 0
    liar.start().join(10 * SLOWDOWN)
    assert liar.sent_away is not None and liar.sent_away.reason == GoAwayReason.BANNED
    log = producer.log.read_text()
    assert '"event": "peer_banned"' in log
    assert "production_paused_while_syncing" not in log


def position_of(node: NodeProcess) -> ChainPosition:
    """The node's LIB and head, as its public RPC tells anyone."""
    info = node.info()
    return ChainPosition(
        info["last_irreversible_block_num"],
        BlockId(bytes.fromhex(info["last_irreversible_block_id"])),
        info["head_block_num"],
        BlockId(bytes.fromhex(info["head_block_id"])),
    )


# A trickling session the node lets run this long is a finding: it is sent away after its
# fourth block (4 s), or 5 s after a range it was asked for went without progress.
SESSION_LIMIT = 10.0


async def sessions_for(peer: LyingPeer, seconds: float) -> Counter[str]:
    """Start the stranger's sessions for ``seconds``: the first two under one identity (the
    second shows whether the first ended in a ban), then each under a fresh one, a second
    apart, as ``scripts/lying_peer.py`` does. How each session ended, by reason."""
    ends: Counter[str] = Counter()
    end = time.monotonic() + seconds
    sessions = 0
    while time.monotonic() < end:
        sessions += 1
        peer.sent_away = None
        try:
            async with asyncio.timeout(SESSION_LIMIT):
                await peer.session()
        except TimeoutError:
            ends["still connected after the limit"] += 1
        except (P2PError, OSError) as err:
            ends[type(err).__name__] += 1
        if peer.sent_away is not None:
            ends[peer.sent_away.reason.name] += 1
            if sessions == 2:
                ends["second session " + peer.sent_away.reason.name] += 1
        if sessions >= 2:
            peer.renew()
        await pace(1.0)
    return ends


def test_a_trickling_stranger_neither_freezes_finality_nor_stays(
    nodes: Nodes, tmp_path: Path
) -> None:
    """A stranger claiming our LIB and head + 50 that sends a block with a random parent every
    second, for 15 s under fresh identities: a one-producer votes chain keeps its LIB moving
    during the trickle and after it, and each trickler is sent away for its unlinkable
    blocks and banned (its redial is refused)."""
    plan = [DevNode("node1", "producera", ("127.0.0.1", free_port()), ("127.0.0.1", free_port()))]
    prepare(tmp_path, plan, {"finality": "votes"})
    producer = nodes.run(tmp_path / "node1", rpc_port=plan[0].rpc[1]).start(wait_head=2)
    wait_for(lambda: producer.info()["last_irreversible_block_num"] >= 2, 20, "a first LIB")
    chain_id = bytes.fromhex(producer.info()["chain_id"])
    peer = TricklingPeer(chain_id, plan[0].p2p, lambda: position_of(producer))
    before = producer.info()
    ends = asyncio.run(sessions_for(peer, 15))
    during = producer.info()
    print(f"trickle: {peer.blocks_sent} blocks, sessions ended {dict(ends)}")
    lib_during = during["last_irreversible_block_num"] - before["last_irreversible_block_num"]
    print(f"LIB advanced by {lib_during} in the 15 s of trickling")
    hold(5, "the LIB's advance after the trickle is measured over 5 s")
    after = producer.info()
    lib_after = after["last_irreversible_block_num"] - during["last_irreversible_block_num"]
    print(f"LIB advanced by {lib_after} in the 5 s after, head {after['head_block_num']}")
    # 0.5 s blocks: 30 in 15 s, 10 in 5 s, undisturbed.
    assert lib_during >= 20, f"LIB advanced by {lib_during} in 15 s:\n{producer.tail()}"
    assert lib_after >= 6, f"LIB advanced by {lib_after} in 5 s after:\n{producer.tail()}"
    assert producer.rpc("/v1/chain/get_finalizer_info")["production_paused"] is False
    assert ends["UNLINKABLE"] >= 2, f"sent away for its unlinkable blocks: {dict(ends)}"
    assert ends["second session BANNED"] == 1, f"its redial was refused: {dict(ends)}"
    assert ends["still connected after the limit"] == 0, dict(ends)
    assert producer.info()["peer_count"] == 0


# The windows the 3-producer LIB rate is measured over: 40 blocks at 0.5 s, so that a
# block or two read early or late on one node moves the ratio by a few per cent only.
WINDOW = 20.0


def lib_advance(procs: list[NodeProcess], seconds: float, strangers: list[LyingPeer]) -> int:
    """How far the LIB advanced in ``seconds`` on the node where it advanced least, while each
    of ``strangers`` starts sessions against its node (``sessions_for``) from the start."""
    ends: list[Counter[str]] = []

    async def haunt() -> None:
        ends.extend(await asyncio.gather(*(sessions_for(s, seconds) for s in strangers)))

    thread = threading.Thread(target=asyncio.run, args=(haunt(),), daemon=True)
    before = [int(p.info()["last_irreversible_block_num"]) for p in procs]
    thread.start()
    hold(seconds, "the LIB's advance is measured over the window")
    after = [int(p.info()["last_irreversible_block_num"]) for p in procs]
    thread.join((SESSION_LIMIT + 2) * SLOWDOWN)
    assert not thread.is_alive(), "the strangers' sessions ended"
    advances = [a - b for a, b in zip(after, before, strict=True)]
    print(f"LIB advance per node in {seconds:.0f} s with {len(strangers)} strangers: {advances}")
    for stranger, ended in zip(strangers, ends, strict=True):
        print(f"{type(stranger).__name__} at {stranger.address}: sessions ended {dict(ended)}")
    for ended in ends:
        assert ended["still connected after the limit"] == 0, dict(ended)
        assert ended["second session BANNED"] == 1, f"its redial was refused: {dict(ended)}"
    return min(advances)


def test_three_producers_keep_finality_with_a_stranger_at_every_node(
    nodes: Nodes, tmp_path: Path
) -> None:
    """A 3-producer votes chain, meshed, with a trickling stranger at every node and then a
    liar at every node (fresh identities, for 20 s each): on every node the LIB advances at
    least 80 % as fast as in the 20 s undisturbed before, and each stranger is banned."""
    plan = loopback_plan(3)
    prepare(tmp_path, plan, {"finality": "votes"})
    for node in plan:
        with (tmp_path / node.name / "config.ini").open("a") as ini:
            ini.write("signature-workers = 0\n")  # three nodes share two cores
    procs = [nodes.run(tmp_path / n.name, rpc_port=n.rpc[1]) for n in plan]
    for proc in procs:
        proc.start()

    def meshed_and_final() -> bool:
        infos = [p.info() for p in procs]
        return all(i["peer_count"] == 2 and i["last_irreversible_block_num"] > 4 for i in infos)

    wait_for(meshed_and_final, 40, "three meshed nodes with a first LIB")
    chain_id = bytes.fromhex(procs[0].info()["chain_id"])
    undisturbed = lib_advance(procs, WINDOW, [])
    tricklers: list[LyingPeer] = [
        TricklingPeer(chain_id, n.p2p, partial(position_of, p))
        for n, p in zip(plan, procs, strict=True)
    ]
    trickled = lib_advance(procs, WINDOW, tricklers)
    lied = lib_advance(procs, WINDOW, [LyingPeer(chain_id, n.p2p) for n in plan])
    tails = "\n".join(p.tail() for p in procs)
    assert undisturbed >= WINDOW, f"undisturbed, LIB advanced {undisturbed}:\n{tails}"
    for name, advance in (("a trickler", trickled), ("a liar", lied)):
        ratio = advance / max(undisturbed, 1)
        print(
            f"LIB advance in {WINDOW:.0f} s (slowest node): {undisturbed} undisturbed, "
            f"{advance} with {name} at every node: {ratio:.0%}"
        )
        assert ratio >= 0.8, f"with {name}, LIB advanced {advance}:\n{tails}"
    for proc in procs:
        assert proc.rpc("/v1/chain/get_finalizer_info")["production_paused"] is False
