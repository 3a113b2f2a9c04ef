"""The messages of ``/v1/chain/stream``: the subscribe request read once, the frames sent.

Pure: a client's first message becomes a ``Subscription`` (or a ``Refused`` with the reason
and the close code), and a block becomes the frames one subscription gets for it. A block's
pieces (each transaction's and action's JSON, which accounts each action names, its contract
data decoded) are worked out once per block in a ``BlockIndex`` and shared by every
connection that follows it, so a hundred subscribers cost a hundred dictionary lookups per
block, not a hundred encodings. Payloads take the API's one shape (``node.api.payloads``):
native amounts as assets of the chain's token, contract data decoded beside its hex.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, fields
from typing import Any

import orjson

from chain.core.consensus.block import SignedBlock
from chain.core.execution.actions import ACTION_TYPES, Action, Call
from chain.core.execution.contracts import ActionTrace, TxTrace
from chain.core.primitives.params import ChainParams
from chain.core.primitives.types import BlockId, TxId, is_valid_name
from node.api.payloads import native_action_json, transaction_json
from node.api.views import dumps, slot_iso

# A block's contract traces, per transaction that ran any (``chain.events.BlockStep``).
Traces = tuple[tuple[TxId, TxTrace], ...]

STREAMS = ("blocks", "transactions", "actions")
ACTION_NAMES = frozenset(t.NAME for t in ACTION_TYPES)
# Accounts and action names one subscription may list: a filter is a set lookup per action,
# and 64 covers a wallet's or an exchange's accounts without letting one client make every
# block cost the node more.
MAX_FILTER_NAMES = 64
# The largest subscribe message read (aiohttp's max_msg_size): 64 names of 12 characters and
# a cursor fit in 2 KiB; the rest is slack for whitespace.
MAX_SUBSCRIBE_BYTES = 16 << 10
SUBSCRIBE_FIELDS = frozenset(
    ("type", "stream", "accounts", "actions", "irreversible_only", "cursor", "transactions")
)
# The fields of native actions that hold account names: what an ``accounts`` filter matches
# besides the actors (a transfer's recipient follows its incoming transfers).
ACCOUNT_FIELDS = frozenset(
    (
        "sender",
        "recipient",
        "creator",
        "name",
        "account",
        "governor",
        "producer",
        "voter",
        "contract",
    )
)
ACCOUNT_LIST_FIELDS = frozenset(("producers", "authorization"))
U32 = 2**32 - 1

# WebSocket close codes (RFC 6455, 7.4.1): the client broke the protocol; a fault of ours;
# try again later.
POLICY_VIOLATION = 1008
INTERNAL_ERROR = 1011
TRY_AGAIN_LATER = 1013


class Refused(Exception):
    """A subscription the server will not serve: sent as an error frame, then closed."""

    def __init__(self, reason: str, code: int = POLICY_VIOLATION) -> None:
        super().__init__(reason)
        self.reason = reason
        self.code = code


@dataclass(frozen=True, slots=True)
class Cursor:
    """The last block a client has fully processed."""

    num: int
    id: BlockId

    def json(self) -> dict[str, Any]:
        return {"num": self.num, "id": self.id.hex()}


@dataclass(frozen=True, slots=True)
class Subscription:
    stream: str
    accounts: frozenset[str] = frozenset()
    actions: frozenset[str] = frozenset()
    irreversible_only: bool = False
    cursor: Cursor | None = None
    transactions: bool = False  # blocks: each block frame carries its transactions

    @property
    def filtered(self) -> bool:
        return bool(self.accounts or self.actions)


def parse_subscribe(raw: str | bytes) -> Subscription:
    """The subscription a client's first message asks for; raises ``Refused`` saying what
    is wrong with it."""
    try:
        message = orjson.loads(raw)
    except orjson.JSONDecodeError as err:
        raise Refused(f"the subscribe message is not JSON: {err}") from None
    if not isinstance(message, dict) or message.get("type") != "subscribe":
        raise Refused('the first message must be {"type": "subscribe", ...}')
    unknown = sorted(set(message) - SUBSCRIBE_FIELDS)
    if unknown:
        raise Refused(f"unknown field {unknown[0]!r}")
    stream = message.get("stream")
    if stream not in STREAMS:
        raise Refused(f"'stream' must be one of {', '.join(STREAMS)}")
    accounts = _names(message, "accounts")
    for name in accounts:
        if not is_valid_name(name):
            raise Refused(f"'accounts': {name!r} is not an account name")
    actions = _names(message, "actions")
    for name in actions:
        if not is_valid_name(name):  # a native action's name, or any contract's action's
            known = ", ".join(sorted(ACTION_NAMES))
            raise Refused(f"'actions': {name!r} is not an action name (native: {known})")
    irreversible = message.get("irreversible_only", False)
    if not isinstance(irreversible, bool):
        raise Refused("'irreversible_only' must be true or false")
    transactions = message.get("transactions", False)
    if not isinstance(transactions, bool):
        raise Refused("'transactions' must be true or false")
    if "transactions" in message and stream != "blocks":
        raise Refused("'transactions' is for the blocks stream (the others carry them already)")
    return Subscription(
        stream,
        frozenset(accounts),
        frozenset(actions),
        irreversible,
        _cursor(message),
        transactions,
    )


def _names(message: dict[str, Any], key: str) -> list[str]:
    names = message.get(key, [])
    if names is None:
        return []
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise Refused(f"{key!r} must be a list of names")
    if len(names) > MAX_FILTER_NAMES:
        raise Refused(f"{key!r} lists {len(names)} names; at most {MAX_FILTER_NAMES}")
    return names


def _cursor(message: dict[str, Any]) -> Cursor | None:
    raw = message.get("cursor")
    if raw is None:
        return None
    what = '\'cursor\' must be null or {"num": N, "id": "<64 hex digits>"}'
    if not isinstance(raw, dict) or set(raw) != {"num", "id"}:
        raise Refused(what)
    num, block_id = raw["num"], raw["id"]
    if type(num) is not int or not 0 <= num <= U32:
        raise Refused(what)
    if not isinstance(block_id, str) or len(block_id) != 64:
        raise Refused(what)
    try:
        decoded = bytes.fromhex(block_id)
    except ValueError:
        raise Refused(what) from None
    if num and int.from_bytes(decoded[:4], "big") != num:
        # Ids embed their block's number; the genesis parent (0) is the one exception.
        raise Refused(f"the cursor's id is not the id of a block {num}")
    return Cursor(num, BlockId(decoded))


# --- frames -----------------------------------------------------------------------------------


def subscribed_frame(head: Cursor, lib: Cursor, resume_from: int) -> bytes:
    return dumps(
        {
            "type": "subscribed",
            "head": head.json(),
            "lib": lib.json(),
            "resume_from": resume_from,
        }
    )


def undo_frame(num: int, block_id: BlockId, parent: Cursor) -> bytes:
    block = {"num": num, "id": block_id.hex()}
    return dumps({"type": "undo", "cursor": parent.json(), "block": block})


def lib_frame(lib: Cursor) -> bytes:
    return dumps({"type": "lib", "num": lib.num, "id": lib.id.hex()})


def lagged_frame(cursor: Cursor, reason: str) -> bytes:
    return dumps({"type": "lagged", "cursor": cursor.json(), "reason": reason})


def error_frame(reason: str) -> bytes:
    return dumps({"type": "error", "reason": reason})


def action_accounts(action: Action) -> frozenset[str]:
    """Every account an action names: its actors and the accounts in its data."""
    names: set[str] = set(action.actors())
    for f in fields(action):
        if f.name in ACCOUNT_FIELDS:
            names.add(getattr(action, f.name))
        elif f.name in ACCOUNT_LIST_FIELDS:
            names.update(getattr(action, f.name))
    return frozenset(names)


def _by_call(trace: TxTrace) -> list[list[ActionTrace]]:
    """A transaction's contract actions grouped by the ``call`` action that ran them: each
    group starts at depth 0, its inline actions follow it (the trace's order)."""
    groups: list[list[ActionTrace]] = []
    for a in trace.actions:
        if a.depth == 0 or not groups:
            groups.append([])
        groups[-1].append(a)
    return groups


# An action of a block as the stream names it: (tx index, action index, contract action
# index or -1 for a native action, the accounts it names, its name).
Entry = tuple[int, int, int, frozenset[str], str]
Key = tuple[int, int, int]
# A contract action's data and its events' data, decoded by the contract's ABI (None where
# they do not decode): what ``node.api.stream.abis`` works out once per block.
Decoded = tuple[Any, tuple[Any, ...]]


class BlockIndex:
    """One block's pieces for the stream, each worked out the first time a subscriber needs
    it: which transactions and actions each account and action name selects, and their
    JSON. A ``call`` action appears as the contract actions it ran (from ``traces``): the
    contract as the account, the contract's action name, its data and events (hex, and
    decoded once ``decode`` is given them) and console. Native amounts are shown in
    ``params``' token."""

    def __init__(self, block: SignedBlock, traces: Traces = (), *, params: ChainParams) -> None:
        self.block = block
        self.cursor = Cursor(block.num, block.id)
        self.params = params
        self._traces = dict(traces)
        self._head: bytes | None = None
        self._txs: list[bytes | None] = [None] * len(block.transactions)
        self._actions: dict[Key, bytes] = {}
        self._index: list[Entry] | None = None
        self._contract: dict[tuple[int, int], list[ActionTrace]] = {}
        self._decoded: dict[Key, Decoded] | None = None if self._traces else {}
        # The unfiltered frames, by stream, finality and (blocks) whether with transactions:
        # the same bytes for every subscriber (a hundred replaying one block hold one copy of
        # its frame, not a hundred).
        self._frames: dict[tuple[str, bool, bool], bytes | None] = {}

    def _entries(self) -> list[Entry]:
        if self._index is None:
            entries: list[Entry] = []
            for i, stx in enumerate(self.block.transactions):
                trace = self._traces.get(stx.id)
                groups = iter(_by_call(trace)) if trace is not None else iter(())
                for j, action in enumerate(stx.tx.actions):
                    ran = next(groups, None) if action.CODE == Call.CODE else None
                    if ran is None:
                        entries.append((i, j, -1, action_accounts(action), action.NAME))
                        continue
                    self._contract[(i, j)] = ran
                    for k, a in enumerate(ran):
                        # A notification names its receiver too: following bob's account
                        # shows the token transfers that notified bob.
                        accounts = frozenset((a.call.contract, a.receiver, *a.call.authorization))
                        entries.append((i, j, k, accounts, a.call.action))
            self._index = entries
        return self._index

    # --- contract data, decoded once per block -------------------------------------------------

    @property
    def decoded(self) -> bool:
        """Whether the contract data is decoded (a block that ran no contract: at once)."""
        return self._decoded is not None

    def contract_actions(self) -> list[tuple[Key, ActionTrace]]:
        """Every contract action of the block, in block order, with its key."""
        entries = self._entries()
        return [((i, j, k), self._contract[(i, j)][k]) for i, j, k, _, _ in entries if k >= 0]

    def decode(self, decoded: dict[Key, Decoded]) -> None:
        """Take the contract data decoded (the first decoding given wins: one per block)."""
        if self._decoded is None:
            self._decoded = decoded

    # --- frames ----------------------------------------------------------------------------

    def matching(self, sub: Subscription) -> list[Key]:
        """(tx index, action index, contract action index or -1) of the actions ``sub``'s
        filters select, in block order."""
        if not sub.filtered:
            return [(i, j, k) for i, j, k, _, _ in self._entries()]
        return [
            (i, j, k)
            for i, j, k, accounts, name in self._entries()
            if (not sub.actions or name in sub.actions)
            and (not sub.accounts or not accounts.isdisjoint(sub.accounts))
        ]

    def frame(self, sub: Subscription, irreversible: bool) -> bytes | None:
        """The frame ``sub`` gets for this block; None when its filters select nothing."""
        if sub.filtered and sub.stream != "blocks":
            return self._frame(sub, irreversible)
        key = (sub.stream, irreversible, sub.transactions)
        if key not in self._frames:
            self._frames[key] = self._frame(sub, irreversible)
        return self._frames[key]

    def _frame(self, sub: Subscription, irreversible: bool) -> bytes | None:
        if sub.stream == "blocks":
            return self._block_frame(irreversible, sub.transactions)
        selected = self.matching(sub)
        if not selected:
            return None
        prefix = (
            b'{"type":"' + sub.stream.encode() + b'","cursor":' + dumps(self.cursor.json())
            + b',"irreversible":' + (b"true" if irreversible else b"false")
            + b',"block":' + dumps(self.cursor.json())
        )  # fmt: skip
        if sub.stream == "transactions":
            txs = list(dict.fromkeys(i for i, _, _ in selected))
            return prefix + b',"transactions":[' + b",".join(self._tx(i) for i in txs) + b"]}"
        return prefix + b',"actions":[' + b",".join(self._action(*key) for key in selected) + b"]}"

    def _block_frame(self, irreversible: bool, transactions: bool) -> bytes:
        if self._head is None:
            h = self.block.header
            self._head = dumps(
                {
                    "num": h.num,
                    "id": self.block.id.hex(),
                    "previous": h.previous.hex(),
                    "producer": h.producer,
                    "slot": h.slot,
                    "timestamp": slot_iso(h.slot),
                    "transaction_count": len(self.block.transactions),
                }
            )
        block = self._head
        if transactions:  # the same pieces as the transactions stream's frames
            txs = b",".join(self._tx(i) for i in range(len(self.block.transactions)))
            block = block[:-1] + b',"transactions":[' + txs + b"]}"
        return (
            b'{"type":"block","cursor":' + dumps(self.cursor.json())
            + b',"irreversible":' + (b"true" if irreversible else b"false")
            + b',"block":' + block + b"}"
        )  # fmt: skip

    def _tx(self, i: int) -> bytes:
        encoded = self._txs[i]
        if encoded is None:
            shown = transaction_json(self.block.transactions[i], self.params)
            encoded = self._txs[i] = dumps(shown)
        return encoded

    def _action(self, i: int, j: int, k: int) -> bytes:
        encoded = self._actions.get((i, j, k))
        if encoded is not None:
            return encoded
        stx = self.block.transactions[i]
        if k < 0:
            action = stx.tx.actions[j]
            value = {
                "tx_id": stx.id.hex(),
                "index": j,
                "account": None,  # a native action: no contract account
                "name": action.NAME,
                "authorization": list(action.actors()),
                "data": native_action_json(action, self.params)["data"],
            }
        else:
            value = self._contract_action(stx.id, i, j, k)
        encoded = self._actions[(i, j, k)] = dumps(value)
        return encoded

    def _contract_action(self, tx_id: TxId, i: int, j: int, k: int) -> dict[str, Any]:
        a = self._contract[(i, j)][k]
        data, events = (self._decoded or {}).get((i, j, k), (None, ()))
        return {
            "tx_id": tx_id.hex(),
            "index": j,
            "account": a.call.contract,
            "name": a.call.action,
            "receiver": a.receiver,
            "authorization": list(a.call.authorization),
            "data": data,
            "hex": a.call.data.hex(),
            "depth": a.depth,
            "console": a.console,
            "events": [
                {"name": n, "hex": d.hex(), "data": events[e] if e < len(events) else None}
                for e, (n, d) in enumerate(a.events)
            ],
        }


# Blocks whose pieces are kept: the few around the head that live subscribers share. A
# subscriber replaying history walks past them; its blocks come and go through here too.
INDEXED_BLOCKS = 16


class IndexCache:
    """The ``BlockIndex`` of the last few blocks, by id (used on the event loop only); their
    amounts shown in ``params``' token."""

    def __init__(self, params: ChainParams, size: int = INDEXED_BLOCKS) -> None:
        self.params = params
        self._size = size
        self._indexes: OrderedDict[BlockId, BlockIndex] = OrderedDict()

    def index(self, block: SignedBlock, traces: Traces = ()) -> BlockIndex:
        index = self._indexes.get(block.id)
        if index is None:
            index = BlockIndex(block, traces, params=self.params)
            self._indexes[block.id] = index
            if len(self._indexes) > self._size:
                self._indexes.popitem(last=False)
        else:
            self._indexes.move_to_end(block.id)
        return index
