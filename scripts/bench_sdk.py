"""How much does a batch save? Transactions per second pushed through ``bor_client``'s
AsyncClient singly and in batches, against one producing node this script starts.

The same node and run: the transfers are signed first (by the SDK's builder, not timed),
then one half is pushed one per request by 50 concurrent tasks (``push_transaction``, mode
sync), the other half in batches of 100 (``push_transactions``, mode sync, a few batches in
flight). What is timed is the SDK and the node: encoding, HTTP, decoding, signature
recovery, admission.

    python scripts/bench_sdk.py [--transactions 4000] [--concurrency 50] [--batch 100]

The last line of output is a JSON object with ``single_tx_per_s``, ``batch_tx_per_s`` and
``batch_over_single`` (the target is at least 3).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bor_client import AsyncClient, RpcError, Signer
from bor_client.results import PushResult
from bor_client.transactions import transfer
from chain.core.execution.transaction import SignedTransaction
from chain.core.primitives.crypto import PrivateKey
from scripts.bench_rpc import start_node
from scripts.benchtools import cores, stop_node

# Batches in flight at once: enough to keep the node busy while one batch's answer travels.
BATCHES_IN_FLIGHT = 4


async def signed(
    client: AsyncClient, users: list[str], count: int, tag: str
) -> list[SignedTransaction]:
    out = []
    for i in range(count):
        sender, recipient = users[i % len(users)], users[(i * 7 + 1) % len(users)]
        if sender == recipient:
            recipient = users[(i + 1) % len(users)]
        out.append(await client.sign([transfer(sender, recipient, 1, f"{tag}{i}")]))
    return out


async def push_single(client: AsyncClient, txs: list[SignedTransaction], concurrency: int) -> float:
    """Accepted transactions per second, one per request, ``concurrency`` at a time."""
    queue = iter(txs)
    accepted = 0

    async def worker() -> None:
        nonlocal accepted
        for tx in queue:
            try:
                result = await client.push_transaction(tx, "sync")
            except RpcError:
                continue
            accepted += result.status == "accepted"

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return accepted / (time.perf_counter() - started)


async def push_batches(client: AsyncClient, txs: list[SignedTransaction], size: int) -> float:
    """Accepted transactions per second, ``size`` per push_transactions request."""
    chunks = iter([txs[i : i + size] for i in range(0, len(txs), size)])
    accepted = 0

    async def worker() -> None:
        nonlocal accepted
        for chunk in chunks:
            results = await client.push_transactions(chunk, "sync")
            accepted += sum(isinstance(r, PushResult) and r.status == "accepted" for r in results)

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(BATCHES_IN_FLIGHT)))
    return accepted / (time.perf_counter() - started)


async def bench(
    url: str, keys: dict[str, PrivateKey], users: list[str], args: argparse.Namespace
) -> dict[str, float]:
    signer = Signer(accounts={u: keys[u] for u in users})  # no get_account per sender
    async with AsyncClient(url, signer, max_connections=args.concurrency) as client:
        count = args.transactions
        singles = await signed(client, users, count, "s")
        batched = await signed(client, users, count, "b")
        single = await push_single(client, singles, args.concurrency)
        await asyncio.sleep(1.0)  # the mempool drains into blocks between the two
        batch = await push_batches(client, batched, args.batch)
    return {"single": single, "batch": batch}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--transactions", type=int, default=4000, help="pushed each way")
    parser.add_argument("--concurrency", type=int, default=50, help="single pushes in flight")
    parser.add_argument("--batch", type=int, default=100, help="transactions per batch")
    parser.add_argument("--accounts", type=int, default=2000)
    args = parser.parse_args()
    machine = cores()
    print(machine, flush=True)
    work = Path(tempfile.mkdtemp(prefix="bor-bench-sdk-"))
    proc, url, users, keys = start_node(work, args.accounts)
    try:
        rates = asyncio.run(bench(url, keys, users, args))
        print(f"singly ({args.concurrency} concurrent): {rates['single']:8,.0f} tx/s")
        print(f"batches of {args.batch}:{'':14s}{rates['batch']:8,.0f} tx/s")
        figures = {
            "single_tx_per_s": round(rates["single"]),
            "batch_tx_per_s": round(rates["batch"]),
            "batch_over_single": round(rates["batch"] / rates["single"], 2),
            "transactions": args.transactions,
            "concurrency": args.concurrency,
            "batch": args.batch,
            "cores_available": machine.available,
        }
        print(json.dumps(figures))
    finally:
        stop_node(proc)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
