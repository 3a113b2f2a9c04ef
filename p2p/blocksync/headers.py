"""Header sync: serving signed headers, and following the header chain to trust a block.

This reactor owns ``HeaderRangeRequest`` and ``HeaderRange``. Every node serves the signed
headers of the blocks it holds (the blocks' first fields, without their transactions), up to
``MAX_HEADERS`` a request. A node state-syncing without a trusted block id from its operator
follows the header chain from genesis (``chain.core.header_chain.HeaderChain``) while ``wanted``
says so (until state sync has picked a snapshot the chain followed vouches for):

- one request in flight at a time, to one peer, for the ``MAX_HEADERS`` headers after the
  tip followed; peers are asked in turn, the next as soon as an answer came; one whose
  last answer was short (it had no more) is left out for ``IDLE_S``; an answer is decoded
  and judged on a worker thread (``HeaderChain.judge``), then followed on the event loop
  (``adopt``);
- a peer that sends a header breaking a rule, or bytes that are no header, is banned
  (``punish``); what it sent before that header stays followed;
- a batch that continues no block held is another branch above our LIB: the next request
  to that peer starts right above the LIB; if even such a batch does not continue the LIB,
  the peer is on a branch that left ours below our LIB (a lagging node on a losing fork
  can be honest) and is sent away, not banned;
- a header whose slot is ahead of our clock stops the batch there, with no fault (our
  clock may be the slow one); peers holding no blocks that low (started from a snapshot)
  are not asked; when a peer has no more headers for us, ``on_caught_up`` is called;
- serving reads ``SERVE_CHUNK`` blocks per trip to the chain thread and cuts their headers
  out without decoding the transactions, one range at a time per peer and ``MAX_SERVING``
  over all peers;
- a peer silent past ``TIMEOUT_S`` loses its turn; after ``MAX_STRIKES`` it is sent away;
- the chain followed is handed to ``checkpoints`` when its LIB moved, at most every
  ``CHECKPOINT_S`` (at once when a peer had no more), so that a restart follows on from there.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import Protocol

import structlog

from chain.core.consensus.block import decode_signed_header, header_of_encoded_block
from chain.core.header_chain import Checkpoint, HeaderChain, Judged, NotContinuing
from chain.core.primitives.errors import ChainError, EncodingError
from p2p.errors import ChannelClosed, P2PError
from p2p.service import SERVE_CHUNK, ChainService
from p2p.transport.peer import Peer
from p2p.transport.reactor import Reactor
from p2p.wire.codec import MAX_HEADERS
from p2p.wire.messages import GoAwayReason, HeaderRange, HeaderRangeRequest, Message

log = structlog.get_logger("header_sync")

TICK_S = 0.5
IDLE_S = 1.0  # after a short answer (the peer had no more), before asking it again
TIMEOUT_S = 10.0
MAX_STRIKES = 3
MAX_SERVING = 2  # ranges served at once, over all peers
CHECKPOINT_S = 5.0


class HeaderCheckpoints(Protocol):
    """Where the header chain followed is kept across restarts."""

    async def save(self, checkpoint: Checkpoint) -> None: ...


class HeaderSync(Reactor):
    accepts = (HeaderRangeRequest, HeaderRange)

    def __init__(
        self,
        chain: ChainService,
        follow: HeaderChain | None = None,
        wanted: Callable[[], bool] = lambda: False,
        *,
        on_caught_up: Callable[[], None] = lambda: None,
        checkpoints: HeaderCheckpoints | None = None,
        clock: Callable[[], float] = time.monotonic,
        now_ms: Callable[[], int] = lambda: int(time.time() * 1000),
    ) -> None:
        self.chain = chain
        self.follow = follow
        self.wanted = wanted
        self.on_caught_up = on_caught_up  # a peer had no more headers for us: we are level
        self.clock = clock
        self.now_ms = now_ms
        self._serving: dict[str, asyncio.Task[None]] = {}
        self._serve_slots = asyncio.Semaphore(MAX_SERVING)
        self._tg: asyncio.TaskGroup | None = None
        # The request in flight: (peer, start, count, sent at).
        self._asked: tuple[str, int, int, float] | None = None
        self._idle_until: dict[str, float] = {}  # peers not to ask before then
        self._from_lib: set[str] = set()  # peers whose next request starts above the LIB
        self._strikes: dict[str, int] = {}
        self._turn = 0
        self.checkpoints = checkpoints
        self._saved_lib = -1 if follow is None else follow.lib  # the LIB of the last save
        self._saved_at = clock()
        self._saving: asyncio.Task[None] | None = None
        self._judging = False  # a batch is being judged on a worker thread

    # --- Reactor ----------------------------------------------------------------------------

    def remove_peer(self, peer: Peer) -> None:
        serving = self._serving.pop(peer.id, None)
        if serving is not None:
            serving.cancel()
        self._from_lib.discard(peer.id)
        self._strikes.pop(peer.id, None)
        self._idle_until.pop(peer.id, None)
        if self._asked is not None and self._asked[0] == peer.id:
            self._asked = None

    async def receive(self, peer: Peer, message: Message) -> None:
        if isinstance(message, HeaderRangeRequest):
            self._serve(peer, message)
        elif isinstance(message, HeaderRange):
            await self._on_headers(peer, message)

    async def run(self) -> None:
        async with asyncio.TaskGroup() as tg:
            self._tg = tg
            while True:
                if self.follow is not None:
                    if self.wanted():
                        self._tick(self.follow)
                    self._save(self.follow, at_once=False)
                await asyncio.sleep(TICK_S)

    # --- serving ----------------------------------------------------------------------------

    def _serve(self, peer: Peer, request: HeaderRangeRequest) -> None:
        """One range at a time per peer: a request while the last is being served is
        dropped (a follower has one in flight; reading and cutting up to 500 blocks is work a
        flood of requests must not multiply)."""
        if peer.id in self._serving or self._tg is None:
            return
        self._serving[peer.id] = self._tg.create_task(self._serve_range(peer, request))

    async def _serve_range(self, peer: Peer, request: HeaderRangeRequest) -> None:
        """Read the blocks ``SERVE_CHUNK`` at a time and cut their headers out (no
        transaction is decoded); a store that fails is the peer's lost answer, not a crash."""
        try:
            async with self._serve_slots:
                pos = self.chain.position()
                start = request.start
                end = min(start + request.count - 1, pos.head_num)
                headers: list[bytes] = []
                num = start
                while pos.first_block <= num <= end:
                    blocks = await self.chain.encoded_blocks(num, min(num + SERVE_CHUNK - 1, end))
                    if not blocks:
                        break
                    headers.extend(header_of_encoded_block(b) for b in blocks)
                    num += len(blocks)
            with contextlib.suppress(ChannelClosed):
                await peer.outbox.put(HeaderRange(start, tuple(headers)))
        except (ChainError, P2PError) as err:
            log.warning("header_range_not_served", peer=peer.id, why=str(err))
        finally:
            self._serving.pop(peer.id, None)

    # --- following --------------------------------------------------------------------------

    def _tick(self, follow: HeaderChain) -> None:
        if self._judging:
            return  # a batch is being judged: the next request starts after it
        now = self.clock()
        asked = self._asked
        if asked is not None:
            if now - asked[3] < TIMEOUT_S:
                return
            self._asked = None
            self._strike(asked[0], "header range late")
        idle, tip = self._idle_until, follow.tip.num
        peers = sorted(
            (
                p
                for p in self.switch.peers()
                # not idle, and holding blocks this low (one started from a snapshot does not)
                if idle.get(p.id, 0.0) <= now and p.handshake.first_block <= tip + 1
            ),
            key=lambda p: p.id,
        )
        if not peers:
            return
        self._turn += 1
        peer = peers[self._turn % len(peers)]
        start = follow.lib + 1 if peer.id in self._from_lib else tip + 1
        if peer.offer(HeaderRangeRequest(start, MAX_HEADERS)):
            self._asked = (peer.id, start, MAX_HEADERS, now)

    async def _on_headers(self, peer: Peer, message: HeaderRange) -> None:
        follow, asked = self.follow, self._asked
        if follow is None or asked is None or asked[0] != peer.id or message.start != asked[1]:
            return  # not asked (or no longer): ignored
        self._asked = None
        self._strikes.pop(peer.id, None)
        from_lib = peer.id in self._from_lib
        self._from_lib.discard(peer.id)
        # Decoding and judging (signatures, QCs: ~0.3 ms a header) on a worker thread, so
        # that the event loop goes on meanwhile; nothing changes ``follow`` until it is done.
        self._judging = True
        try:
            judged = await asyncio.to_thread(_judge, follow, message, self.now_ms())
        except NotContinuing as err:
            if from_lib:  # on a branch that left ours below our LIB: no use to us (a lagging
                # node on a losing fork can be honest, so it is not banned)
                log.info("header_sync_peer_off_chain", peer=peer.id, why=str(err))
                self.switch.send_away(peer.id, GoAwayReason.BENIGN_OTHER, str(err))
            else:
                self._from_lib.add(peer.id)  # another branch above our LIB, or behind us
            return
        except ChainError as err:  # EncodingError: what it sent is not headers
            self._ban(peer, f"bad header: {err}")
            return
        finally:
            self._judging = False
        followed = follow.adopt(judged)  # those before a header that breaks a rule stay
        if judged.error is not None:
            self._ban(peer, f"bad header: {judged.error}")
            return
        if len(message.headers) < asked[2] or followed < len(message.headers):  # no more now
            self._idle_until[peer.id] = self.clock() + IDLE_S
            self._save(follow, at_once=True)
            self.on_caught_up()
        elif self.wanted():
            self._tick(follow)  # the next batch at once
        if followed:
            log.info(
                "headers_followed",
                peer=peer.id,
                tip=follow.tip.num,
                lib=follow.lib,
                count=followed,
            )

    def _save(self, follow: HeaderChain, *, at_once: bool) -> None:
        """Hand a checkpoint of ``follow`` over if its LIB moved since the last (one save at
        a time; unless ``at_once``, not within ``CHECKPOINT_S`` of the last)."""
        if self.checkpoints is None or self._tg is None or follow.lib <= self._saved_lib:
            return
        if self._saving is not None and not self._saving.done():
            return
        now = self.clock()
        if not at_once and now - self._saved_at < CHECKPOINT_S:
            return
        self._saved_lib, self._saved_at = follow.lib, now
        self._saving = self._tg.create_task(self.checkpoints.save(follow.checkpoint()))

    def _ban(self, peer: Peer, why: str) -> None:
        log.warning("header_sync_peer_banned", peer=peer.id, why=why)
        self.switch.punish(peer.id, GoAwayReason.VALIDATION, why)

    def _strike(self, peer_id: str, why: str) -> None:
        strikes = self._strikes.get(peer_id, 0) + 1
        self._strikes[peer_id] = strikes
        if strikes >= MAX_STRIKES:
            self.switch.send_away(peer_id, GoAwayReason.BENIGN_OTHER, why)


def _judge(follow: HeaderChain, message: HeaderRange, now_ms: int) -> Judged:
    """``message``'s headers decoded and judged on ``follow`` (run on a worker thread)."""
    headers = [decode_signed_header(raw) for raw in message.headers]
    if any(h.num != message.start + i for i, h in enumerate(headers)):
        raise EncodingError("header range", "headers not numbered from its start on")
    return follow.judge(headers, now_ms)
