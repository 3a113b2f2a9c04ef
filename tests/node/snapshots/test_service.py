"""Snapshot files on a node: a download names its snapshot's block as soon as it holds the
head and refuses, at the end too, a snapshot of another block than the trusted one; one cut
short is started over; the served snapshots' chunk hashes are made anew for a rewritten file
and a pruned file is no longer served; a node restarts only from the trusted block's
snapshot."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import shutil
from pathlib import Path

import pytest
from blake3 import blake3

from chain.core.execution.actions import Transfer
from chain.core.primitives.errors import SnapshotError
from chain.core.primitives.types import AccountName, BlockId
from chain.storage.snapshot import SnapshotHead
from chain.testing import now_ms
from genesis.testing import DevNet
from node.config.file import load_config
from node.config.model import NodeConfig
from node.data_dir import STATE_SYNC_DIR, restart_from_snapshot
from node.errors import NodeError
from node.snapshots.service import FileDownload, SnapshotDir, create_snapshot, snapshot_name
from p2p.statesync.fetch import MAX_SNAPSHOT_BYTES, manifest_root
from p2p.wire.messages import SnapshotOffer

A, B = AccountName("alice"), AccountName("bob")
CHUNK = 4096
OTHER = BlockId((3).to_bytes(4, "big") + b"o" * 28)


@pytest.fixture
def net() -> DevNet:
    return DevNet.create(3, blocks_per_turn=1)


def _snapshot(net: DevNet, tmp_path: Path) -> tuple[SnapshotHead, Path]:
    """The snapshot of a short chain's LIB, in ``tmp_path / "made"``."""
    chain = net.open(tmp_path / "chain")
    for k in range(6):
        chain.admit_transaction(net.tx(chain, Transfer(A, B, k + 1)), now_ms())
        net.produce(chain)
    head, entries = chain.store.lib_state(chain.chain_id)
    path = tmp_path / "made" / snapshot_name(head.num, head.block.id)
    create_snapshot(head, entries, path)
    chain.store.close()
    return head, path


def _offer(block_id: BlockId, data: bytes) -> tuple[SnapshotOffer, tuple[bytes, ...]]:
    hashes = tuple(blake3(data[i : i + CHUNK]).digest() for i in range(0, len(data), CHUNK))
    return SnapshotOffer(block_id, len(data), CHUNK, manifest_root(hashes)), hashes


async def _download_all(download: FileDownload, offer: SnapshotOffer, data: bytes) -> None:
    for index in range(offer.chunks):
        await download.write(index, data[index * CHUNK : (index + 1) * CHUNK])


def test_a_download_names_its_block_from_chunk_0_and_refuses_another_at_the_end(
    net: DevNet, tmp_path: Path
) -> None:
    """A self-consistent snapshot of block N offered under another id: once chunk 0 is
    written the download names block N (the fetcher refuses it there), and ``finish``
    refuses it too, naming both blocks, though the file verifies as a snapshot."""
    head, path = _snapshot(net, tmp_path)
    data = path.read_bytes()
    offer, hashes = _offer(OTHER, data)

    async def scenario() -> None:
        download = FileDownload(tmp_path / "dl")
        await download.start(offer, hashes)
        assert download.head_id() is None
        await download.write(0, data[:CHUNK])
        assert download.head_id() == head.block.id
        await _download_all(download, offer, data)
        with pytest.raises(SnapshotError, match="not of the trusted block"):
            await download.finish()

    asyncio.run(scenario())


def test_a_download_of_the_right_block_finishes_and_a_restart_keeps_it(
    net: DevNet, tmp_path: Path
) -> None:
    """The same file under its own block id finishes; read back after a restart, the
    download holds its chunk and knows its head."""
    head, path = _snapshot(net, tmp_path)
    data = path.read_bytes()
    offer, hashes = _offer(head.block.id, data)

    async def scenario() -> None:
        download = FileDownload(tmp_path / "dl")
        await download.start(offer, hashes)
        await _download_all(download, offer, data)
        assert await download.finish() == download.part

    asyncio.run(scenario())
    again = FileDownload(tmp_path / "dl")
    assert again.offer() == offer and again.held() == {0}
    assert again.head_id() == head.block.id


def test_a_download_whose_file_is_gone_starts_over(net: DevNet, tmp_path: Path) -> None:
    """Killed while it was being reset, a download can keep its manifest and lose its file:
    the next start does not crash but starts over, with nothing held."""
    head, path = _snapshot(net, tmp_path)
    data = path.read_bytes()
    offer, hashes = _offer(head.block.id, data)

    async def scenario() -> None:
        download = FileDownload(tmp_path / "dl")
        await download.start(offer, hashes)
        await download.write(0, data[:CHUNK])

    asyncio.run(scenario())
    (tmp_path / "dl" / "snapshot.part").unlink()
    again = FileDownload(tmp_path / "dl")
    assert again.offer() is None and again.held() == set()
    assert not (tmp_path / "dl" / "manifest").exists()


