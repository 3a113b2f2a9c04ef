"""How long a producer's and a follower's heads stand still while accounts deploy the slowest
modules to compile that ``setcode`` admits (issue 39's attack, with the limits in force).

Starts a producer and a follower (real ``bor-node run`` processes on loopback), then deploys
the slowest admitted module of ``bench_compile`` (a fresh custom section each time, so every
deployment is a new code hash and nothing is cached): ``--in-a-row`` times one after the
other (each waits for its block), then ``--at-once`` at the same time from as many accounts.
Both heads are sampled every 50 ms over the RPC; the figure is the longest time either stood
still, while deploying and for a few seconds after.

    python scripts/bench_setcode_stall.py [--in-a-row 3] [--at-once 8] [--shape ifs_live]

The last line of output is a JSON object: the module's bytes and compile cost, and per phase
the longest stand-still of the producer's and the follower's head, in seconds.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from chain.core.execution.actions import SetCode
from chain.core.execution.transaction import SignedTransaction, Transaction, tapos_of
from chain.core.primitives.crypto import public_key_to_text
from chain.core.primitives.types import AccountName, BlockId
from chain.vm import structure
from genesis.model import Genesis
from scripts import bench_apply, bench_compile
from scripts.benchtools import free_port, post_json, start_node, stop_node

SAMPLE_S = 0.05
SETTLE_S = 4.0  # sampled after the last deployment, so a late stall is seen too


def salted(code: bytes, salt: int) -> bytes:
    """``code`` with a custom section appended: another code hash, the same structure."""
    name = b"salt"
    payload = bytes([len(name)]) + name + salt.to_bytes(8, "little")
    return code + b"\x00" + bytes([len(payload)]) + payload


def start_pair(
    work: Path, genesis: Genesis, key_text: str, extra: Sequence[str] = ()
) -> tuple[list[subprocess.Popen[bytes]], str, str]:
    """A producer (producera, signing with ``key_text``) and a follower dialing it, each in
    its own data dir under ``work`` with ``extra`` flags; their processes (stop them) and RPC
    URLs. If the second does not start, the first is stopped."""
    for name in ("producer", "follower"):
        (work / name).mkdir()
        (work / name / "genesis.json").write_text(json.dumps(genesis.to_json()))
    p2p = free_port()
    producer, producer_url = start_node(
        work / "producer",
        ["--producer-name", "producera", "--signature-provider", key_text,
         "--p2p-listen-endpoint", f"127.0.0.1:{p2p}", *extra],
    )  # fmt: skip
    try:
        follower, follower_url = start_node(
            work / "follower",
            ["--p2p-listen-endpoint", f"127.0.0.1:{free_port()}",
             "--p2p-peer-address", f"127.0.0.1:{p2p}", *extra],
        )  # fmt: skip
    except BaseException:
        stop_node(producer)
        raise
    return [producer, follower], producer_url, follower_url


class Heads:
    """Samples each node's head, each from its own thread (a node slow to answer must not
    delay the other's samples); ``longest_still`` is the longest time between two samples
    that saw different heads (or since the last change, at the end)."""

    def __init__(self, urls: list[str]) -> None:
        self.urls = urls
        self.samples: list[list[tuple[float, int]]] = [[] for _ in urls]
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._run, args=(i,), daemon=True) for i in range(len(urls))
        ]

    def _run(self, node: int) -> None:
        url = self.urls[node]
        while not self._stop.is_set():
            try:
                head = int(post_json(url + "/v1/chain/get_info", timeout=5)["head_block_num"])
            except OSError:
                continue
            self.samples[node].append((time.monotonic(), head))
            self._stop.wait(SAMPLE_S)

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join()

    def longest_still(self, node: int, since: float, until: float) -> float:
        longest, changed, last = 0.0, since, None
        for at, head in self.samples[node]:
            if at < since or at > until:
                continue
            if head != last:
                longest = max(longest, at - changed)
                changed, last = at, head
        return round(max(longest, until - changed), 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--in-a-row", type=int, default=3)
    parser.add_argument("--at-once", type=int, default=8)
    parser.add_argument("--shape", default="ifs_live", choices=sorted(bench_compile.SHAPES))
    args = parser.parse_args()
    if args.in_a_row < 0 or args.at_once < 0:
        parser.error("--in-a-row and --at-once must not be negative")
    deployers = max(args.at_once, 1)
    genesis, keys = bench_apply.bench_genesis(deployers)
    users = [n for n in keys if n.startswith("user")][:deployers]
    code = bench_compile.largest_admitted(args.shape, genesis.params.max_code_bytes)
    cost = structure.read_structure(code).compile_cost
    print(f"module: {args.shape}, {len(code)} bytes, compile cost {cost}")
    producer = keys["producera"]
    key_text = f"{public_key_to_text(producer.public_key)}=KEY:{producer.to_text()}"
    with tempfile.TemporaryDirectory(prefix="bor-setcode-") as tmp:
        procs: list[subprocess.Popen[bytes]] = []
        try:
            procs, producer_url, follower_url = start_pair(Path(tmp), genesis, key_text)
            heads = Heads([producer_url, follower_url])
            heads.start()
            time.sleep(2)
            salt = 0

            def deploy(user: str, mode: str) -> dict[str, object]:
                nonlocal salt
                salt += 1
                info = post_json(producer_url + "/v1/chain/get_info")
                ref_num, ref_prefix = tapos_of(BlockId(bytes.fromhex(info["head_block_id"])))
                tx = Transaction(
                    int(time.time()) + 300,
                    ref_num,
                    ref_prefix,
                    (SetCode(AccountName(user), salted(code, salt)),),
                )
                stx = SignedTransaction.sign(tx, genesis.chain_id, [keys[user]])
                body = {"packed_trx": stx.packed.hex(), "signatures": [stx.signatures[0].hex()]}
                answer = post_json(
                    producer_url + "/v1/chain/push_transaction", {**body, "mode": mode}, 60
                )
                return dict(answer)

            results = {}
            started = time.monotonic()
            for i in range(args.in_a_row):
                answer = deploy(users[i % len(users)], "commit")
                assert answer.get("status") == "included", answer
            time.sleep(SETTLE_S)
            row_end = time.monotonic()
            with ThreadPoolExecutor(max(args.at_once, 1)) as pool:
                answers = list(pool.map(lambda u: deploy(u, "commit"), users[: args.at_once]))
            assert all(a.get("status") == "included" for a in answers), answers
            time.sleep(SETTLE_S)
            once_end = time.monotonic()
            heads.stop()
            final = [post_json(u + "/v1/chain/get_info") for u in (producer_url, follower_url)]
            for phase, since, until in (
                ("in_a_row", started, row_end),
                ("at_once", row_end, once_end),
            ):
                results[phase] = {
                    "producer_still_s": heads.longest_still(0, since, until),
                    "follower_still_s": heads.longest_still(1, since, until),
                }
                print(phase, results[phase])
            print(
                "heads at the end:",
                [f["head_block_num"] for f in final],
            )
        finally:
            for proc in procs:
                stop_node(proc)
    print(
        json.dumps(
            {"shape": args.shape, "bytes": len(code), "cost": cost, **results},
        )
    )


if __name__ == "__main__":
    main()
