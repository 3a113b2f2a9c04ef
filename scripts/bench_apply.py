"""Block application throughput with full validation, against a signature yardstick R.

Builds blocks of 1,000 signed transfers between many accounts, then applies them to a fresh
chain on a real LevelDB store (signature recovery, TaPoS, replay checks, state, one write
batch per block), first on one core and then with signature recovery spread over worker
processes. The one-core run is repeated with the Python reference alone (``BOR_NATIVE=0``'s
path): ``onecore_tx_per_s`` (the executor the node would use) against
``onecore_python_tx_per_s``. R, single-core Ed25519 verifications per second through
``cryptography``, is measured in the same run so that figures compare across machines.
Finally a real node process is started and 50 concurrent HTTP clients ask it get_info
(``rpc_get_info_per_s``: what its HTTP shell answers without the chain thread), then push
transactions to it one at a time (``rpc_single_tx_per_s``), then 4 clients push them in
batches of 100 (``rpc_batch_tx_per_s``, to compare with ``onecore_tx_per_s``).

    python scripts/bench_apply.py [--blocks 20] [--txs-per-block 1000] [--workers 2] [--skip-rpc]

The last line of output is a JSON object of the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from chain.controller import Chain
from chain.core import block_transition
from chain.core.consensus.block import SignedBlock, decode_block
from chain.core.execution import engine
from chain.core.execution.actions import Transfer
from chain.core.execution.state_hash import StateHash
from chain.core.execution.transaction import SignedTransaction, Transaction, tapos_of
from chain.core.primitives.crypto import PrivateKey, public_key_to_text
from chain.core.primitives.types import AccountName
from chain.mempool import Mempool
from chain.signatures.sigpool import ParallelRecoverer
from chain.storage.store import BlockStore
from genesis.model import Genesis, parse_genesis
from node.cli import tune_gc
from scripts.benchtools import (
    cores,
    cores_used,
    post_json,
    process_cpu,
    push,
    start_producer,
    tree_cpu,
)

LETTERS = "abcdefghijklmnopqrstuvwxyz"


def measure_r(seconds: float = 1.5) -> float:
    """Single-core Ed25519 verifications per second through cryptography (OpenSSL)."""
    key = Ed25519PrivateKey.generate()
    message = os.urandom(128)
    signature, public = key.sign(message), key.public_key()
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for _ in range(200):
            public.verify(signature, message)
        count += 200
    return count / (time.perf_counter() - start)


def account_names(n: int) -> list[str]:
    names = []
    for i in range(n):
        digits = ""
        for _ in range(4):
            digits += LETTERS[i % 26]
            i //= 26
        names.append("user" + digits)
    return names


def bench_genesis(
    accounts: int, extra: tuple[str, ...] = ()
) -> tuple[Genesis, dict[str, PrivateKey]]:
    """A one-producer chain of ``accounts`` funded accounts (and the ``extra`` ones)."""
    names = ["bor.gov", "producera", *extra, *account_names(accounts)]
    keys = {name: PrivateKey.generate() for name in names}
    start = datetime.now(UTC) - timedelta(minutes=10)
    doc = {
        "initial_timestamp": start.strftime("%Y-%m-%dT%H:%M:%S.000Z"),
        "token": {"symbol": "BOR", "precision": 4, "supply": 10**12 * len(keys)},
        "governance": ["bor.gov"],
        "chain_params": {"schedule_size": 21, "max_block_txs": 5000},
        "accounts": [
            {"name": n, "key": public_key_to_text(k.public_key), "balance": 10**12}
            for n, k in keys.items()
        ],
        "initial_producers": [
            {"name": "producera", "key": public_key_to_text(keys["producera"].public_key)}
        ],
    }
    return parse_genesis(doc), keys


def signed_transfers(
    chain_id: bytes, ref: bytes, keys: dict[str, PrivateKey], count: int, offset: int
) -> list[SignedTransaction]:
    users = [n for n in keys if n.startswith("user")]
    ref_num, ref_prefix = tapos_of(ref)  # type: ignore[arg-type]
    expiration = int(time.time()) + 600
    out = []
    for i in range(offset, offset + count):
        sender, recipient = users[i % len(users)], users[(i * 7 + 1) % len(users)]
        if sender == recipient:
            recipient = users[(i + 1) % len(users)]
        action = Transfer(AccountName(sender), AccountName(recipient), 1 + i % 1000, str(i))
        tx = Transaction(expiration, ref_num, ref_prefix, (action,))
        out.append(SignedTransaction.sign(tx, chain_id, [keys[sender]]))
    return out


def build_blocks(
    genesis: Genesis, keys: dict[str, PrivateKey], blocks: int, per_block: int, work: Path
) -> list[SignedBlock]:
    chain = Chain(
        BlockStore(str(work / "producer"), sync=False),  # makes the input, not measured
        genesis.to_initial_state(),
        mempool=Mempool(per_block * 2, per_block),
    )
    out = []
    for b in range(blocks):
        txs = signed_transfers(chain.chain_id, chain.head.id, keys, per_block, b * per_block)
        now = int(time.time() * 1000)
        for stx in txs:
            chain.admit_transaction(stx, now)
        block = chain.produce_block(chain.head.slot + 1, keys["producera"])
        assert len(block.transactions) == per_block, "every transfer must be included"
        out.append(block)
    chain.store.close()
    return out


class StateHashMeter:
    """CPU seconds spent updating the state commitment (``next_state_hash``), measured by
    wrapping it for the duration of a ``with`` block."""

    def __init__(self) -> None:
        self.cpu = 0.0

    def __enter__(self) -> StateHashMeter:
        self._original = original = block_transition.next_state_hash

        def timed(*args: Any) -> StateHash:
            t0 = time.process_time()
            try:
                return original(*args)
            finally:
                self.cpu += time.process_time() - t0

        block_transition.next_state_hash = timed  # type: ignore[assignment]
        return self

    def __exit__(self, *exc: object) -> None:
        block_transition.next_state_hash = self._original


def apply_blocks(
    genesis: Genesis, encoded: list[bytes], path: Path, workers: int
) -> tuple[float, float, float, float]:
    """Decode and apply ``encoded`` blocks on a fresh chain, with signature recovery on this
    process (workers=0) or prefetched one block ahead in ``workers`` processes.

    Returns (wall seconds, CPU seconds of this process, of which updating the state hash,
    CPU seconds of this process and its workers).
    """
    recoverer = ParallelRecoverer(workers) if workers else None
    if recoverer is not None:  # start the worker processes before the clock does
        recoverer.submit([(bytes(65), bytes(32))] * workers)()
    chain = Chain(BlockStore(str(path)), genesis.to_initial_state(), recoverer=recoverer or _one)
    now = int(time.time() * 1000)
    with StateHashMeter() as meter:
        workers0 = _workers_cpu()
        cpu0, t0 = time.process_time(), time.perf_counter()
        upcoming = decode_block(encoded[0])
        chain.prefetch_keys(upcoming.transactions)
        for i in range(len(encoded)):
            block = upcoming
            if i + 1 < len(encoded):
                upcoming = decode_block(encoded[i + 1])
                chain.prefetch_keys(upcoming.transactions)
            chain.push_block(block, now)
        wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
        tree = cpu + _workers_cpu() - workers0
    assert chain.head.id == block.id
    chain.store.close()
    if recoverer is not None:
        recoverer.close()
    return wall, cpu, meter.cpu, tree


def _workers_cpu() -> float:
    """CPU seconds of this process's live children (the signature workers). Our own share of
    ``tree_cpu`` is taken out: its scan of /proc would otherwise count in the interval."""
    pid = os.getpid()
    return tree_cpu(pid) - process_cpu(pid)


def _one(items: list[tuple[bytes, bytes]]) -> list[Any]:
    from chain.core.primitives.crypto import recover_many

    return recover_many(items)


# --- the RPC push rate ----------------------------------------------------------------------


async def _send_all(
    url: str,
    bodies: list[bytes],
    clients: int,
    seconds: float,
    send: Callable[[Any, str, bytes], Awaitable[tuple[int, int]]],
) -> tuple[int, int]:
    """``bodies`` sent by ``send(session, url, body)`` (transactions accepted, refused) from
    ``clients`` concurrent clients until ``seconds`` have passed: the totals."""
    import aiohttp

    ok = refused = 0
    queue = iter(bodies)
    deadline = time.perf_counter() + seconds

    async def client(session: aiohttp.ClientSession) -> None:
        nonlocal ok, refused
        for body in queue:
            if time.perf_counter() > deadline:
                return
            accepted, declined = await send(session, url, body)
            ok, refused = ok + accepted, refused + declined

    connector = aiohttp.TCPConnector(limit=clients)
    async with aiohttp.ClientSession(connector=connector) as session:
        await asyncio.gather(*(client(session) for _ in range(clients)))
    return ok, refused


async def _push_one(session: Any, url: str, body: bytes) -> tuple[int, int]:
    return (1, 0) if await push(session, url, body) else (0, 1)


async def _push_many(session: Any, url: str, body: bytes) -> tuple[int, int]:
    async with session.post(
        url + "/v1/chain/push_transactions",
        data=body,
        headers={"Content-Type": "application/json"},
    ) as response:
        answers = await response.json()
    assert response.status == 200, answers
    accepted = sum(1 for a in answers if "error" not in a)
    return accepted, len(answers) - accepted


async def _push_all(url: str, bodies: list[bytes], clients: int, seconds: float) -> tuple[int, int]:
    return await _send_all(url, bodies, clients, seconds, _push_one)


async def _push_batches(
    url: str, bodies: list[bytes], clients: int, seconds: float
) -> tuple[int, int]:
    """``bodies`` (push_transactions requests) from ``clients`` concurrent clients until
    ``seconds`` have passed: the transactions accepted and refused."""
    return await _send_all(url, bodies, clients, seconds, _push_many)


async def _ask_all(url: str, path: str, clients: int, seconds: float) -> tuple[int, int]:
    """``path`` with an empty body from ``clients`` concurrent clients for ``seconds``: the
    answers with status 200 and the others. A read the node answers from its event loop alone
    (get_info): what the HTTP shell costs and allows without the chain thread."""
    import aiohttp

    ok = failed = 0
    deadline = time.perf_counter() + seconds

    async def client(session: aiohttp.ClientSession) -> None:
        nonlocal ok, failed
        while time.perf_counter() < deadline:
            async with session.post(url + path, data=b"{}") as response:
                await response.read()
            if response.status == 200:
                ok += 1
            else:
                failed += 1

    connector = aiohttp.TCPConnector(limit=clients)
    async with aiohttp.ClientSession(connector=connector) as session:
        await asyncio.gather(*(client(session) for _ in range(clients)))
    return ok, failed


def _push_body(t: SignedTransaction) -> dict[str, Any]:
    return {"packed_trx": t.packed.hex(), "signatures": [s.hex() for s in t.signatures]}


@dataclass(frozen=True, slots=True)
class RpcLoad:
    """What the RPC phases push: ``clients`` single pushes at once, then batches of
    ``batch_size`` from ``batch_clients`` clients at once, each phase for ``seconds``."""

    clients: int
    seconds: float
    batch_size: int = 100
    batch_clients: int = 4


@dataclass(frozen=True, slots=True)
class Phase:
    """One RPC phase's counts and CPU: the node's process alone, with its signature workers
    (``tree``), and this process's, where the clients run (``clients``)."""

    ok: int
    refused: int
    wall: float
    cpu: float
    tree: float
    clients: float


