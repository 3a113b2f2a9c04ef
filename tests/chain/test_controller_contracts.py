"""The chain manager with contracts: traces written with their block and undone with it, in
the applied-block events, in admission's answer; the block's fuel limit when building and
when validating (a scripted host stands in for wasmtime); and, with wasmtime, full, light and
reopened chains agreeing on a contract's history."""

from __future__ import annotations

from pathlib import Path

import pytest

from chain.abi import parse_abi
from chain.controller import Chain
from chain.core.block_transition import execute_transactions
from chain.core.execution.actions import Call, SetCode, Transfer
from chain.core.execution.contracts import TxTrace
from chain.core.execution.transaction import SignedTransaction
from chain.core.primitives.errors import InvalidBlock
from chain.core.primitives.types import AccountName, PublicKey
from chain.storage.store import BlockStore
from chain.testing import now_ms, state_dump
from chain.vm import ContractRuntime
from genesis.testing import DevNet
from tests.chain.contract_fakes import ScriptedHost, script
from tests.node.api import kv_contract

A, B, C = AccountName("alice"), AccountName("bob"), AccountName("carol")
CODE = b"\x00asm" + bytes(50)


def _open(net: DevNet, path: Path) -> tuple[Chain, ScriptedHost]:
    host = ScriptedHost()
    chain = Chain(BlockStore(str(path), sync=False), net.genesis.to_initial_state(), contracts=host)
    chain.take_events()  # from now on the chain records its events
    return chain, host


def _call(net: DevNet, chain: Chain, *steps: str) -> SignedTransaction:
    return net.tx(chain, Call(A, "run", (B,), script(*steps)))


def _deploy(net: DevNet, chain: Chain) -> None:
    chain.admit_transaction(net.tx(chain, SetCode(A, CODE, "")), now_ms())
    net.produce(chain)


def test_a_blocks_traces_are_stored_published_and_rebuilt_by_a_validating_peer(
    tmp_path: Path,
) -> None:
    """A produced block with a call has its traces in the store (Chain.traces) and in its
    applied-block event; a peer that validates the block has the same traces, the same
    state, and runs the call itself; a block without calls has none."""
    net = DevNet.create(1)
    x, _ = _open(net, tmp_path / "x")
    y, y_host = _open(net, tmp_path / "y")
    _deploy(net, x)
    stx = _call(net, x, "put:k=v", "burn:1000", "emit:done")
    x.admit_transaction(stx, now_ms())
    x.take_events()
    block = net.produce(x)
    (step,) = x.take_events().steps
    assert [tx_id for tx_id, _ in step.traces] == [stx.id]
    traces = x.traces(block.num)
    assert [(tx_id, t.fuel) for tx_id, t in traces] == [(stx.id, 1000)]
    assert traces[0][1].actions[0].events == [("done", block.num.to_bytes(4, "big"))]
    for b in (x.block_by_num(1), x.block_by_num(2), block):
        y.push_block(b, now_ms())
    assert y_host.runs == 1
    assert y.traces(block.num) == traces
    assert state_dump(x) == state_dump(y)
    assert x.traces(block.num - 1) == []


def test_admission_answers_with_the_trace_of_a_call(tmp_path: Path) -> None:
    """admit_traced gives the trace of an admitted call, None for a native transaction, and
    the error for a refused one (admit_transactions still gives None or the error)."""
    net = DevNet.create(1)
    x, _ = _open(net, tmp_path)
    _deploy(net, x)
    ok, native, bad = (
        _call(net, x, "emit:hello"),
        net.tx(x, Transfer(A, B, 1)),
        _call(net, x, "fail"),
    )
    results = x.admit_traced([ok, native, bad], now_ms())
    assert isinstance(results[0], TxTrace) and results[0].actions[0].events[0][0] == "hello"
    assert results[1] is None
    assert str(results[2]) == "alice::run: assertion failed: told to"


def test_a_popped_block_takes_its_traces_with_it(tmp_path: Path) -> None:
    """When a fork switch pops a block that ran a call, its traces are deleted with it and
    the new branch's block at that height has its own (none)."""
    net = DevNet.create(3, blocks_per_turn=1)
    x, _ = _open(net, tmp_path / "x")
    y, _ = _open(net, tmp_path / "y")
    for _ in range(3):
        y.push_block(net.produce(x), now_ms())
    x.admit_transaction(net.tx(x, SetCode(A, CODE, "")), now_ms())
    y.push_block(net.produce(x), now_ms())
    base_slot = x.head.slot
    x.admit_transaction(_call(net, x, "put:k=v"), now_ms())
    x_block = net.produce(x, base_slot + 1)
    assert x.traces(x_block.num)
    y.admit_transaction(net.tx(y, Transfer(A, C, 7)), now_ms())
    y_blocks = [net.produce(y, base_slot + 2 + i) for i in range(3)]
    x.take_events()
    for block in y_blocks:
        x.push_block(block, now_ms())
    assert x.take_events().popped == [x_block]
    assert x.traces(x_block.num) == []
    assert state_dump(x) == state_dump(y)


