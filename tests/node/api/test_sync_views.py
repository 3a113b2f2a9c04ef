"""The sync answers' JSON, made in one place from the statuses that block sync and state sync
publish: the field names and values that /v1/node/sync, /v1/net/peers and get_info give."""

from __future__ import annotations

from chain.core.primitives.types import BlockId
from node.api.views import state_sync_json, sync_json, sync_summary_json
from p2p.blocksync.manager import Stage, SyncStatus
from p2p.statesync.fetch import StateSyncStatus

SYNC = SyncStatus(Stage.HEAD_CATCHUP, 10, 8, 40, 11, ("a", "b"), 2, 25.5, 80.0, 1.2, 3, True)


def test_block_sync_json_keeps_its_fields() -> None:
    """Block sync's status becomes the /v1/node/sync object it always was."""
    assert sync_json(SYNC) == {
        "stage": "head_catchup",
        "head": 10,
        "lib": 8,
        "target": 40,
        "next_expected": 11,
        "sources": ["a", "b"],
        "ranges_in_flight": 2,
        "blocks_per_s": 25.5,
        "txs_per_s": 80.0,
        "eta_s": 1.2,
        "peers": 3,
        "holds_production": True,
    }


def test_get_info_sync_fields_say_state_sync_while_fetching() -> None:
    """get_info's sync fields come from block sync's status, or say state_sync with nothing
    to go while a snapshot is fetched."""
    assert sync_summary_json(SYNC) == {
        "sync_stage": "head_catchup",
        "sync_target": 40,
        "sync_blocks_per_s": 25.5,
        "sync_txs_per_s": 80.0,
        "sync_eta_s": 1.2,
    }
    assert sync_summary_json(None)["sync_stage"] == "state_sync"


def test_state_sync_json_keeps_its_fields() -> None:
    """A download's status becomes /v1/node/sync's state_sync object, the block number read
    from the trusted id and the header chain as tip and lib."""
    block_id = BlockId((7).to_bytes(4, "big") + bytes(28))
    status = StateSyncStatus(
        done=False,
        block_id=block_id,
        headers=(9, 7),
        chunks=2,
        chunks_total=5,
        chunks_fetched=1,
        chunks_resumed=1,
        bytes=200,
        bytes_total=500,
        bytes_per_s=100,
        eta_s=3.0,
        sources=("a",),
        dropped=("s",),
        peers_banned={"chunk": 1},
    )
    assert state_sync_json(status) == {
        "stage": "state_sync",
        "block_id": block_id.hex(),
        "block_num": 7,
        "headers": {"tip": 9, "lib": 7},
        "chunks": 2,
        "chunks_total": 5,
        "chunks_fetched": 1,
        "chunks_resumed": 1,
        "bytes": 200,
        "bytes_total": 500,
        "bytes_per_s": 100,
        "eta_s": 3.0,
        "sources": ["a"],
        "dropped": ["s"],
        "peers_banned": {"chunk": 1},
    }