def _measured(proc: subprocess.Popen[bytes], phase: Callable[[], tuple[int, int]]) -> Phase:
    """Run ``phase`` and measure it."""
    cpu_before, tree_before = process_cpu(proc.pid), tree_cpu(proc.pid)
    clients_before = time.process_time()
    t0 = time.perf_counter()
    ok, refused = phase()
    wall = time.perf_counter() - t0
    return Phase(
        ok,
        refused,
        wall,
        process_cpu(proc.pid) - cpu_before,
        tree_cpu(proc.pid) - tree_before,
        time.process_time() - clients_before,
    )


def bench_rpc(
    genesis: Genesis, keys: dict[str, PrivateKey], work: Path, load: RpcLoad
) -> dict[str, float]:
    """One real node: first ``load.clients`` clients ask get_info (the HTTP shell's own
    rate, without the chain thread), then they push single transactions (push_transaction,
    mode sync), then a few clients push batches (push_transactions, mode sync) of fresh ones,
    each phase for ``load.seconds``."""
    data = work / "rpc-node"
    data.mkdir()
    (data / "genesis.json").write_text(json.dumps(genesis.to_json()))
    producer = keys["producera"]
    proc, url = start_producer(
        data, "producera", f"{public_key_to_text(producer.public_key)}=KEY:{producer.to_text()}"
    )
    try:
        info = post_json(url + "/v1/chain/get_info")
        chain_id = bytes.fromhex(info["chain_id"])
        ref = bytes.fromhex(info["head_block_id"])
        singles = signed_transfers(chain_id, ref, keys, int(load.seconds * 6000), 10**6)
        bodies = [json.dumps(_push_body(t) | {"mode": "sync"}).encode() for t in singles]
        batched = signed_transfers(chain_id, ref, keys, int(load.seconds * 20000), 2 * 10**6)
        size = load.batch_size
        batches = [
            json.dumps(
                {"transactions": [_push_body(t) for t in batched[i : i + size]], "mode": "sync"}
            ).encode()
            for i in range(0, len(batched), size)
        ]
        reads = _measured(
            proc,
            lambda: asyncio.run(_ask_all(url, "/v1/chain/get_info", load.clients, load.seconds)),
        )
        assert reads.refused == 0, f"{reads.refused} get_info calls failed"
        single = _measured(
            proc, lambda: asyncio.run(_push_all(url, bodies, load.clients, load.seconds))
        )
        batch = _measured(
            proc,
            lambda: asyncio.run(_push_batches(url, batches, load.batch_clients, load.seconds)),
        )
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    ok = max(single.ok, 1)
    return {
        "rpc_push_per_s": single.ok / single.wall,  # the key of earlier runs, kept for comparison
        "rpc_single_tx_per_s": single.ok / single.wall,
        "rpc_refused": single.refused,
        "rpc_node_cpu_s_per_1k_tx": 1000 * single.cpu / ok,
        "rpc_node_cores_used": cores_used(single.tree, single.wall),  # with its sig workers
        # The clients share the machine's cores with the node: what one push costs them.
        "rpc_client_cpu_s_per_1k_tx": 1000 * single.clients / ok,
        "rpc_batch_tx_per_s": batch.ok / batch.wall,
        "rpc_batch_refused": batch.refused,
        "rpc_batch_node_cpu_s_per_1k_tx": 1000 * batch.cpu / max(batch.ok, 1),
        "rpc_batch_node_cores_used": cores_used(batch.tree, batch.wall),
        "rpc_get_info_per_s": reads.ok / reads.wall,
        "rpc_get_info_node_cpu_s_per_1k": 1000 * reads.cpu / max(reads.ok, 1),
    }