def test_a_call_past_the_blocks_fuel_waits_for_the_next_block(tmp_path: Path) -> None:
    """With room for two calls of 60,000 fuel in a block (max_block_fuel 150,000), the third
    is left out but stays in the mempool, a later call is not tried, a native transfer after
    them still goes in, and the next block takes both calls; Execution.fuel sums the block."""
    net = DevNet.create(1, max_tx_fuel=100_000, max_block_fuel=150_000)
    x, host = _open(net, tmp_path)
    _deploy(net, x)
    calls = [_call(net, x, f"put:k{i}=v", "burn:60000") for i in range(4)]
    transfer = net.tx(x, Transfer(A, C, 5))
    for stx in [*calls, transfer]:
        x.admit_transaction(stx, now_ms())
    runs = host.runs
    first = net.produce(x)
    assert first.transactions == (calls[0], calls[1], transfer)
    assert host.runs - runs == 3, "the fourth call is not tried once the block's fuel is spent"
    assert calls[2].id in x.mempool and calls[3].id in x.mempool
    assert sum(t.fuel for _, t in x.traces(first.num)) == 120_000
    second = net.produce(x)
    assert second.transactions == (calls[2], calls[3])
    assert len(x.mempool) == 0


def test_a_block_past_its_fuel_is_invalid(tmp_path: Path) -> None:
    """Validating (strict) a block whose calls together pass max_block_fuel fails the block,
    naming the block's fuel; building (lenient) the same leaves the last one out."""
    net = DevNet.create(1, max_tx_fuel=100_000, max_block_fuel=150_000)
    x, host = _open(net, tmp_path)
    _deploy(net, x)
    txs = [(_call(net, x, f"put:k{i}=v", "burn:60000"), frozenset[PublicKey]()) for i in range(3)]
    slot = x.head.slot + 1
    with pytest.raises(InvalidBlock, match="block fuel"):
        execute_transactions(
            x.store, x.head, slot, txs, params=x.params, strict=True, check_auth=False,
            contracts=host,
        )  # fmt: skip
    built = execute_transactions(
        x.store, x.head, slot, txs, params=x.params, strict=False, check_auth=False,
        contracts=host,
    )  # fmt: skip
    assert (len(built.included), built.failed, built.fuel) == (2, (), 120_000)


def test_a_chain_runs_the_real_runtime_by_default(tmp_path: Path) -> None:
    """A Chain made without a host runs contracts with chain.vm's ContractRuntime, and a
    setcode of bytes that are no WebAssembly module is refused by it."""
    net = DevNet.create(1)
    chain = net.open(tmp_path)
    assert isinstance(chain.vm, ContractRuntime)
    (error,) = chain.admit_transactions([net.tx(chain, SetCode(A, b"not wasm", ""))], now_ms())
    assert error is not None and error.name == "contract_error"


def test_full_light_and_reopened_chains_agree_on_a_real_contracts_history(tmp_path: Path) -> None:
    """With real wasmtime, a peer validating fully, a peer in light mode (no signatures
    recovered) and the producer reopened from its store (a cold module cache) reach the same
    state roots and traces at every block of a contract's history."""
    net = DevNet.create(1)
    kv = parse_abi(kv_contract.ABI)
    producer = net.open(tmp_path / "producer")
    producer.admit_transaction(
        net.tx(producer, SetCode(A, kv_contract.wasm(), kv_contract.ABI)), now_ms()
    )
    net.produce(producer)
    for k in range(1, 6):
        for owner in (B, C):
            put = kv.encode_action("put", {"id": 10 * k + len(owner), "owner": owner, "amount": k})
            producer.admit_transaction(net.tx(producer, Call(A, "put", (B,), put)), now_ms())
        net.produce(producer)
    blocks = [producer.block_by_num(n) for n in range(1, producer.head.num + 1)]
    full = net.open(tmp_path / "full")
    light = net.open(tmp_path / "light")
    light.set_light_validation(producer.head.num)
    for block in blocks:
        for peer in (full, light):
            peer.push_block(block, now_ms())
            assert peer.head.state_root == block.header.state_root
    producer.store.close()
    reopened = net.open(tmp_path / "producer")
    assert reopened.vm is not producer.vm
    put = kv.encode_action("put", {"id": 99, "owner": C, "amount": 9})
    reopened.admit_transaction(net.tx(reopened, Call(A, "put", (B,), put)), now_ms())
    blocks.append(net.produce(reopened))  # the contract compiled again, by a new runtime
    for peer in (full, light):
        peer.push_block(blocks[-1], now_ms())
    for peer in (full, light, reopened):
        assert state_dump(peer) == state_dump(full)
        assert [peer.traces(b.num) for b in blocks] == [full.traces(b.num) for b in blocks]
    assert sum(len(full.traces(b.num)) for b in blocks) == 11
