"""Contract data on the stream, decoded by the contracts' ABIs once per block.

BoR keeps only each contract's current ABI (a ``setcode`` replaces it; no earlier one is
kept), so the stream decodes a block's contract actions and events by the ABI the contract
has when that block is first framed: live blocks by the ABI they ran under (unless a later
block redeployed it before the frame was made), replayed history by today's. Where that
ABI does not describe old data (a field added since), the data is null and the hex beside
it is what the contract received.

``StreamAbis`` holds, for the whole hub, each contract's ABI by the hash of its text (read on
the chain thread, parsed on a worker thread: contracts sharing one ABI share one parse) and
forgets a contract's when a block deploys to it or a fork switch undoes such a block. A
block's decoding runs on a worker thread, once however many sessions want it, and is
bounded (``BLOCK_DECODED_BYTES``) so that no block, however hostile its contracts, holds the
event loop or grows without end.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from chain.abi import Abi, parse_abi
from chain.core.execution.actions import SetCode
from chain.core.execution.contracts import ActionTrace
from chain.core.primitives import schema
from chain.core.primitives.encoding import unpack
from chain.core.primitives.errors import EncodingError
from chain.events import BlockStep
from node.api.payloads import action_data, event_data
from node.api.stream.frames import BlockIndex, Decoded, Key

if TYPE_CHECKING:
    from chain.controller import Chain
    from node.runner import ChainRunner

# Contracts whose ABI hash is remembered (a name and 32 bytes each).
ABI_CONTRACTS = 4096
# Parsed ABIs kept, by the hash of their text, and the text they were parsed from at most: an
# ABI is 64 KiB at most, and parsed a few times that.
ABI_PARSED = 64
ABI_PARSED_BYTES = 4 << 20
# Contracts one block's actions are decoded for (the first, in block order): the rest show hex
# only, so a block calling thousands of contracts does not parse thousands of ABIs.
ABIS_PER_BLOCK = 64
# Contract data decoded per block, every action's and event's together, at ~0.6 µs a byte
# of the densest ABI (measured): ~150 ms of a worker thread at worst. A block of a thousand
# ordinary contract actions decodes in full; past it, data is null (the hex is there).
BLOCK_DECODED_BYTES = 256 << 10

_NO_ABI = b""  # the hash remembered for a contract deployed without an ABI (or none at all)


def read_abi_texts(chain: Chain, contracts: tuple[str, ...]) -> dict[str, str]:
    """(On the chain thread.) Each contract's ABI text now: '' where it has none, or no
    code. Reads the code entry only, never the module."""
    texts = {}
    for contract in contracts:
        raw = chain.store.get(schema.code_key(contract))
        texts[contract] = "" if raw is None else str(unpack(raw, "code entry")[1])
    return texts


def _digest(text: str) -> bytes:
    return hashlib.sha256(text.encode()).digest() if text else _NO_ABI


def _parse(texts: dict[bytes, str]) -> dict[bytes, Abi | None]:
    """(On a worker thread.) Each text parsed; None for one that is no valid ABI."""
    parsed: dict[bytes, Abi | None] = {}
    for digest, text in texts.items():
        try:
            parsed[digest] = parse_abi(text)
        except (EncodingError, RecursionError):  # setcode stores the text unchecked
            parsed[digest] = None
    return parsed


def decode_block(
    actions: Sequence[tuple[Key, ActionTrace]],
    abis: dict[str, Abi | None],
    budget: int = BLOCK_DECODED_BYTES,
) -> dict[Key, Decoded]:
    """(On a worker thread.) Each contract action's data decoded by its contract's ABI and
    its events by their emitter's (the receiver: a notified contract emits its own), in block
    order, until ``budget`` bytes of data are decoded."""
    decoded: dict[Key, Decoded] = {}
    for key, a in actions:
        abi = abis.get(a.call.contract)
        data: Any = None
        if abi is not None and len(a.call.data) <= budget:
            budget -= len(a.call.data)
            data = action_data(abi, a.call.action, a.call.data)
        events = []
        own = abis.get(a.receiver)
        for name, raw in a.events:
            value = None
            if own is not None and len(raw) <= budget:
                budget -= len(raw)
                value = event_data(own, name, raw)
            events.append(value)
        decoded[key] = (data, tuple(events))
    return decoded


def _abis_needed(actions: Iterable[ActionTrace]) -> Iterator[str]:
    """The accounts whose ABIs decode ``actions``: each contract, and each notified account
    that emitted events (a plain notified account runs nothing: its ABI is not asked for)."""
    for a in actions:
        yield a.call.contract
        if a.events and a.notified:
            yield a.receiver


class StreamAbis:
    """The contracts' current ABIs, for the stream's decoding (on the event loop only)."""

    def __init__(self) -> None:
        self._hashes: OrderedDict[str, bytes] = OrderedDict()  # contract -> its ABI's hash
        self._parsed: OrderedDict[bytes, tuple[Abi | None, int]] = OrderedDict()  # (ABI, size)
        self._parsed_bytes = 0
        # Bumped whenever a deploy is seen: a read that started before it may be stale.
        self._generation = 0
        self._lock = asyncio.Lock()  # one block decoded at a time

    def deployed(self, steps: Sequence[BlockStep]) -> None:
        """(A chain update's steps.) Forget the ABI of each contract a block deployed to,
        applied or undone: the contract's ABI now may be another."""
        for step in steps:
            for stx in step.block.transactions:
                for action in stx.tx.actions:
                    if isinstance(action, SetCode):
                        self._hashes.pop(action.account, None)
                        self._generation += 1

    async def decode(self, index: BlockIndex, runner: ChainRunner) -> None:
        """Decode ``index``'s contract data, unless done already (one block at a time, so
        sessions that want the same block wait for one decoding)."""
        if index.decoded:
            return
        async with self._lock:
            if index.decoded:
                return
            actions = index.contract_actions()
            contracts = list(dict.fromkeys(_abis_needed(a for _, a in actions)))
            abis = await self.abis(contracts[:ABIS_PER_BLOCK], runner)
            index.decode(await asyncio.to_thread(decode_block, actions, abis))

    async def abis(self, contracts: Iterable[str], runner: ChainRunner) -> dict[str, Abi | None]:
        """The current ABI of each of ``contracts`` (None: it has none, or no valid one)."""
        found: dict[str, Abi | None] = {}
        missing = []
        for contract in contracts:
            held = self._held(contract)
            if held is None:
                missing.append(contract)
            else:
                found[contract] = held[0]
        if not missing:
            return found
        generation = self._generation
        texts = await runner.call(read_abi_texts, tuple(missing))
        digests = {c: _digest(t) for c, t in texts.items()}
        unparsed = {d: texts[c] for c, d in digests.items() if d and d not in self._parsed}
        parsed = await asyncio.to_thread(_parse, unparsed) if unparsed else {}
        for contract, digest in digests.items():
            abi = None if digest == _NO_ABI else parsed.get(digest, self._abi_of(digest))
            found[contract] = abi
            if generation == self._generation:  # no deploy since the read: it is current
                self._remember(contract, digest, abi, len(texts[contract]))
        return found

    def _held(self, contract: str) -> tuple[Abi | None] | None:
        digest = self._hashes.get(contract)
        if digest is None:
            return None
        self._hashes.move_to_end(contract)
        if digest == _NO_ABI:
            return (None,)
        parsed = self._parsed.get(digest)
        if parsed is None:
            return None  # parsed once, since dropped: read again
        self._parsed.move_to_end(digest)
        return (parsed[0],)

    def _abi_of(self, digest: bytes) -> Abi | None:
        held = self._parsed.get(digest)
        return None if held is None else held[0]

    def _remember(self, contract: str, digest: bytes, abi: Abi | None, size: int) -> None:
        self._hashes[contract] = digest
        self._hashes.move_to_end(contract)
        if len(self._hashes) > ABI_CONTRACTS:
            self._hashes.popitem(last=False)
        if digest == _NO_ABI or digest in self._parsed:
            return
        self._parsed[digest] = (abi, size)
        self._parsed_bytes += size
        while len(self._parsed) > 1 and (
            len(self._parsed) > ABI_PARSED or self._parsed_bytes > ABI_PARSED_BYTES
        ):
            self._parsed_bytes -= self._parsed.popitem(last=False)[1][1]