def test_a_download_refuses_an_offer_too_large_or_a_manifest_of_another_length(
    tmp_path: Path,
) -> None:
    """No file is made for an offer beyond MAX_SNAPSHOT_BYTES, nor for a manifest whose
    chunk count is not the offer's size over its chunk size."""
    huge = SnapshotOffer(OTHER, MAX_SNAPSHOT_BYTES + 1, 4 << 20, b"r" * 32)
    short = SnapshotOffer(OTHER, 3 * CHUNK, CHUNK, b"r" * 32)

    async def scenario() -> None:
        download = FileDownload(tmp_path / "dl")
        with pytest.raises(SnapshotError, match="size of"):
            await download.start(huge, (b"h" * 32,) * huge.chunks)
        with pytest.raises(SnapshotError, match="manifest of 2 chunks for 3"):
            await download.start(short, (b"h" * 32,) * 2)

    asyncio.run(scenario())
    assert not (tmp_path / "dl" / "snapshot.part").exists()


def test_chunk_hashes_are_made_anew_for_a_file_rewritten_with_its_size(
    net: DevNet, tmp_path: Path
) -> None:
    """A snapshot replaced by another file of the same size (its modification time moves)
    is hashed again, not served with the old file's hashes."""
    _, path = _snapshot(net, tmp_path)
    served = tmp_path / "snapshots"
    served.mkdir()
    shutil.copy(path, served / path.name)
    first = SnapshotDir(served, CHUNK)
    asyncio.run(first.refresh())
    (offer,) = first.offers()
    data = bytearray((served / path.name).read_bytes())
    data[-1] ^= 1  # the last byte of its content hash: the head still reads
    (served / path.name).write_bytes(bytes(data))
    stat = (served / path.name).stat()
    os.utime(served / path.name, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    second = SnapshotDir(served, CHUNK)
    asyncio.run(second.refresh())
    (again,) = second.offers()
    assert again.root != offer.root
    assert again.root == manifest_root([blake3(bytes(data)).digest()])


def test_a_snapshot_pruned_while_served_is_no_longer_served(net: DevNet, tmp_path: Path) -> None:
    """A chunk asked of a file deleted meanwhile is not available (None, no exception), and
    the snapshot drops out of the offers."""
    head, path = _snapshot(net, tmp_path)
    served = tmp_path / "snapshots"
    served.mkdir()
    shutil.copy(path, served / path.name)
    snapshots = SnapshotDir(served, CHUNK)

    async def scenario() -> None:
        await snapshots.refresh()
        assert await snapshots.chunk(head.block.id, 0) == path.read_bytes()[:CHUNK]
        (served / path.name).unlink()
        assert await snapshots.chunk(head.block.id, 0) is None
        assert snapshots.offers() == []

    asyncio.run(scenario())


def _config(net: DevNet, tmp_path: Path, trusted: BlockId) -> NodeConfig:
    data = tmp_path / "node"
    data.mkdir()
    (data / "genesis.json").write_text(json.dumps(net.genesis.to_json()))
    net.open(data / "blocks").store.close()
    config = load_config(argparse.Namespace(config=None, data_dir=str(data)))
    return dataclasses.replace(
        config, state_sync=dataclasses.replace(config.state_sync, trusted=trusted)
    )


def test_a_node_restarts_only_from_the_snapshot_of_the_trusted_block(
    net: DevNet, tmp_path: Path
) -> None:
    """A fetched snapshot of another block than the trusted one is refused before the chain
    is touched, and deleted so that the next start fetches again; the trusted block's is
    imported and kept among the snapshots served."""
    head, path = _snapshot(net, tmp_path)
    config = _config(net, tmp_path, OTHER)
    fetched = config.data_dir / STATE_SYNC_DIR / "snapshot.part"
    fetched.parent.mkdir()
    shutil.copy(path, fetched)
    with pytest.raises(NodeError, match="not of the trusted block"):
        restart_from_snapshot(config, fetched, OTHER)
    assert not fetched.parent.exists() and (config.data_dir / "blocks").exists()

    fetched.parent.mkdir()
    shutil.copy(path, fetched)
    restart_from_snapshot(config, fetched, head.block.id)
    assert (config.data_dir / "snapshots" / path.name).read_bytes() == path.read_bytes()
