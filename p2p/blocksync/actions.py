"""What the sync manager (``p2p.blocksync.manager``) is told to work with, what it asks for and what
it reports: its configuration, its stages, the actions the block-sync reactor carries out, and
its status."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from p2p.blocksync.peers import PeerId
from p2p.wire.messages import GoAwayReason


class Stage(StrEnum):
    LIB_CATCHUP = "lib_catchup"
    HEAD_CATCHUP = "head_catchup"
    IN_SYNC = "in_sync"


@dataclass(frozen=True, slots=True)
class FetchRange:
    peer: PeerId
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class DropPeer:
    peer: PeerId
    reason: GoAwayReason
    detail: str


Action = FetchRange | DropPeer


@dataclass(frozen=True, slots=True)
class SyncStatus:
    """Where block sync stands (``SyncManager.status``): a copy that the node's metrics and
    its RPC (/v1/node/sync) both read."""

    stage: Stage
    head: int
    lib: int
    target: int
    next_expected: int
    sources: tuple[PeerId, ...]  # peers with a range in flight, sorted
    ranges_in_flight: int
    blocks_per_s: float
    txs_per_s: float
    eta_s: float | None
    peers: int  # peers whose claims we still hear
    holds_production: bool


@dataclass(kw_only=True, slots=True)
class SyncConfig:
    # Options (node.config.model's sync-*, same names): declared there once, with their defaults,
    # and handed over by node.config.builders.sync_config.
    sync_fetch_span: int  # blocks per range request
    sync_ranges: int  # ranges in flight at once, each from a different peer
    sync_progress_interval_ms: (
        int  # between ``sync_progress`` log lines while catching up (0: none)
    )
    # Tuning, not options.
    window: int = 2000  # blocks above our head that may be requested (the memory bound)
    timeout: float = 5.0
    peer_limit: int = 3
    max_strikes: int = 3
    # How long peers' claims alone may hold our producer, and how long after the last block
    # from a peer joined our chain catch-up still holds it: twice ``timeout``, so that an
    # honest sync whose source stalls and is replaced does not let the producer go early.
    pause_grace: float = 10.0
    # How long a peer's claims (head, LIB) count for the stage without a block of its backing
    # them: a peer claiming blocks it never sends must not keep us out of sync (and our
    # finalizers quiet) for good. Twice ``timeout``: an honest source asked for a range
    # delivers well within one, and one not asked is replaced by those that deliver.
    claim_trust: float = 10.0
