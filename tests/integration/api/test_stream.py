"""``/v1/chain/stream`` on real node processes and real websockets: every block in order, undo
on a fork switch, resume from a cursor, the README's consumer, and payloads in the one shape
the RPC shows them in. (Clients that never read, the limits, bad subscriptions:
``test_stream_limits``.)"""

from __future__ import annotations

import asyncio
import json
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from tests.integration.api.stream_clients import (
    Follower,
    Load,
    SeenChain,
    block_id,
    dev_keys,
    one_producer,
    reached,
    readme_consumer,
)
from tests.integration.conftest import (
    Nodes,
    wait_for,
)
from tests.integration.contracts.test_contracts_nodes import Wallet
from tests.integration.test_finality import four_producers
from tests.node.api import kv_contract


def test_a_subscriber_sees_every_block_of_three_producers_in_order(
    nodes: Nodes, tmp_path: Path
) -> None:
    """On a 3-producer devnet under a push load, a reversible subscriber sees a chain with no
    gap that is the node's chain up to the LIB, and an irreversible_only one sees every block
    up to the LIB once, in order, ids as get_block gives them, never an undo."""
    devnet = nodes.devnet("net", producers=3).start(wait_head=1)
    wait_for(lambda: devnet.info()["peer_count"] == 2, 30, "full mesh")
    live = Follower(devnet.url, {"stream": "blocks"})
    final = Follower(devnet.url, {"stream": "blocks", "irreversible_only": True})
    assert live.subscribed and final.subscribed, (live.frames, final.frames)
    with Load(devnet, dev_keys(devnet.data_dir), 0.2) as load:
        wait_for(lambda: len(load.sent) >= 300, 60, "the network under load (300 transfers)")
    lib = int(devnet.info()["last_irreversible_block_num"])
    wait_for(lambda: final.of_type("block")[-1]["block"]["num"] >= lib, 30, "the LIB streamed")
    wait_for(lambda: SeenChain(live.frames).top is not None, 5, "a live block")
    live.stop()
    final.stop()

    seen = SeenChain(live.frames)
    assert seen.blocks[0][0] <= live.frames[0]["head"]["num"] + 1, "live from the head"
    for num, bid in seen.blocks:
        if num <= lib:
            assert bid == block_id(devnet, num), num
    assert seen.top is not None and seen.top[0] > lib

    assert not final.of_type("undo")
    blocks = [f["block"] for f in final.of_type("block")]
    assert all(f["irreversible"] for f in final.of_type("block"))
    nums = [b["num"] for b in blocks]
    assert nums == list(range(nums[0], nums[0] + len(nums))), "each block once, in order"
    assert nums[0] <= final.frames[0]["lib"]["num"] + 1 and nums[-1] >= lib
    for b in blocks:
        assert b["id"] == block_id(devnet, b["num"]), b
    assert sum(b["transaction_count"] for b in blocks) >= 100, "the blocks carried the load"


