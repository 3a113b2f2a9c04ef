"""Contract throughput against native transfers: full validation on one core, and a real node.

Builds the example token (``bor-contract build``'s compiler and flags), which notifies the
sender and the receiver of every transfer (``require_recipient``, as eosio.token): here both
are plain accounts (no contract, so no handler runs), and each transfer runs the token and
records two notifications in its trace. Then makes, on a chain of many funded accounts, setup
blocks (setcode, create, issue, a share of the token to every account), blocks of token
transfers (one ``call`` each) and, from the same setup, as many blocks of native transfers.
Each round applies them to fresh LevelDB-backed chains as a validating node does (signature
recovery on this process, TaPoS, replay checks, contract runs, state commitment, one write
batch per block): the setup untimed, then the contract blocks or the native blocks, timed.
Also timed per round: the block holding the setcode on a fresh chain (validation and
compilation: ``setcode_ms``), a transfer on a fresh runtime (compile, instantiate, run:
``cold_call_ms``) and once compiled (``warm_call_us``).

Then a real node (``bor-node run``): concurrent clients push token transfers, then native
transfers (mode sync, alternating, in rounds), and after a restart (module cache cold) the
first pushed transfer's latency against the next ones'.

    python scripts/bench_contracts.py [--blocks 10] [--txs-per-block 500] [--rounds 3]

Figures are medians over the rounds. The last line of output is a JSON object with
``contract_tx_per_s``, ``native_tx_per_s``, ``ratio_contract_native``, ``setcode_ms``,
``cold_call_ms``, ``warm_call_us``, ``actions_per_transfer`` (the token's action and its
notifications) and the RPC figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from chain.abi import Abi, parse_abi
from chain.controller import Chain
from chain.core.consensus.block import SignedBlock, decode_block
from chain.core.execution.actions import Action, Call, SetCode, Transfer
from chain.core.execution.contracts import ContractCall, TxTrace
from chain.core.execution.state import StateView
from chain.core.execution.transaction import SignedTransaction, Transaction, tapos_of
from chain.core.primitives.crypto import PrivateKey, public_key_to_text
from chain.core.primitives.params import slot_time_s
from chain.core.primitives.types import AccountName, BlockId
from chain.mempool import Mempool
from chain.storage.store import BlockStore
from chain.vm import ContractRuntime
from contract_tools.build import CONTRACTS_DIR, BuildError, build
from genesis.model import Genesis
from node.cli import tune_gc
from scripts import bench_apply
from scripts.bench_apply import _one
from scripts.bench_rpc import push_phase
from scripts.benchtools import cores, cores_used, post_json, start_producer, stop_node

TOKEN = AccountName("token")
# Token units (0.0001 TOK) each account gets in the setup: enough for every transfer below.
SHARE = 10_000_000
# Contract transfers per transaction of the setup's share-out: the wire's most actions.
SHARE_ACTIONS = 16
PUSHERS = 30


def bench_genesis(accounts: int) -> tuple[Genesis, dict[str, PrivateKey]]:
    return bench_apply.bench_genesis(accounts, extra=(str(TOKEN),))


def tok(units: int) -> str:
    return f"{units // 10_000}.{units % 10_000:04d} TOK"


class Signer:
    """Signed transactions on one chain, with TaPoS of a given block."""

    def __init__(self, chain_id: bytes, keys: dict[str, PrivateKey], abi: Abi) -> None:
        self.chain_id = chain_id
        self.keys = keys
        self.abi = abi
        self.users = [n for n in keys if n.startswith("user")]

    def sign(self, ref: bytes, signer: str, actions: tuple[Action, ...]) -> SignedTransaction:
        ref_num, ref_prefix = tapos_of(BlockId(ref))
        # Built blocks are stamped from ten minutes ago (the genesis's start): ten minutes
        # ahead keeps the expiration inside the chain's window from either time.
        tx = Transaction(int(time.time()) + 600, ref_num, ref_prefix, actions)
        return SignedTransaction.sign(tx, self.chain_id, [self.keys[signer]])

    def call(self, action: str, actor: str, args: dict[str, Any]) -> Call:
        data = self.abi.encode_action(action, args)
        return Call(TOKEN, action, (AccountName(actor),), data)

    def pair(self, i: int) -> tuple[str, str]:
        sender, recipient = (
            self.users[i % len(self.users)],
            self.users[(i * 7 + 1) % len(self.users)],
        )
        if sender == recipient:
            recipient = self.users[(i + 1) % len(self.users)]
        return sender, recipient

    def contract_transfers(self, ref: bytes, count: int, offset: int) -> list[SignedTransaction]:
        out = []
        for i in range(offset, offset + count):
            sender, recipient = self.pair(i)
            args = {"from": sender, "to": recipient, "quantity": tok(1 + i % 1000), "memo": str(i)}
            out.append(self.sign(ref, sender, (self.call("transfer", sender, args),)))
        return out

    def native_transfers(self, ref: bytes, count: int, offset: int) -> list[SignedTransaction]:
        out = []
        for i in range(offset, offset + count):
            sender, recipient = self.pair(i)
            action = Transfer(AccountName(sender), AccountName(recipient), 1 + i % 1000, str(i))
            out.append(self.sign(ref, sender, (action,)))
        return out

    def setup_steps(self, code: bytes, abi_text: str, ref: bytes) -> list[list[SignedTransaction]]:
        """The setup, one block per step (each step needs the one before it applied)."""
        supply = SHARE * (len(self.users) + 1)
        create = {"issuer": str(TOKEN), "maximum_supply": tok(supply)}
        issue = {"to": str(TOKEN), "quantity": tok(supply), "memo": "all"}
        share = [
            self.call(
                "transfer", TOKEN, {"from": TOKEN, "to": u, "quantity": tok(SHARE), "memo": ""}
            )
            for u in self.users
        ]
        return [
            [self.sign(ref, TOKEN, (SetCode(TOKEN, code, abi_text),))],
            [self.sign(ref, TOKEN, (self.call("create", TOKEN, create),))],
            [self.sign(ref, TOKEN, (self.call("issue", TOKEN, issue),))],
            [
                self.sign(ref, TOKEN, tuple(share[i : i + SHARE_ACTIONS]))
                for i in range(0, len(share), SHARE_ACTIONS)
            ],
        ]


def produce(chain: Chain, txs: list[SignedTransaction], key: PrivateKey) -> SignedBlock:
    now = int(time.time() * 1000)
    for stx, err in zip(txs, chain.admit_transactions(txs, now), strict=True):
        assert err is None, f"{stx.id.hex()}: {err}"
    block = chain.produce_block(chain.head.slot + 1, key)
    assert len(block.transactions) == len(txs), "every transaction must be included"
    return block


def build_blocks(
    genesis: Genesis,
    signer: Signer,
    code: bytes,
    abi_text: str,
    blocks: int,
    per_block: int,
    work: Path,
) -> tuple[list[bytes], list[bytes], list[bytes]]:
    """Encoded setup blocks, contract blocks on them and native blocks on them."""
    key = signer.keys["producera"]
    chains = [
        Chain(
            BlockStore(str(work / f"producer-{kind}"), sync=False),
            genesis.to_initial_state(),
            mempool=Mempool(per_block * 2, per_block),
        )
        for kind in ("contract", "native")
    ]
    contract, native = chains
    setup = []
    for step in signer.setup_steps(code, abi_text, contract.head.id):
        block = produce(contract, step, key)
        native.push_block(block, int(time.time() * 1000))
        setup.append(block.encode())
    calls, transfers = [], []
    for b in range(blocks):
        txs = signer.contract_transfers(contract.head.id, per_block, b * per_block)
        calls.append(produce(contract, txs, key).encode())
        txs = signer.native_transfers(native.head.id, per_block, b * per_block)
        transfers.append(produce(native, txs, key).encode())
    for chain in chains:
        chain.store.close()
    return setup, calls, transfers


def apply_round(
    genesis: Genesis, setup: list[bytes], measured: list[bytes], path: Path
) -> dict[str, float]:
    """A fresh chain applies the setup, timing its setcode block, then ``measured``, timed;
    then a transfer runs on a fresh runtime (cold) and again and again on the chain's (warm)."""
    chain = Chain(BlockStore(str(path)), genesis.to_initial_state(), recoverer=_one)
    now = int(time.time() * 1000)
    t0 = time.perf_counter()
    chain.push_block(decode_block(setup[0]), now)
    setcode_s = time.perf_counter() - t0
    for encoded in setup[1:]:
        chain.push_block(decode_block(encoded), now)
    cpu0, t0 = time.process_time(), time.perf_counter()
    upcoming = decode_block(measured[0])
    chain.prefetch_keys(upcoming.transactions)
    for i in range(len(measured)):
        block = upcoming
        if i + 1 < len(measured):
            upcoming = decode_block(measured[i + 1])
            chain.prefetch_keys(upcoming.transactions)
        chain.push_block(block, now)
    apply_s, apply_cpu_s = time.perf_counter() - t0, time.process_time() - cpu0
    cold_s, warm_s, actions = call_times(chain)
    chain.store.close()
    return {
        "apply_s": apply_s,
        "cores_used": cores_used(apply_cpu_s, apply_s),
        "setcode_s": setcode_s,
        "cold_s": cold_s,
        "warm_s": warm_s,
        "actions": actions,
    }


