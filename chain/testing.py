"""Helpers for tests of the chain and of what sits on it: a dict-backed ``KVReader`` and a
dev network whose keys are all at hand, so a test can produce any producer's block.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from chain.actions import Action
from chain.block import SignedBlock
from chain.controller import Chain
from chain.crypto import PrivateKey
from chain.params import slot_of_ms
from chain.store import BlockStore
from chain.transaction import SignedTransaction, Transaction, tapos_of
from genesis.devnet import make_dev_genesis
from genesis.model import Genesis


class MemoryKV:
    """A ``KVReader`` over a dict, for unit tests of the state transition."""

    def __init__(self, data: dict[bytes, bytes] | None = None) -> None:
        self.data = dict(data or {})

    def get(self, key: bytes) -> bytes | None:
        return self.data.get(key)

    def iterate(self, start: bytes, stop: bytes) -> Iterator[tuple[bytes, bytes]]:
        keys = sorted(self.data)
        for key in keys[bisect.bisect_left(keys, start) : bisect.bisect_left(keys, stop)]:
            yield key, self.data[key]


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class DevNet:
    """A dev genesis and all its keys.

    The genesis starts ten minutes ago: tests produce blocks in the 1,200 past slots (never in
    the future), and a transaction expiring ten minutes from now is valid both at admission
    (now) and in any of those blocks (expiration at most an hour after block time).
    """

    genesis: Genesis
    keys: dict[str, PrivateKey]

    @classmethod
    def create(cls, producers: int = 1, **params: int) -> DevNet:
        start = datetime.now(UTC) - timedelta(minutes=10)
        genesis, keys = make_dev_genesis(producers, start=start, params=params)
        return cls(genesis, {n: PrivateKey.from_text(k) for n, k in keys.items()})

    def open(self, path: Path | str) -> Chain:
        return Chain(BlockStore(str(path)), self.genesis.to_initial_state())

    def producer_key(self, chain: Chain, slot: int) -> PrivateKey:
        name, _ = chain.head.scheduled(slot, chain.params)
        return self.keys[name]

    def produce(self, chain: Chain, slot: int | None = None) -> SignedBlock:
        """Produce the next block at ``slot`` (default: the slot after the head's)."""
        slot = chain.head.slot + 1 if slot is None else slot
        assert slot <= slot_of_ms(now_ms()), "tests must not produce in the future"
        return chain.produce_block(slot, self.producer_key(chain, slot))

    def tx(
        self,
        chain: Chain,
        *actions: Action,
        signers: list[str] | None = None,
        expiration: int | None = None,
    ) -> SignedTransaction:
        """A transaction signed by the actors' dev keys (or by ``signers``)."""
        names = (
            signers
            if signers is not None
            else list(dict.fromkeys(a for action in actions for a in action.actors()))
        )
        ref_num, ref_prefix = tapos_of(chain.head.id)
        if expiration is None:
            expiration = int(time.time()) + 600
        tx = Transaction(expiration, ref_num, ref_prefix, tuple(actions))
        return SignedTransaction.sign(tx, chain.chain_id, [self.keys[n] for n in names])


def state_dump(chain: Chain) -> dict[bytes, bytes]:
    """Every state key and value: two chains in the same state dump equal."""
    return dict(chain.store.iterate(b"s", b"t"))