def main() -> None:
    tune_gc()  # the chain runs here in-process: collect garbage as a node does
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--blocks", type=int, default=20)
    parser.add_argument("--txs-per-block", type=int, default=1000)
    parser.add_argument("--accounts", type=int, default=2000)
    # One fewer than the cores: the applying process itself needs a whole core.
    parser.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 2) - 1))
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--rpc-seconds", type=float, default=5.0)
    parser.add_argument("--batch-size", type=int, default=100)
    parser.add_argument("--batch-clients", type=int, default=4)
    parser.add_argument("--skip-rpc", action="store_true")
    args = parser.parse_args()

    machine = cores()
    print(machine)
    work = Path(tempfile.mkdtemp(prefix="bor-bench-"))
    try:
        r = measure_r()
        print(f"R (Ed25519 verify/s, 1 core, cryptography): {r:,.0f}")
        genesis, keys = bench_genesis(args.accounts)
        t0 = time.perf_counter()
        blocks = build_blocks(genesis, keys, args.blocks, args.txs_per_block, work)
        total = args.blocks * args.txs_per_block
        size = sum(len(b.encode()) for b in blocks)
        print(
            f"built {args.blocks} blocks x {args.txs_per_block} transfers "
            f"({size / 1e6:.1f} MB) in {time.perf_counter() - t0:.1f} s"
        )
        encoded = [b.encode() for b in blocks]
        wall1, cpu1, hash1, tree1 = apply_blocks(genesis, encoded, work / "apply-1", 0)
        tps1, used1 = total / wall1, cores_used(tree1, wall1)
        print(
            f"apply, 1 core:            {tps1:8,.0f} tx/s = {tps1 / r:.2f} R  "
            f"(cpu {cpu1:.1f} s, {used1:.2f} cores used)"
        )
        executor = engine.name()
        engine.select(False)  # the same blocks through the Python reference alone
        wall_py = apply_blocks(genesis, encoded, work / "apply-py", 0)[0]
        engine.select(executor == engine.NATIVE)
        tps_py = total / wall_py
        print(
            f"apply, 1 core, {executor:6}: {tps1:8,.0f} tx/s; python reference: {tps_py:8,.0f} "
            f"tx/s ({tps1 / tps_py:.2f}x)"
        )
        wallp, cpup, hashp, treep = apply_blocks(genesis, encoded, work / "apply-p", args.workers)
        tpsp, usedp = total / wallp, cores_used(treep, wallp)
        print(
            f"apply, {args.workers} sig workers:    {tpsp:8,.0f} tx/s = {tpsp / r:.2f} R  "
            f"(main-process cpu {cpup:.1f} s, {usedp:.2f} cores used with the workers)"
        )
        print(
            f"state commitment: {100 * hash1 / cpu1:.1f} % of the 1-core CPU, "
            f"{100 * hashp / cpup:.1f} % of the main process's with sig workers "
            f"({1e6 * hash1 / total:.1f} µs per transaction)"
        )
        r_after = measure_r()
        print(f"R again after the runs: {r_after:,.0f} (noise indicator)")
        figures: dict[str, Any] = {
            "R": round(r),
            "R_after": round(r_after),
            "txs": total,
            "tx_per_s": round(tps1),
            "ratio_R": round(tps1 / r, 3),
            "tx_per_s_parallel": round(tpsp),
            "ratio_R_parallel": round(tpsp / r, 3),
            "workers": args.workers,
            "cores_available": machine.available,
            "cores_used": used1,
            "cores_used_parallel": usedp,
            "state_hash_cpu_share": round(hash1 / cpu1, 4),
            "state_hash_cpu_share_parallel": round(hashp / cpup, 4),
            "executor": executor,
            "onecore_tx_per_s": round(tps1),
            "onecore_python_tx_per_s": round(tps_py),
        }
        if not args.skip_rpc:
            load = RpcLoad(args.clients, args.rpc_seconds, args.batch_size, args.batch_clients)
            rpc = bench_rpc(genesis, keys, work, load)
            print(
                f"get_info via RPC, {args.clients} clients (the HTTP shell alone): "
                f"{rpc['rpc_get_info_per_s']:,.0f} answers/s, "
                f"node cpu {rpc['rpc_get_info_node_cpu_s_per_1k']:.2f} s per 1k"
            )
            print(
                f"push_transaction via RPC, {args.clients} clients: "
                f"{rpc['rpc_single_tx_per_s']:,.0f} tx/s accepted, {rpc['rpc_refused']} refused, "
                f"node cpu {rpc['rpc_node_cpu_s_per_1k_tx']:.2f} s per 1k tx, "
                f"{rpc['rpc_node_cores_used']:.2f} cores used; "
                f"the clients' cpu {rpc['rpc_client_cpu_s_per_1k_tx']:.2f} s per 1k tx"
            )
            print(
                f"push_transactions via RPC, batches of {args.batch_size}, "
                f"{args.batch_clients} clients: {rpc['rpc_batch_tx_per_s']:,.0f} tx/s accepted "
                f"= {rpc['rpc_batch_tx_per_s'] / tps1:.2f} x one core, "
                f"{rpc['rpc_batch_refused']} refused, "
                f"node cpu {rpc['rpc_batch_node_cpu_s_per_1k_tx']:.2f} s per 1k tx, "
                f"{rpc['rpc_batch_node_cores_used']:.2f} cores used"
            )
            figures |= {k: round(v, 3) for k, v in rpc.items()}
        print(json.dumps(figures))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
