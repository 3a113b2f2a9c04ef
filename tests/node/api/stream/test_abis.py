"""Contract data on the stream: decoded once per block by the contract's current ABI, the ABI
read once and forgotten when a block deploys to the contract, hex and null where no ABI
decodes it, and the block's decoding bounded."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, cast

import pytest

from chain.abi import parse_abi
from chain.controller import Chain
from chain.core.execution.actions import Action, Call, SetCode
from chain.core.primitives.types import AccountName, TxId
from chain.events import BlockStep
from chain.testing import now_ms
from chain.vm import ContractRuntime
from genesis.testing import DevNet
from node.api.payloads import MAX_DECODED_BYTES
from node.api.stream import abis as stream_abis
from node.api.stream.abis import BLOCK_DECODED_BYTES, StreamAbis, decode_block
from node.api.stream.frames import BlockIndex, Subscription
from node.runner import ChainRunner
from tests.node.api import kv_contract

README = Path(__file__).parents[4] / "README.md"
A, B = AccountName("alice"), AccountName("bob")
KV = parse_abi(kv_contract.ABI)
ACTIONS = Subscription("actions")
# The kv contract's ABI with its entry's amount renamed: a redeploy a client must see.
RENAMED = kv_contract.ABI.replace('"amount"', '"quantity"')


def _put(id_: int, owner: str, amount: int) -> Call:
    return Call(
        A, "put", (B,), KV.encode_action("put", {"id": id_, "owner": owner, "amount": amount})
    )


class Net:
    """A one-producer chain on its own thread, blocks made of the actions given."""

    def __init__(self, runner: ChainRunner, net: DevNet) -> None:
        self.runner, self.net = runner, net

    async def block(self, *actions: Action) -> BlockIndex:
        for action in actions:

            def admit(chain: Chain, action: Action = action) -> None:
                chain.admit_transaction(self.net.tx(chain, action), now_ms())

            await self.runner.call(admit)
        block = await self.runner.call(self.net.produce)
        traces = await self.runner.call(lambda c: c.traces(block.num))
        traced = tuple((TxId(t), trace) for t, trace in traces)
        return BlockIndex(block, traced, params=self.runner.view.params)


def _run(tmp_path: Path, test: Callable[[Net], Coroutine[Any, Any, None]]) -> None:
    net = DevNet.create(1)
    runner = ChainRunner(net.open(tmp_path / "chain"))
    try:
        asyncio.run(test(Net(runner, net)))
    finally:
        runner.close()


def _actions(index: BlockIndex) -> list[dict[str, Any]]:
    frame = index.frame(ACTIONS, False)
    assert frame is not None
    actions: list[dict[str, Any]] = json.loads(frame)["actions"]
    return actions


def _counting(monkeypatch: pytest.MonkeyPatch, name: str) -> list[int]:
    """Count the calls of ``node.api.stream.abis.<name>``."""
    calls: list[int] = []
    real = getattr(stream_abis, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(stream_abis, name, counted)
    return calls


def test_a_block_is_decoded_once_however_many_sessions_ask(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three sessions asking at once for one block's decoding get one ABI read and one
    decoding; the frame then shows the action's arguments and its event decoded beside the
    hex, equal to what the contract was given."""
    reads = _counting(monkeypatch, "read_abi_texts")
    decodings = _counting(monkeypatch, "decode_block")

    async def test(net: Net) -> None:
        await net.block(SetCode(A, kv_contract.wasm(), kv_contract.ABI))
        index = await net.block(_put(5, "carol", 50))
        abis = StreamAbis()
        await asyncio.gather(*(abis.decode(index, net.runner) for _ in range(3)))
        assert (len(reads), len(decodings)) == (1, 1)
        (action,) = _actions(index)
        entry = {"id": 5, "owner": "carol", "amount": 50}
        assert action["data"] == entry and action["hex"] == _put(5, "carol", 50).data.hex()
        assert action["events"] == [{"name": "stored", "hex": action["hex"], "data": entry}]

    _run(tmp_path, test)


