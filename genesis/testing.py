"""A dev network for tests: a dev genesis and every key of it, so a test can produce any
producer's block and sign any account's transaction."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from chain.controller import Chain
from chain.core.consensus.block import SignedBlock
from chain.core.consensus.qc import Vote
from chain.core.execution.actions import Action
from chain.core.execution.transaction import SignedTransaction, Transaction, tapos_of
from chain.core.primitives.crypto import PrivateKey
from chain.core.primitives.params import slot_of_ms
from chain.core.primitives.types import BlockId
from chain.storage.store import BlockStore
from chain.testing import now_ms
from genesis.devnet import make_dev_genesis
from genesis.model import Genesis


@dataclass
class DevNet:
    """A dev genesis and all its keys (``finality = dpos`` unless ``finality="votes"``).

    The genesis starts ten minutes ago: tests produce blocks in the 1,200 past slots (never in
    the future), and a transaction expiring ten minutes from now is valid both at admission
    (now) and in any of those blocks (expiration at most an hour after block time).
    """

    genesis: Genesis
    keys: dict[str, PrivateKey]

    @classmethod
    def create(cls, producers: int = 1, **params: int | str) -> DevNet:
        start = datetime.now(UTC) - timedelta(minutes=10)
        # Chain tests exercise the 2/3+1 producer rule unless they ask for finality by votes.
        params = {"finality": "dpos", **params}
        genesis, keys = make_dev_genesis(producers, start=start, params=params)
        return cls(genesis, {n: PrivateKey.from_text(k) for n, k in keys.items()})

    def open(self, path: Path | str) -> Chain:
        # Unsynced: a test's chain needs no power-cut durability, and a sync per block would
        # make tests of long chains slow.
        return Chain(BlockStore(str(path), sync=False), self.genesis.to_initial_state())

    def producer_key(self, chain: Chain, slot: int) -> PrivateKey:
        name, _ = chain.head.scheduled(slot, chain.params)
        return self.keys[name]

    def produce(self, chain: Chain, slot: int | None = None) -> SignedBlock:
        """Produce the next block at ``slot`` (default: the slot after the head's)."""
        slot = chain.head.slot + 1 if slot is None else slot
        assert slot <= slot_of_ms(now_ms()), "tests must not produce in the future"
        return chain.produce_block(slot, self.producer_key(chain, slot))

    def votes(self, chain: Chain, block_id: BlockId, *, strong: bool = True) -> list[Vote]:
        """A vote on ``block_id`` by every producer (on a votes chain, the finalizers)."""
        names = chain.head.active.names()
        return [Vote.sign(chain.chain_id, block_id, strong, self.keys[n]) for n in names]

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