def test_a_healed_two_two_partition_undoes_exactly_the_popped_blocks(
    nodes: Nodes, tmp_path: Path
) -> None:
    """Split 2/2, both sides produce, healed: a reversible subscriber on each side gets an
    undo for each block that left its node's chain (highest first, each one it had seen, the
    cursor on its parent) and every block it saw and was not told to undo is on the final
    chain."""
    # node2 -> node1 and node4 -> node3 inside the sides; node3 -> node1, node4 -> node2 across.
    plan, procs = four_producers(nodes, tmp_path, [(1, 0), (3, 2), (2, 0), (3, 1)])
    wait_for(lambda: min(p.info()["last_irreversible_block_num"] for p in procs) > 4, 40, "LIB")
    followers = [Follower(procs[i].url, {"stream": "blocks"}) for i in (0, 2)]
    assert all(f.subscribed for f in followers), [f.frames[:1] for f in followers]
    for side, other in ((2, 0), (3, 1)):
        address = f"127.0.0.1:{plan[other].p2p[1]}"
        for peer in procs[side].rpc("/v1/net/peers")["peers"]:
            if peer["address"] == address:
                procs[side].admin("/v1/net/disconnect", {"peer": peer["peer"]})
    wait_for(lambda: all(p.info()["peer_count"] == 1 for p in procs), 10, "two sides")
    split = max(p.info()["head_block_num"] for p in procs)
    wait_for(
        lambda: all(p.info()["head_block_num"] >= split + 2 for p in (procs[0], procs[2])),
        30,
        "both sides to produce",
    )
    assert procs[0].info()["head_block_id"] != procs[2].info()["head_block_id"], "diverged"
    for side, other in ((2, 0), (3, 1)):
        procs[side].admin("/v1/net/connect", {"address": f"127.0.0.1:{plan[other].p2p[1]}"})
    heal_head = max(p.info()["head_block_num"] for p in procs)
    wait_for(
        lambda: min(p.info()["last_irreversible_block_num"] for p in procs) > heal_head + 2,
        60,
        "finality past the heal on every node",
    )
    lib = min(int(p.info()["last_irreversible_block_num"]) for p in procs)
    for f in followers:
        wait_for(partial(reached, f, lib), 10, "each subscriber at the LIB")
    for f in followers:
        f.stop()

    undone = 0
    for f in followers:
        seen = SeenChain(f.frames)
        undone += len(seen.undone)
        for num, bid in seen.blocks:
            if num <= lib:
                assert bid == block_id(procs[1], num), f"seen, not undone, yet not final: {num}"
        for num, bid in seen.undone:
            assert bid != block_id(procs[1], num), f"undone yet final: {num}"
    assert undone >= 1, "the losing side's subscriber was told of its popped blocks"


def test_a_killed_client_resumes_from_its_cursor_a_hundred_blocks_later(
    nodes: Nodes, tmp_path: Path
) -> None:
    """A client killed mid-stream and back 100 blocks (about a minute) later with its cursor
    gets every block it missed exactly once: numbers contiguous from cursor + 1, ids as
    get_block gives them."""
    node = one_producer(nodes, tmp_path)
    first = Follower(node.url, {"stream": "blocks"})
    assert first.subscribed, first.frames
    wait_for(lambda: len(first.of_type("block")) >= 4, 10, "a few blocks")
    first.kill()
    cursor = first.of_type("block")[-1]["cursor"]
    missed = cursor["num"] + 100
    wait_for(lambda: int(node.info()["head_block_num"]) >= missed, 120, "100 blocks missed")
    head = int(node.info()["head_block_num"])
    back = Follower(node.url, {"stream": "blocks", "cursor": cursor})
    assert back.subscribed, back.frames
    assert back.frames[0]["resume_from"] == cursor["num"] + 1
    wait_for(lambda: back.of_type("block")[-1]["block"]["num"] >= head + 2, 30, "caught up")
    back.stop()
    nums = [f["block"]["num"] for f in back.of_type("block")]
    assert nums == list(range(cursor["num"] + 1, nums[-1] + 1)), "contiguous, each once"
    SeenChain([first.of_type("block")[-1], *back.frames])  # the first one extends the cursor
    for f in back.of_type("block"):
        assert f["block"]["id"] == block_id(node, f["block"]["num"])


