"""A hostile peer against a real producing ``bor-node``: claims are not facts.

The liar is written with our own p2p classes: a real TCP connection, the preamble and TLS 1.3
that the node's default ``p2p-tls = on`` asks for (a stranger can run TLS as well as anyone), a
valid handshake signed by a fresh random key and bound to that TLS session (the default
``allowed-connection = any`` lets it in), a claimed head and LIB of 10⁹, answers to every
keepalive, and never a block.
"""

from __future__ import annotations

import time
from pathlib import Path

from node.devnet import DevNode, prepare
from p2p.messages import GoAwayReason
from p2p.testing import LyingPeer
from tests.integration.conftest import SLOWDOWN, Nodes, free_port, wait_for


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
    time.sleep(3)
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
