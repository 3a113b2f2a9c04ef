"""Build a realistic chain history: a data dir and its export file.

The history starts from a dev genesis set far enough in the past that every block has its
own past slot. Blocks carry transfers between many accounts, and along the way governance
creates accounts, candidates register and are approved, users stake and vote, and the
elections replace the genesis producers: the schedule changes more than once. The chain
finalizes by votes (the default), every producer voting on every block.

    python scripts/make_history.py OUT_DIR --txs 200000 [--txs-per-block 1000]

OUT_DIR receives genesis.json, keys.json, blocks/ (a node data dir's block store) and
history.log (+ .index), the export of the irreversible blocks. Size: about 110 bytes of
block per transfer, so --txs 10000000 gives a history of over a gigabyte.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from chain.controller import Chain
from chain.core.consensus.finality import finalizer_policy
from chain.core.consensus.qc import Vote
from chain.core.execution.actions import (
    Action,
    ApproveProducer,
    NewAccount,
    RegProducer,
    Stake,
    Transfer,
    VoteProducer,
)
from chain.core.execution.transaction import SignedTransaction, Transaction, tapos_of
from chain.core.primitives.crypto import PrivateKey
from chain.core.primitives.params import slot_start_ms, slot_time_s
from chain.core.primitives.types import AccountName
from chain.mempool import Mempool
from chain.storage.blocklog import BlockLogWriter
from chain.storage.store import BlockStore
from genesis.devnet import DEV_GOVERNOR, DEV_USERS, make_dev_genesis

LETTERS = "abcdefghijklmnopqrstuvwxyz"
CANDIDATES = 4


def _name(prefix: str, i: int) -> AccountName:
    """Three letters for the first 17,576 names, more beyond (``useraaa``, ``userbaaab``)."""
    out = ""
    for _ in range(3):
        out += LETTERS[i % 26]
        i //= 26
    while i:
        out += LETTERS[i % 26]
        i //= 26
    return AccountName(prefix + out)


class HistoryBuilder:
    def __init__(
        self, out: Path, txs: int, per_block: int, producers: int, accounts: int, memo: int = 0
    ) -> None:
        self.out = out
        self.memo = memo  # pad each transfer's memo to this many characters (large blocks)
        self.per_block = per_block
        self.blocks = max(1, math.ceil(txs / per_block))
        self.total = txs
        self.accounts = accounts
        # Every block needs its own past slot, with room for governance blocks at the start.
        seconds = (self.blocks + 200) * 0.5 + 60
        start = datetime.now(UTC) - timedelta(seconds=seconds)
        genesis, keys = make_dev_genesis(
            producers, start=start, params={"election_interval_blocks": 60, "max_block_txs": 5000}
        )
        self.genesis = genesis
        self.keys = {n: PrivateKey.from_text(k) for n, k in keys.items()}
        out.mkdir(parents=True, exist_ok=True)
        (out / "genesis.json").write_text(json.dumps(genesis.to_json(), indent=2) + "\n")
        self.chain = Chain(
            # A history file is made in one go; syncing each block would only slow it.
            BlockStore(str(out / "blocks"), sync=False),
            genesis.to_initial_state(),
            mempool=Mempool(max(per_block, 1000) * 4, max(per_block, 1000) * 4),
        )
        self.users: list[AccountName] = [AccountName(u) for u in DEV_USERS]
        self.made = 0

    def _tx(self, slot: int, *actions: Action) -> SignedTransaction:
        ref_num, ref_prefix = tapos_of(self.chain.head.id)
        tx = Transaction(slot_time_s(slot) + 600, ref_num, ref_prefix, actions)
        signers = list(dict.fromkeys(a for action in actions for a in action.actors()))
        return SignedTransaction.sign(tx, self.chain.chain_id, [self.keys[s] for s in signers])

    def _produce(self, slot: int, txs: list[SignedTransaction]) -> None:
        errors = [e for e in self.chain.admit_transactions(txs, slot_start_ms(slot)) if e]
        if errors:  # the history is scripted: a refusal is a bug in this script
            raise RuntimeError(f"block at slot {slot}: {len(errors)} refused, e.g. {errors[0]}")
        name, _ = self.chain.head.scheduled(slot, self.chain.params)
        block = self.chain.produce_block(slot, self.keys[name])
        # Every finalizer votes on every block (a votes chain's blocks then carry a QC on
        # their parent, and syncing the history verifies them as a live chain's).
        head = self.chain.head
        if head.core is not None:
            for f in finalizer_policy(self.chain.params, head.active).finalizers:
                vote = Vote.sign(self.chain.chain_id, block.id, True, self.keys[f.name])
                self.chain.add_vote(vote, slot_start_ms(slot))

    def build(self) -> None:
        chain = self.chain
        slot = chain.head.slot + 1
        gov = AccountName(DEV_GOVERNOR)
        # Governance: create accounts (users and producer candidates), in blocks of 500.
        fresh = [_name("user", i) for i in range(self.accounts)]
        cands = [_name("cand", i) for i in range(CANDIDATES)]
        for name in fresh + cands:
            self.keys[name] = PrivateKey(_seed(name))
        for i in range(0, len(fresh) + len(cands), 500):
            batch = (fresh + cands)[i : i + 500]
            txs = [self._tx(slot, NewAccount(gov, n, self.keys[n].public_key)) for n in batch]
            self._produce(slot, txs)
            slot += 1
        # Fund everyone, register and approve candidates, stake and vote them in.
        # 10^6 each, or what half the three dev users' balances allow among many accounts.
        welcome = min(10**6, 15 * 10**9 // len(fresh + cands))
        funding = [
            self._tx(slot, Transfer(self.users[i % 3], n, welcome, "welcome"))
            for i, n in enumerate(fresh + cands)
        ]
        for i in range(0, len(funding), 1000):
            self._produce(slot, funding[i : i + 1000])
            slot += 1
        self.users += fresh
        regs = [self._tx(slot, RegProducer(c, self.keys[c].public_key, "")) for c in cands]
        self._produce(slot, regs)
        slot += 1
        self._produce(slot, [self._tx(slot, ApproveProducer(gov, c)) for c in cands])
        slot += 1
        votes = []
        for i, user in enumerate(self.users[:3]):
            chosen = tuple(sorted(cands[i % 2 : i % 2 + 3]))
            votes.append(self._tx(slot, Stake(user, 10**9 * (i + 1)), VoteProducer(user, chosen)))
        self._produce(slot, votes)
        slot += 1
        # The bulk: transfers, with a vote change now and then to move the schedule again.
        started = time.perf_counter()
        n = 0
        block = 0
        while self.made < self.total:
            count = min(self.per_block, self.total - self.made)
            txs = []
            for _ in range(count):
                sender = self.users[n % len(self.users)]
                recipient = self.users[(n * 7 + 3) % len(self.users)]
                if recipient == sender:
                    recipient = self.users[(n + 1) % len(self.users)]
                memo = str(n).ljust(self.memo, ".")
                txs.append(self._tx(slot, Transfer(sender, recipient, 1 + n % 1000, memo)))
                n += 1
            if block % 150 == 75:
                voter = self.users[block % 3]
                chosen = tuple(sorted(cands[(block // 150) % 2 : (block // 150) % 2 + 3]))
                txs[-1] = self._tx(slot, VoteProducer(voter, chosen))
            self._produce(slot, txs)
            self.made += count
            slot += 1
            block += 1
            if block % 20 == 0:
                rate = self.made / (time.perf_counter() - started)
                print(
                    f"\r{self.made}/{self.total} transactions ({rate:,.0f}/s)",
                    end="",
                    file=sys.stderr,
                )
        # Empty blocks until the last transfer block is irreversible (plus a reversible tail).
        target = chain.head.num
        while chain.lib < target:
            self._produce(slot, [])
            slot += 1
        print(file=sys.stderr)

    def export(self) -> Path:
        path = self.out / "history.log"
        writer = BlockLogWriter(path, self.chain.chain_id, 1)
        store = self.chain.store
        for num in range(1, self.chain.lib + 1):
            block_id = store.block_id_at(num)
            assert block_id is not None
            raw = store.block_bytes(block_id)
            assert raw is not None
            writer.append(raw)
        writer.close()
        return path

    def close(self) -> None:
        (self.out / "keys.json").write_text(
            json.dumps({n: k.to_text() for n, k in self.keys.items()}) + "\n"
        )
        self.chain.store.close()


def _seed(name: str) -> bytes:
    from chain.core.primitives.crypto import sha256

    return sha256(b"bor-history-key:" + name.encode())


def make_history(
    out: Path,
    txs: int,
    per_block: int = 1000,
    producers: int = 3,
    accounts: int = 1000,
    memo: int = 0,
) -> dict[str, object]:
    """``memo``: each transfer's memo padded to this many characters (at most 256)."""
    builder = HistoryBuilder(out, txs, per_block, producers, accounts, memo)
    builder.build()
    log = builder.export()
    chain = builder.chain
    summary = {
        "head": chain.head.num,
        "lib": chain.lib,
        "schedule_version": chain.head.active.version,
        "transactions": builder.made,
        "export": str(log),
        "export_bytes": log.stat().st_size,
        "chain_id": chain.chain_id.hex(),
    }
    builder.close()
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--txs", type=int, default=20_000, help="transfers in the history")
    parser.add_argument("--txs-per-block", type=int, default=1000)
    parser.add_argument("--producers", type=int, default=3)
    parser.add_argument("--accounts", type=int, default=1000)
    args = parser.parse_args()
    if (args.out / "blocks").exists():
        sys.exit(f"make_history: {args.out} already holds a history")
    started = time.perf_counter()
    summary = make_history(args.out, args.txs, args.txs_per_block, args.producers, args.accounts)
    summary["seconds"] = round(time.perf_counter() - started, 1)
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