def call_times(chain: Chain, runs: int = 300) -> tuple[float, float, int]:
    """One transfer (the last block's first) on a fresh runtime, then the median of ``runs``
    on the chain's own, each on a child view dropped after, so each does the same work; and
    the actions its trace holds (the token's and its notifications)."""
    block = chain.block_by_id(chain.head.id)
    action = block.transactions[0].tx.actions[0]
    if not isinstance(action, Call):
        return 0.0, 0.0, 0  # native blocks: nothing to call
    call = ContractCall(action.contract, action.action_name, action.authorization, action.data)
    reader = chain.store.frozen()
    view = StateView(reader)
    when = {
        "params": chain.params,
        "block_time_s": slot_time_s(chain.head.slot),
        "block_num": chain.head.num,
    }

    trace = TxTrace()

    def once(runtime: Any) -> float:
        nonlocal trace
        trace = TxTrace()
        t0 = time.perf_counter()
        runtime.run(view.child(), call, trace, fuel_left=chain.params.max_tx_fuel, **when)
        return time.perf_counter() - t0

    try:
        cold = once(ContractRuntime())
        warm = statistics.median(once(chain.vm) for _ in range(runs))
    finally:
        reader.close()
    return cold, warm, len(trace.actions)


# --- the RPC --------------------------------------------------------------------------------


