"""Do many large pending transactions stay within the mempool's byte bound? Accounts push
hundreds of ``setcode`` transactions as large as the chain admits (about 261 KB each) at once,
and a producer's and a follower's memory and heads are watched (issue 39's attack).

Starts a producer and a follower (real ``bor-node run`` processes on loopback), then pushes
--txs ``setcode`` transactions (mode async, all at once) from --accounts accounts: a small
valid contract padded with a data segment to ``max_code_bytes`` (a data segment costs no
compile time, so what is measured is the mempool, not the compiler), each with a fresh custom
section so that every one is a new transaction. Both heads are sampled every 50 ms over the
RPC until the producer's mempool is empty and --settle seconds more; the figures are each
node's peak RSS (``VmHWM``) and the longest time either head stood still.

    python scripts/bench_mempool_bytes.py [--txs 600] [--accounts 3] [--max-mempool-bytes N]

The nodes run whatever code ``bor-node`` imports: set PYTHONPATH to a worktree to measure
another revision. The last line of output is a JSON object: the pushes' answers by status,
each node's RSS before and at its peak (MiB), the longest stand-still of each head (s), and
the mempool byte bound in force (null where the nodes have none).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any, NamedTuple

import aiohttp
import wasmtime

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from chain.core.execution.actions import SetCode
from chain.core.execution.transaction import SignedTransaction, Transaction, tapos_of
from chain.core.primitives.crypto import PrivateKey, public_key_to_text
from chain.core.primitives.types import AccountName, BlockId
from genesis.model import Genesis
from node.config.model import OPTIONS
from scripts import bench_apply
from scripts.bench_setcode_stall import Heads, salted, start_pair
from scripts.benchtools import post_json, stop_node

MIB = 1 << 20
SALT_BYTES = 15  # what ``salted`` appends: a custom section of an 8-byte salt
DRAIN_TIMEOUT_S = 300.0
CONNECTIONS = 128
QUIET_S = 3.0  # both mempools empty this long: everything pushed was included or refused


def padded_module(size: int) -> bytes:
    """A module that ``setcode`` admits, of ``size`` bytes once salted: an ``apply`` that does
    nothing and one data segment of the rest."""

    def build(data: int) -> bytes:
        pages = data // 65536 + 1
        return bytes(
            wasmtime.wat2wasm(
                f'(module (memory (export "memory") {pages})'
                ' (func (export "apply") (param i64 i64 i64) nop)'
                f' (data (i32.const 0) "{"a" * data}"))'
            )
        )

    data = size - SALT_BYTES - len(build(0)) - 4  # the segment's length grows its prefix
    code = build(data)
    while len(code) + SALT_BYTES > size:
        data -= len(code) + SALT_BYTES - size
        code = build(data)
    return code


def vm_kib(pid: int, field: str) -> int:
    """``field`` (``VmRSS``, ``VmHWM``) of ``pid``'s /proc status, in KiB."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} for {pid}")


def counter(url: str, name: str) -> int:
    """A counter of the node's /metrics (0 where it has none yet)."""
    with urllib.request.urlopen(url + "/metrics", timeout=10) as response:
        text = response.read().decode()
    found = re.search(rf"^{name} (\S+)$", text, re.M)
    return int(float(found.group(1))) if found else 0


def refused(url: str) -> dict[str, int]:
    """The node's refusals of transactions, by reason."""
    with urllib.request.urlopen(url + "/metrics", timeout=10) as response:
        text = response.read().decode()
    found = re.findall(r'^bor_transactions_rejected_total\{reason="([^"]+)"\} (\S+)$', text, re.M)
    return {reason: int(float(count)) for reason, count in found}


def mempool_bound(args: argparse.Namespace) -> int | None:
    """The byte bound the nodes run with: the one given, else the option's default (None
    where this revision has no such option)."""
    if args.max_mempool_bytes is not None:
        return int(args.max_mempool_bytes)
    declared = [o.default for o in OPTIONS if o.name == "max-mempool-bytes"]
    return declared[0] if declared and isinstance(declared[0], int) else None


async def push_all(url: str, bodies: list[bytes]) -> Counter[str]:
    """Push every body at once; how many answers of each status (``200``,
    ``429 mempool_full``, ...)."""
    answers: Counter[str] = Counter()
    # Below http-max-in-flight-requests (256), so that every push reaches admission rather
    # than being turned away as busy: the mempool is what is measured.
    limit = aiohttp.TCPConnector(limit=CONNECTIONS)
    async with aiohttp.ClientSession(connector=limit) as session:

        async def one(body: bytes) -> None:
            try:
                async with session.post(
                    url + "/v1/chain/push_transaction",
                    data=body,
                    headers={"Content-Type": "application/json"},
                    timeout=aiohttp.ClientTimeout(total=120),
                ) as response:
                    answer: dict[str, Any] = await response.json(content_type=None)
                    name = answer.get("error", {}).get("name", "") if response.status != 200 else ""
                    answers[f"{response.status} {name}".strip()] += 1
            except (aiohttp.ClientError, TimeoutError) as err:
                answers[type(err).__name__] += 1

        await asyncio.gather(*(one(b) for b in bodies))
    return answers


