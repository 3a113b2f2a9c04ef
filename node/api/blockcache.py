"""Blocks' JSON, encoded once per block rather than once per request.

A full block costs milliseconds of the GIL to decode, turn into dicts and encode, clients
that poll recent blocks ask for the same ones again and again, and every one of those
milliseconds is taken from block production and admission. So the event loop keeps the
encoded bytes of the last blocks by id, and for the recent blocks of our chain the number ->
id map, fed with the chain's events: blocks as they commit and as a fork switch pops them.

A block's JSON is the same forever except for ``irreversible``, which turns true when the LIB
passes it: the bytes are kept as the text before that flag and the text after it, and the
flag is spliced in at serve time from the current view.

Everything here runs on the event loop; it never reads the chain.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

from chain.core.consensus.block import SignedBlock
from chain.core.primitives.params import ChainParams
from chain.core.primitives.types import BlockId
from chain.events import BlockStep
from chain.view import ChainView
from node.api.views import block_json, dumps

# Recent blocks of our chain kept as objects with their numbers: explorers, exchanges and
# wallets poll the last few. Most are reversible, so the fork database holds them anyway and
# the references cost little memory; but where blocks turn irreversible at once (one
# producer) only this holds them, and at the 4 MiB block limit 64 would be 256 MiB of
# encoding and more as objects: the oldest go once their encodings pass RECENT_BYTES.
RECENT_BLOCKS = 64
RECENT_BYTES = 32 << 20
# Encoded blocks kept, by id: a block of 1,500 transfers is ~600 KB of JSON, but a 2.2 MB
# block of big-memo transfers is 2.43 MB, so 64 blocks near the 4 MiB limit would be ~300
# MB: the oldest go past 64 blocks or ENCODED_BYTES of JSON.
ENCODED_BLOCKS = 64
ENCODED_BYTES = 64 << 20
# Number -> id of irreversible blocks already served (an id never changes below the LIB);
# 40 bytes an entry.
IRREVERSIBLE_IDS = 16_384


@dataclass(frozen=True, slots=True)
class _Encoded:
    before: bytes  # up to and including '"irreversible":'
    after: bytes  # from ',"transactions":' to the end

    @property
    def size(self) -> int:
        return len(self.before) + len(self.after)

    def render(self, irreversible: bool) -> bytes:
        return self.before + (b"true" if irreversible else b"false") + self.after


def encode_block(block: SignedBlock, params: ChainParams) -> _Encoded:
    body = block_json(block, 0, params)
    del body["irreversible"]
    transactions = body.pop("transactions")
    return _Encoded(
        dumps(body)[:-1] + b',"irreversible":',
        b',"transactions":' + dumps(transactions) + b"}",
    )


class BlockJsonCache:
    def __init__(self, params: ChainParams) -> None:
        """``params``: the chain's, whose token the blocks' amounts are shown in."""
        self._params = params
        self._recent: dict[int, SignedBlock] = {}  # number -> block, on our chain
        self._recent_head: BlockId | None = None  # the newest block in _recent
        self._encoded: OrderedDict[BlockId, _Encoded] = OrderedDict()
        self._encoded_bytes = 0
        self._irreversible: OrderedDict[int, BlockId] = OrderedDict()

    def follow(self, steps: Sequence[BlockStep]) -> None:
        """Blocks joined our chain or left it in a fork switch, in that order (one update of
        the chain's events): a popped block leaves the cache."""
        if not steps:
            return
        for step in steps:
            block = step.block
            if step.undo:
                held = self._recent.get(block.num)
                if held is not None and held.id == block.id:
                    del self._recent[block.num]
                # Its JSON would call it irreversible once the LIB passes its number.
                parts = self._encoded.pop(block.id, None)
                self._encoded_bytes -= 0 if parts is None else parts.size
                continue
            for num in [n for n in self._recent if n >= block.num]:
                del self._recent[num]  # a branch we did not hear leave (none, normally)
            self._recent[block.num] = block
        last = steps[-1]
        self._recent_head = last.block.header.previous if last.undo else last.block.id
        newest = max(self._recent, default=0)
        for num in [n for n in self._recent if n <= newest - RECENT_BLOCKS]:
            del self._recent[num]
        size = sum(len(block.encode()) for block in self._recent.values())
        for num in sorted(self._recent)[:-1]:  # the head stays, however big
            if size <= RECENT_BYTES:
                break
            size -= len(self._recent.pop(num).encode())

    def id_at(self, num: int, view: ChainView) -> BlockId | None:
        """Id of block ``num`` on the chain ``view`` shows, if known here; else None.

        The recent map is trusted only while its newest block is the view's head: between a
        fork switch and the blocks' arrival here it may still hold the abandoned branch.
        """
        if num <= view.lib_num:
            known = self._irreversible.get(num)
            if known is not None:
                self._irreversible.move_to_end(num)
                return known
        block = self._recent.get(num)
        if block is None or self._recent_head != view.head.id:
            return None
        if num <= view.lib_num:
            self.learn(num, block.id, view.lib_num)
        return block.id

    def learn(self, num: int, block_id: BlockId, lib: int) -> None:
        """Block ``num`` is ``block_id`` on a chain whose LIB was ``lib`` at the time."""
        if num > lib:
            return  # reversible: another block may take its number
        self._irreversible[num] = block_id
        self._irreversible.move_to_end(num)
        if len(self._irreversible) > IRREVERSIBLE_IDS:
            self._irreversible.popitem(last=False)

    def recent(self, block_id: BlockId) -> SignedBlock | None:
        """The block with ``block_id`` if it is one of the recent blocks of our chain."""
        block = self._recent.get(int.from_bytes(block_id[:4], "big"))
        return block if block is not None and block.id == block_id else None

    def encoded(self, block_id: BlockId, lib: int) -> bytes | None:
        """The JSON of block ``block_id`` if encoded already, ``irreversible`` as of ``lib``."""
        parts = self._encoded.get(block_id)
        if parts is None:
            return None
        self._encoded.move_to_end(block_id)
        return parts.render(int.from_bytes(block_id[:4], "big") <= lib)

    def encode(self, block: SignedBlock, lib: int) -> bytes:
        """The JSON of ``block``, encoded now and kept; ``irreversible`` as of ``lib``."""
        parts = self._encoded.get(block.id)
        if parts is None:
            parts = self._encoded[block.id] = encode_block(block, self._params)
            self._encoded_bytes += parts.size
            # The oldest go; the one just made stays, however big.
            while len(self._encoded) > 1 and (
                len(self._encoded) > ENCODED_BLOCKS or self._encoded_bytes > ENCODED_BYTES
            ):
                self._encoded_bytes -= self._encoded.popitem(last=False)[1].size
        self._encoded.move_to_end(block.id)
        return parts.render(block.num <= lib)
