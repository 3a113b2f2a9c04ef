"""Contracts as the pure core sees them: a call, its trace, and the runtime it is handed.

The core never imports the WebAssembly runtime. A transaction's contract actions are run by
the ``ContractHost`` in its ``Context`` (``chain.vm`` implements it with wasmtime); the core
only decides where a contract action runs, in which view, and what its trace is. Names are
Antelope's 64-bit names, so a contract keys its tables by account the way Antelope's do.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Protocol

from chain.core.execution.state import StateView
from chain.core.primitives.encoding import pack, unpack
from chain.core.primitives.errors import EncodingError
from chain.core.primitives.params import ChainParams
from chain.core.primitives.types import _NAME_RE, AccountName

_CHARMAP = ".12345abcdefghijklmnopqrstuvwxyz"


@lru_cache(maxsize=4096)  # every action converts its contract's, action's and actors' names
def name_to_u64(name: str) -> int:
    """Antelope's ``string_to_name``: up to 12 characters of ``.1-5a-z``, 5 bits each."""
    if len(name) > 12 or _NAME_RE.fullmatch(name) is None:
        raise EncodingError("name", f"{name!r} is not an account or action name")
    value = 0
    for i, ch in enumerate(name):
        value |= _CHARMAP.index(ch) << (64 - 5 * (i + 1))
    return value


@lru_cache(maxsize=4096)  # host calls name payers, accounts and events by number
def u64_to_name(value: int) -> str | None:
    """The name ``value`` encodes, or None if it is no valid name (a 13th character,
    dots at the end or in the middle of nothing)."""
    if not 0 <= value < 1 << 64 or value & 0xF:
        return None
    chars = []
    for i in range(12):
        chars.append(_CHARMAP[(value >> (64 - 5 * (i + 1))) & 0x1F])
    text = "".join(chars).rstrip(".")
    if not text or _NAME_RE.fullmatch(text) is None:
        return None
    return text


@dataclass(frozen=True, slots=True)
class ContractCall:
    """One call of a contract's action: by a transaction, or inline by another contract."""

    contract: AccountName
    action: str  # an action name (same rules as an account name)
    authorization: tuple[AccountName, ...]  # the accounts that authorize it
    data: bytes  # the action's arguments, in the contract's ABI binary encoding


_ITSELF = AccountName("")  # an ActionTrace's receiver when not given: its call's contract


@dataclass(slots=True)
class ActionTrace:
    """What one contract action did: filled in by the runtime while it runs.

    ``receiver`` is the account whose code ran (Antelope's ``receiver``): the contract
    itself, or an account the contract notified (``require_recipient``), which then ran
    ``call`` (the same contract, action, data and authorization) as a notification, or,
    without a contract, only appears here.
    """

    call: ContractCall
    depth: int  # 0: an action of the transaction; n: sent inline or notified at depth n
    fuel: int = 0  # fuel this action used, its inline actions not included
    console: str = ""
    events: list[tuple[str, bytes]] = field(default_factory=list)  # (event name, data)
    return_value: bytes = b""
    receiver: AccountName = _ITSELF  # the contract itself unless given

    def __post_init__(self) -> None:
        if not self.receiver:
            self.receiver = self.call.contract

    @property
    def notified(self) -> bool:
        """Whether this is a notification (the receiver is not the contract)."""
        return self.receiver != self.call.contract

    def encode(self) -> list[Any]:
        c = self.call
        # A notification's receiver follows as a tenth item; an action of the contract itself
        # keeps the nine of the traces stored before notifications existed.
        extra = [self.receiver] if self.notified else []
        return [
            c.contract,
            c.action,
            list(c.authorization),
            c.data,
            self.depth,
            self.fuel,
            self.console,
            [[n, d] for n, d in self.events],
            self.return_value,
            *extra,
        ]

    @classmethod
    def decode(cls, raw: Any) -> ActionTrace:
        contract, action, auth, data, depth, fuel, console, events, ret, *rest = raw
        call = ContractCall(AccountName(contract), action, tuple(auth), bytes(data))
        events = [(n, bytes(d)) for n, d in events]
        receiver = AccountName(rest[0]) if rest else call.contract
        return cls(call, depth, fuel, console, events, bytes(ret), receiver)


@dataclass(slots=True)
class TxTrace:
    """The contract actions a transaction ran, in execution order (inline ones after the
    action that sent them), and the fuel it used in all."""

    actions: list[ActionTrace] = field(default_factory=list)
    fuel: int = 0


def encode_traces(traces: list[tuple[bytes, TxTrace]]) -> bytes:
    """A block's traces, as the store keeps them: ``[[tx id, fuel, [action, ...]], ...]``."""
    return pack([[tx_id, t.fuel, [a.encode() for a in t.actions]] for tx_id, t in traces])


def decode_traces(data: bytes) -> list[tuple[bytes, TxTrace]]:
    raw = unpack(data, "block traces")
    return [
        (bytes(tx_id), TxTrace([ActionTrace.decode(a) for a in actions], fuel))
        for tx_id, fuel, actions in raw
    ]


# ABIs whose read-only actions are remembered: a chain calls few contracts, and each entry is
# keyed by the ABI's text (at most MAX_ABI_BYTES).
READ_ONLY_KEPT = 256


@lru_cache(maxsize=READ_ONLY_KEPT)
def read_only_actions(abi_text: str) -> frozenset[str]:
    """The actions ``abi_text`` marks ``"read_only": true`` (a ``bor::abi/1`` action entry):
    Antelope's read-only actions, which ``call`` runs and no transaction may carry.

    Read from the ABI stored at setcode, leniently (an ABI stored before setcode parsed
    ABIs may be no JSON at all: it then marks nothing), so every node decides alike.
    """
    try:
        obj = json.loads(abi_text) if abi_text else None
    except (ValueError, RecursionError):
        return frozenset()
    actions = obj.get("actions") if isinstance(obj, dict) else None
    if not isinstance(actions, list):
        return frozenset()
    return frozenset(
        a["name"]
        for a in actions
        if isinstance(a, dict) and isinstance(a.get("name"), str) and a.get("read_only") is True
    )


class ContractHost(Protocol):
    """Runs contract code for the state transition (``chain.vm.ContractRuntime``)."""

    def validate(self, code: bytes, params: ChainParams) -> bytes:
        """Check a module offered by ``setcode`` and return its code hash (SHA-256); raise
        ``ContractError`` saying what is wrong (size, imports, exports, memory, validation)."""
        ...

    def validate_abi(self, abi: str) -> None:
        """Check the ABI text a ``setcode`` offers ("" for none); raise ``ContractError``
        naming the entry at fault (``abi.tables[0].type: ...``)."""
        ...

    def run(
        self,
        view: StateView,
        call: ContractCall,
        trace: TxTrace,
        *,
        params: ChainParams,
        block_time_s: int,
        block_num: int,
        fuel_left: int,
    ) -> None:
        """Run ``call`` (and the inline actions it sends) on ``view``, appending to
        ``trace`` and adding the fuel used to ``trace.fuel``; at most ``fuel_left`` fuel.
        Raises ``ContractError`` or ``ResourceExceeded``; the caller drops the view."""
        ...