def test_the_readme_consumer_resumes_where_it_stopped(
    nodes: Nodes, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The README's consumer, stopped and started again, goes on from the cursor it stored:
    the blocks it printed over both runs are contiguous, each once, as get_block gives them."""
    node = one_producer(nodes, tmp_path)
    cursor_file = tmp_path / "cursor.json"
    follow = readme_consumer()

    async def run_for(seconds: float) -> None:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(follow(node.url, cursor_file), seconds)

    asyncio.run(run_for(3))
    away = int(node.info()["head_block_num"])
    # Blocks go by while it is away.
    wait_for(lambda: int(node.info()["head_block_num"]) >= away + 3, 20, "3 blocks gone by")
    asyncio.run(run_for(3))
    events = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [e["type"] for e in events].count("subscribed") == 2
    blocks = [e["block"] for e in events if e["type"] == "block"]
    nums = [b["num"] for b in blocks]
    assert len(nums) >= 8 and nums == list(range(nums[0], nums[0] + len(nums))), nums
    assert json.loads(cursor_file.read_text()) == {"num": nums[-1], "id": blocks[-1]["id"]}
    for b in blocks:
        assert b["id"] == block_id(node, b["num"])


def test_payloads_on_the_stream_are_what_push_action_and_the_rpc_show(
    nodes: Nodes, tmp_path: Path
) -> None:
    """With a contract deployed by the wallet, the actions stream shows its action's data and
    event decoded exactly as ``push action --json`` printed them (hex beside), live and
    replayed from a cursor; a native transfer's amount is "2.0000 BOR" there, in a blocks
    subscription that asked for transactions, and in get_transaction."""
    node = one_producer(nodes, tmp_path)
    actions = Follower(node.url, {"stream": "actions", "accounts": ["alice"]})
    blocks = Follower(node.url, {"stream": "blocks", "transactions": True})
    assert actions.subscribed and blocks.subscribed, (actions.frames, blocks.frames)
    start = blocks.frames[0]["head"]
    wallet = Wallet(tmp_path, node.url)
    wallet.ok("import", "--from-dev-keys", str(tmp_path / "keys.json"))
    (tmp_path / "kv.wasm").write_bytes(kv_contract.wasm())
    (tmp_path / "kv.abi.json").write_text(kv_contract.ABI)
    wallet.ok(
        "set", "code", "alice", str(tmp_path / "kv.wasm"), "--abi", str(tmp_path / "kv.abi.json")
    )
    entry = {"id": 7, "owner": "carol", "amount": 70}
    pushed = json.loads(
        wallet.ok("push", "action", "alice", "put", json.dumps(entry), "--auth", "bob", "--json")
    )
    (traced,) = pushed["trace"]["actions"]
    assert traced["data"] == entry and traced["events"] == [{"name": "stored", "data": entry}]
    sent = json.loads(wallet.ok("transfer", "alice", "bob", "2", "--json"))

    def streamed(follower: Follower) -> dict[str, dict[str, Any]]:
        return {a["name"]: a for f in follower.of_type("actions") for a in f["actions"]}

    wait_for(lambda: {"put", "transfer"} <= set(streamed(actions)), 20, "put and transfer")
    put, transfer = streamed(actions)["put"], streamed(actions)["transfer"]
    assert put["data"] == traced["data"] and put["hex"] == traced["hex"]
    assert [{"name": e["name"], "data": e["data"]} for e in put["events"]] == traced["events"]
    assert transfer["data"]["amount"] == "2.0000 BOR"
    assert transfer["tx_id"] == sent["transaction_id"]

    def carried() -> list[dict[str, Any]]:
        return [
            tx
            for f in blocks.of_type("block")
            if f["block"]["num"] == sent["block_num"]
            for tx in f["block"]["transactions"]
        ]

    wait_for(lambda: bool(carried()), 10, "the transfer's block with its transactions")
    (tx,) = carried()
    assert tx["id"] == sent["transaction_id"]
    assert tx["actions"][0]["data"]["amount"] == "2.0000 BOR"
    shown = node.rpc("/v1/chain/get_transaction", {"id": sent["transaction_id"]})
    assert shown["actions"] == tx["actions"]
    actions.stop()
    blocks.stop()

    replay = Follower(node.url, {"stream": "actions", "accounts": ["alice"], "cursor": start})
    wait_for(lambda: {"put", "transfer"} <= set(streamed(replay)), 20, "the replay")
    replay.stop()
    assert streamed(replay)["put"] == put and streamed(replay)["transfer"] == transfer