def push_bodies(txs: list[SignedTransaction], mode: str = "sync") -> list[bytes]:
    return [
        json.dumps(
            {"packed_trx": t.packed.hex(), "signatures": [t.signatures[0].hex()], "mode": mode}
        ).encode()
        for t in txs
    ]


def bench_rpc(
    genesis: Genesis,
    signer: Signer,
    code: bytes,
    abi_text: str,
    work: Path,
    rounds: int,
    seconds: float,
) -> dict[str, float]:
    data = work / "rpc-node"
    data.mkdir()
    (data / "genesis.json").write_text(json.dumps(genesis.to_json()))
    producer = signer.keys["producera"]
    key_text = f"{public_key_to_text(producer.public_key)}=KEY:{producer.to_text()}"
    proc, url = start_producer(data, "producera", key_text)
    push_url = url + "/v1/chain/push_transaction"
    try:
        head = bytes.fromhex(post_json(url + "/v1/chain/get_info")["head_block_id"])
        for step in signer.setup_steps(code, abi_text, head):
            for body in push_bodies(step, "commit"):
                answer = post_json(push_url, json.loads(body), timeout=60)
                assert answer["status"] == "included", answer
        contract_rates, native_rates = [], []
        offset = 10**6
        for r in range(rounds):
            head = bytes.fromhex(post_json(url + "/v1/chain/get_info")["head_block_id"])
            count = int(seconds * 3000)
            calls = push_bodies(signer.contract_transfers(head, count, offset))
            transfers = push_bodies(signer.native_transfers(head, count, offset))
            offset += count
            c = asyncio.run(push_phase(url, calls, PUSHERS, seconds))
            time.sleep(1.5)  # let the mempool drain into blocks
            n = asyncio.run(push_phase(url, transfers, PUSHERS, seconds))
            time.sleep(1.5)
            print(f"  rpc round {r + 1}: contract {c:7,.0f} pushes/s, native {n:7,.0f} pushes/s")
            contract_rates.append(c)
            native_rates.append(n)
        stop_node(proc)
        proc, url = start_producer(data, "producera", key_text)  # its module cache is cold
        push_url = url + "/v1/chain/push_transaction"
        head = bytes.fromhex(post_json(url + "/v1/chain/get_info")["head_block_id"])
        latencies = []
        for body in push_bodies(signer.contract_transfers(head, 21, offset)):
            t0 = time.perf_counter()
            post_json(push_url, json.loads(body))
            latencies.append(time.perf_counter() - t0)
    finally:
        stop_node(proc)
    return {
        "rpc_contract_push_per_s": statistics.median(contract_rates),
        "rpc_native_push_per_s": statistics.median(native_rates),
        "rpc_ratio_contract_native": statistics.median(
            c / n for c, n in zip(contract_rates, native_rates, strict=True)
        ),
        "rpc_cold_push_ms": 1000 * latencies[0],
        "rpc_warm_push_ms": 1000 * statistics.median(latencies[1:]),
    }