def test_an_abi_is_read_once_and_forgotten_when_a_block_deploys_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A second block of the same contract is decoded without reading its ABI again; after a
    block that redeploys it with a renamed field is seen, the next block is decoded by the
    new ABI."""
    reads = _counting(monkeypatch, "read_abi_texts")

    async def test(net: Net) -> None:
        abis = StreamAbis()
        await net.block(SetCode(A, kv_contract.wasm(), kv_contract.ABI))
        for n in (1, 2):
            index = await net.block(_put(n, "bob", n))
            await abis.decode(index, net.runner)
            assert _actions(index)[0]["data"] == {"id": n, "owner": "bob", "amount": n}
        assert len(reads) == 1
        redeploy = await net.block(SetCode(A, kv_contract.wasm(), RENAMED))
        abis.deployed([BlockStep(redeploy.block)])
        index = await net.block(_put(3, "bob", 3))
        await abis.decode(index, net.runner)
        assert _actions(index)[0]["data"] == {"id": 3, "owner": "bob", "quantity": 3}
        assert len(reads) == 2

    _run(tmp_path, test)


def test_an_abi_read_across_a_deploy_is_used_but_not_kept(tmp_path: Path) -> None:
    """An ABI read while a block deploying to its contract arrives decodes the block asked
    for, but is not kept: the next block reads the ABI again rather than trust a stale one."""

    class Racing:
        """The runner, with a deploy seen on the loop while its read is in flight."""

        def __init__(self, runner: ChainRunner, on_read: Callable[[], None]) -> None:
            self.runner, self.on_read, self.reads = runner, on_read, 0

        async def call(self, fn: Callable[..., Any], *args: Any) -> Any:
            self.reads += 1
            answer = await self.runner.call(fn, *args)
            self.on_read()
            return answer

    async def test(net: Net) -> None:
        abis = StreamAbis()
        deploy = await net.block(SetCode(A, kv_contract.wasm(), kv_contract.ABI))
        racing = Racing(net.runner, lambda: abis.deployed([BlockStep(deploy.block)]))
        first = await net.block(_put(1, "bob", 1))
        await abis.decode(first, cast(ChainRunner, racing))
        assert _actions(first)[0]["data"] == {"id": 1, "owner": "bob", "amount": 1}
        racing.on_read = lambda: None
        await abis.decode(await net.block(_put(2, "bob", 2)), cast(ChainRunner, racing))
        assert racing.reads == 2

    _run(tmp_path, test)


@pytest.mark.parametrize("abi", ["", "not an ABI", '{"version": "bor::abi/1", "structs": 7}'])
def test_a_contract_without_a_valid_abi_shows_hex_and_null(
    tmp_path: Path, abi: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A contract deployed without an ABI, or with text that is no ABI (stored before setcode
    checked ABIs: the check is lifted here to store one), streams its data and events as hex
    with null data."""
    monkeypatch.setattr(ContractRuntime, "validate_abi", lambda self, abi: None)

    async def test(net: Net) -> None:
        await net.block(SetCode(A, kv_contract.wasm(), abi))
        index = await net.block(_put(1, "bob", 1))
        await StreamAbis().decode(index, net.runner)
        (action,) = _actions(index)
        assert action["data"] is None and action["hex"] == _put(1, "bob", 1).data.hex()
        assert action["events"] == [{"name": "stored", "hex": action["hex"], "data": None}]

    _run(tmp_path, test)


def test_a_blocks_decoding_stops_at_its_budget(tmp_path: Path) -> None:
    """With a budget of one payload, the block's first action is decoded and what follows
    (its event, the next action) is left null: the bound holds whatever the block holds."""

    async def test(net: Net) -> None:
        await net.block(SetCode(A, kv_contract.wasm(), kv_contract.ABI))
        index = await net.block(_put(1, "bob", 1), _put(2, "bob", 2))
        actions = index.contract_actions()
        abis = await StreamAbis().abis(["alice"], net.runner)
        size = len(actions[0][1].call.data)
        decoded = decode_block(actions, abis, budget=size)
        assert [d for d, _ in decoded.values()] == [{"id": 1, "owner": "bob", "amount": 1}, None]
        assert [e for _, e in decoded.values()] == [(None,), (None,)]
        whole = decode_block(actions, abis)
        assert [e for _, e in whole.values()] == [(d,) for d, _ in whole.values()]

    _run(tmp_path, test)


def test_the_readme_states_the_bounds_the_stream_keeps() -> None:
    """The README's bounds on decoding (a payload, a block) are the constants the code uses."""
    text = " ".join(README.read_text().split())
    bounds = f"{MAX_DECODED_BYTES >> 10} KiB a payload, {BLOCK_DECODED_BYTES >> 10} KiB of"
    assert bounds in text