class Flood(NamedTuple):
    """What the flood did: the pushes' answers by status, each node's RSS before and at its
    peak (MiB), each head's longest stand-still (s), the transactions the producer included
    and refused (by reason), and when the pushes began and the watch ended (monotonic s)."""

    answers: Counter[str]
    before: list[float]
    peaks: list[float]
    still: list[float]
    included: int
    refusals: dict[str, int]
    started: float
    ended: float


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--txs", type=int, default=600)
    parser.add_argument("--accounts", type=int, default=3)
    parser.add_argument("--settle", type=float, default=4.0)
    parser.add_argument(
        "--max-mempool-bytes", type=int, default=None, help="passed to both nodes if given"
    )
    return parser.parse_args()


def sign_setcodes(
    info: dict[str, Any],
    genesis: Genesis,
    keys: dict[str, PrivateKey],
    users: list[str],
    code: bytes,
    count: int,
) -> tuple[list[bytes], int]:
    """``count`` setcode transactions of ``code``, each salted apart, from ``users`` in turn,
    as push_transaction bodies; and the bytes of one transaction."""
    ref_num, ref_prefix = tapos_of(BlockId(bytes.fromhex(info["head_block_id"])))
    bodies = []
    for i in range(count):
        user = users[i % len(users)]
        action = SetCode(AccountName(user), salted(code, i))
        tx = Transaction(int(time.time()) + 600, ref_num, ref_prefix, (action,))
        stx = SignedTransaction.sign(tx, genesis.chain_id, [keys[user]])
        body = {
            "packed_trx": stx.packed.hex(),
            "signatures": [stx.signatures[0].hex()],
            "mode": "async",
        }
        bodies.append(json.dumps(body).encode())
    return bodies, stx.size


def wait_until_drained(urls: list[str]) -> None:
    """Until both mempools have stayed empty QUIET_S, or DRAIN_TIMEOUT_S pass."""
    deadline = time.monotonic() + DRAIN_TIMEOUT_S
    empty_since = None
    while time.monotonic() < deadline:
        sizes = [post_json(u + "/v1/chain/get_info")["mempool_size"] for u in urls]
        if any(sizes):
            empty_since = None
        elif empty_since is None:
            empty_since = time.monotonic()
        elif time.monotonic() - empty_since >= QUIET_S:
            break
        time.sleep(0.25)


def flood(
    procs: list[subprocess.Popen[bytes]], urls: list[str], bodies: list[bytes], settle: float
) -> Flood:
    """Push every body to the producer (``urls[0]``) at once and watch both nodes' memory
    and heads until the mempools drain and ``settle`` seconds more."""
    producer_url = urls[0]
    before = [round(vm_kib(p.pid, "VmRSS") / 1024, 1) for p in procs]
    heads = Heads(urls)
    heads.start()
    started = time.monotonic()
    answers = asyncio.run(push_all(producer_url, bodies))
    print("answers:", dict(answers))
    wait_until_drained(urls)
    time.sleep(settle)
    ended = time.monotonic()
    heads.stop()
    peaks = [round(vm_kib(p.pid, "VmHWM") / 1024, 1) for p in procs]
    still = [heads.longest_still(i, started, ended) for i in (0, 1)]
    final = [post_json(u + "/v1/chain/get_info") for u in urls]
    print("heads at the end:", [f["head_block_num"] for f in final])
    included = counter(producer_url, "bor_block_transactions_total")
    refusals = refused(producer_url)
    return Flood(answers, before, peaks, still, included, refusals, started, ended)


def report(args: argparse.Namespace, tx_bytes: int, watched: Flood) -> None:
    """Print the JSON object that is the last line of output."""
    bound = mempool_bound(args)
    result = {
        "txs": args.txs,
        "tx_bytes": tx_bytes,
        "answers": dict(watched.answers),
        "included": watched.included,
        "refused": watched.refusals,
        "mempool_bytes_bound_mib": None if bound is None else round(bound / MIB, 1),
        "producer_rss_before_mib": watched.before[0],
        "follower_rss_before_mib": watched.before[1],
        "producer_rss_peak_mib": watched.peaks[0],
        "follower_rss_peak_mib": watched.peaks[1],
        "producer_still_s": watched.still[0],
        "follower_still_s": watched.still[1],
        "drain_s": round(watched.ended - watched.started - args.settle - QUIET_S, 1),
    }
    print(json.dumps(result))


def main() -> None:
    args = parse_args()
    genesis, keys = bench_apply.bench_genesis(args.accounts)
    users = [n for n in keys if n.startswith("user")][: args.accounts]
    code = padded_module(genesis.params.max_code_bytes)
    producer: PrivateKey = keys["producera"]
    key_text = f"{public_key_to_text(producer.public_key)}=KEY:{producer.to_text()}"
    extra = (
        []
        if args.max_mempool_bytes is None
        else ["--max-mempool-bytes", str(args.max_mempool_bytes)]
    )
    with tempfile.TemporaryDirectory(prefix="bor-mempool-") as tmp:
        procs: list[subprocess.Popen[bytes]] = []
        try:
            procs, producer_url, follower_url = start_pair(Path(tmp), genesis, key_text, extra)
            time.sleep(2)
            info = post_json(producer_url + "/v1/chain/get_info")
            bodies, tx_bytes = sign_setcodes(info, genesis, keys, users, code, args.txs)
            print(f"{args.txs} setcode transactions of {tx_bytes} bytes from {len(users)} accounts")
            watched = flood(procs, [producer_url, follower_url], bodies, args.settle)
        finally:
            for proc in procs:
                stop_node(proc)
    report(args, tx_bytes, watched)


if __name__ == "__main__":
    main()