def main() -> None:
    tune_gc()  # the chain runs here in-process: collect garbage as a node does
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--blocks", type=int, default=10)
    parser.add_argument("--txs-per-block", type=int, default=500)
    parser.add_argument("--accounts", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rpc-seconds", type=float, default=4.0)
    parser.add_argument("--skip-rpc", action="store_true")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="bor-bench-contracts-"))
    try:
        shutil.copytree(CONTRACTS_DIR / "examples" / "token", work / "token",
                        ignore=shutil.ignore_patterns("build"))  # fmt: skip
        try:
            built = build(work / "token")
        except BuildError as err:
            sys.exit(f"bench_contracts: cannot build the token: {err.reason}")
        code, abi_text = built.wasm.read_bytes(), built.abi.read_text()
        print(f"token: {built.size} bytes, code hash {built.code_hash.hex()[:16]}")
        machine = cores()
        print(f"{machine}; applying uses one (signature recovery in this process)")
        genesis, keys = bench_genesis(args.accounts)
        signer = Signer(genesis.chain_id, keys, parse_abi(abi_text))
        t0 = time.perf_counter()
        setup, calls, transfers = build_blocks(
            genesis, signer, code, abi_text, args.blocks, args.txs_per_block, work
        )
        total = args.blocks * args.txs_per_block
        print(f"built {len(setup)} setup blocks and 2 x {args.blocks} blocks x "
              f"{args.txs_per_block} transfers in {time.perf_counter() - t0:.1f} s")  # fmt: skip
        contract, native, setcode, cold, warm, actions = [], [], [], [], [], []
        contract_cores, native_cores = [], []
        for r in range(args.rounds):
            c = apply_round(genesis, setup, calls, work / f"apply-c{r}")
            n = apply_round(genesis, setup, transfers, work / f"apply-n{r}")
            contract.append(total / c["apply_s"])
            native.append(total / n["apply_s"])
            setcode += [c["setcode_s"], n["setcode_s"]]
            contract_cores.append(c["cores_used"])
            native_cores.append(n["cores_used"])
            cold.append(c["cold_s"])
            warm.append(c["warm_s"])
            actions.append(c["actions"])
            print(
                f"round {r + 1}: contract {contract[-1]:7,.0f} tx/s, native {native[-1]:7,.0f} "
                f"tx/s ({contract[-1] / native[-1]:.3f}); "
                f"setcode block {1000 * c['setcode_s']:.1f} ms; "
                f"transfer cold {1000 * c['cold_s']:.1f} ms, warm {1e6 * c['warm_s']:.0f} µs; "
                f"cores used {c['cores_used']:.2f}, {n['cores_used']:.2f}"
            )
        figures: dict[str, Any] = {
            "contract_tx_per_s": round(statistics.median(contract)),
            "native_tx_per_s": round(statistics.median(native)),
            "ratio_contract_native": round(
                statistics.median(c / n for c, n in zip(contract, native, strict=True)), 3
            ),
            "setcode_ms": round(1000 * statistics.median(setcode), 1),
            "cold_call_ms": round(1000 * statistics.median(cold), 1),
            "warm_call_us": round(1e6 * statistics.median(warm)),
            "actions_per_transfer": max(actions),
            "txs": total,
            "rounds": args.rounds,
            "cores_available": machine.available,
            "contract_cores_used": round(statistics.median(contract_cores), 2),
            "native_cores_used": round(statistics.median(native_cores), 2),
        }
        if not args.skip_rpc:
            rpc = bench_rpc(genesis, signer, code, abi_text, work, args.rounds, args.rpc_seconds)
            print(
                f"push_transaction via RPC, {PUSHERS} clients: contract "
                f"{rpc['rpc_contract_push_per_s']:,.0f}/s, "
                f"native {rpc['rpc_native_push_per_s']:,.0f}/s; "
                f"first push after a restart {rpc['rpc_cold_push_ms']:.1f} ms, "
                f"then {rpc['rpc_warm_push_ms']:.1f} ms"
            )
            figures |= {k: round(v, 3) for k, v in rpc.items()}
        print(json.dumps(figures))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
