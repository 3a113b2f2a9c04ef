"""The node's finalizers: votes on new heads, the safety file on disk before any vote."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from chain.controller import Chain
from chain.core.consensus.qc import Vote
from chain.core.primitives.params import slot_start_ms
from chain.core.primitives.types import PublicKey
from chain.events import NO_EVENTS, ChainUpdate
from chain.view import ChainView
from genesis.testing import DevNet
from node.errors import NodeError
from node.voting import SAFETY_FILE, FinalizerService, load_safety
from tests.support.wait import until


def service(
    net: DevNet,
    chain: Chain,
    directory: Path,
    sent: list[Vote],
    may_vote: bool = True,
    clock: Callable[[], float] = time.time,
) -> FinalizerService:
    keys = {PublicKey(k.public_key): k for n, k in net.keys.items() if n.startswith("producer")}
    return FinalizerService(keys, directory, chain.view, sent.append, lambda: may_vote, clock)


def long_after(chain: Chain) -> Callable[[], float]:
    """A clock that reads a minute after the head's slot began: the head is not recent."""
    return lambda: slot_start_ms(chain.head.slot) / 1000 + 60


class Looks:
    """A chain's ``view`` for the service that counts its looks: the service looks once per
    pass of its loop, so a second look means the first pass is over (votes sent or not)."""

    def __init__(self, view: Callable[[], ChainView]) -> None:
        self.view = view
        self.count = 0

    def __call__(self) -> ChainView:
        self.count += 1
        return self.view()


async def step(
    svc: FinalizerService, chain: Chain, votes: list[Vote] | None = None, expect: int = 0
) -> None:
    """Tell the service the head moved and let its task act on it: until ``votes`` holds
    ``expect`` votes (a decision, fsyncs, the votes handed over; 10 s at most on a busy
    disk), or, when none is expected, until it is done with the head and looks again."""
    looks = Looks(svc._view)
    svc._view = looks
    task = asyncio.create_task(svc.run())
    svc.chain_updated(ChainUpdate(chain.view(), NO_EVENTS, chain.lib))
    if expect:
        await until(lambda: votes is not None and len(votes) >= expect, "the votes", 10)
    else:
        await until(lambda: looks.count >= 2, "the service done with the head", 10)
    task.cancel()


def test_every_finalizer_key_votes_on_a_new_head_after_its_record_is_on_disk(
    tmp_path: Path,
) -> None:
    """Each policy key of the node votes strong on the new head, and when a vote is handed
    over, the safety file already records it as the key's last vote."""
    net = DevNet.create(4, blocks_per_turn=1, finality="votes")
    chain = net.open(tmp_path / "chain")
    sent: list[Vote] = []
    directory = tmp_path / "finalizer"

    def check_then_keep(vote: Vote) -> None:
        record = load_safety(directory / SAFETY_FILE)[vote.key]
        assert record.last_vote is not None and record.last_vote.id == vote.block_id
        sent.append(vote)

    keys = {PublicKey(k.public_key): k for n, k in net.keys.items() if n.startswith("producer")}
    svc = FinalizerService(keys, directory, chain.view, check_then_keep)
    block = net.produce(chain)
    asyncio.run(step(svc, chain, sent, len(keys)))
    assert {v.key for v in sent} == set(keys)
    assert all(v.block_id == block.id and v.strong for v in sent)
    assert all(v.signer(chain.chain_id) == v.key for v in sent)


def test_a_restarted_finalizer_does_not_vote_again_on_what_it_voted_on(tmp_path: Path) -> None:
    """Stopped after voting and started again on the same head (as after kill -9), the
    finalizers read their records and cast no second vote; on the next block they vote."""
    net = DevNet.create(4, blocks_per_turn=1, finality="votes")
    chain = net.open(tmp_path / "chain")
    directory = tmp_path / "finalizer"
    first: list[Vote] = []
    net.produce(chain)
    asyncio.run(step(service(net, chain, directory, first), chain, first, 4))
    assert len(first) == 4
    again: list[Vote] = []
    asyncio.run(step(service(net, chain, directory, again), chain))
    assert again == []
    block = net.produce(chain)
    asyncio.run(step(service(net, chain, directory, again), chain, again, 4))
    assert {v.block_id for v in again} == {block.id}


def test_no_vote_while_catching_up(tmp_path: Path) -> None:
    """While the node is not in sync and its head is not recent, its finalizers keep quiet."""
    net = DevNet.create(4, blocks_per_turn=1, finality="votes")
    chain = net.open(tmp_path / "chain")
    sent: list[Vote] = []
    net.produce(chain)
    svc = service(net, chain, tmp_path / "f", sent, may_vote=False, clock=long_after(chain))
    asyncio.run(step(svc, chain))
    assert sent == []


def test_a_recent_head_gets_its_vote_whatever_peers_claim(tmp_path: Path) -> None:
    """A head from the current slot is voted on even while sync says we are behind (a peer
    claiming blocks it never sends must not silence our finalizers)."""
    net = DevNet.create(4, blocks_per_turn=1, finality="votes")
    chain = net.open(tmp_path / "chain")
    sent: list[Vote] = []
    block = net.produce(chain)
    in_its_slot = lambda: slot_start_ms(chain.head.slot) / 1000 + 0.1  # noqa: E731
    svc = service(net, chain, tmp_path / "f", sent, may_vote=False, clock=in_its_slot)
    asyncio.run(step(svc, chain, sent, 4))
    assert {v.block_id for v in sent} == {block.id}


def test_a_head_skipped_while_out_of_sync_gets_its_vote_once_back_in_sync(
    tmp_path: Path,
) -> None:
    """A head that came while the node was not in sync is voted on when the node is in sync
    again, though no new head comes (a paused producer makes none until it has a QC)."""
    net = DevNet.create(4, blocks_per_turn=1, finality="votes")
    chain = net.open(tmp_path / "chain")
    sent: list[Vote] = []
    block = net.produce(chain)
    in_sync = [False]
    keys = {PublicKey(k.public_key): k for n, k in net.keys.items() if n.startswith("producer")}
    looks = Looks(chain.view)
    svc = FinalizerService(
        keys, tmp_path / "f", looks, sent.append, lambda: in_sync[0], long_after(chain)
    )

    async def main() -> None:
        task = asyncio.create_task(svc.run())
        svc.chain_updated(ChainUpdate(chain.view(), NO_EVENTS, chain.lib))
        await until(lambda: looks.count >= 3, "three looks at the head", 10)
        assert sent == [], "no vote while out of sync"
        in_sync[0] = True  # and no new update: the head stays where it was
        await until(lambda: len(sent) >= 4, "the four votes", 10)
        task.cancel()

    asyncio.run(main())
    assert {v.block_id for v in sent} == {block.id} and len(sent) == 4


def test_a_damaged_safety_file_stops_the_node(tmp_path: Path) -> None:
    """A finalizer never votes from a record it cannot trust: the node refuses to start."""
    net = DevNet.create(4, blocks_per_turn=1, finality="votes")
    chain = net.open(tmp_path / "chain")
    directory = tmp_path / "finalizer"
    net.produce(chain)
    votes: list[Vote] = []
    asyncio.run(step(service(net, chain, directory, votes), chain, votes, 4))
    path = directory / SAFETY_FILE
    data = bytearray(path.read_bytes())
    data[-3] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(NodeError, match="damaged"):
        service(net, chain, directory, [])
