"""The native actions: one frozen dataclass each, with their encoding and JSON form.

An action is encoded as ``[code, field, ...]``. Every action names the accounts whose active
key must sign it (``actors``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any, ClassVar

from chain.core.primitives.crypto import check_public_key, public_key_from_text, public_key_to_text
from chain.core.primitives.encoding import check_bytes, check_int, check_list, check_str
from chain.core.primitives.errors import ChainError, EncodingError
from chain.core.primitives.types import _NAME_RE, MAX_AMOUNT, AccountName, PublicKey

MAX_MEMO = 256
MAX_URL = 256
MAX_VOTES = 30
# The wire's bounds on contract actions; the chain's own limits (max_code_bytes, max_tx_bytes)
# are checked by the transition against its params. 4 MiB: what a block may hold anyway.
MAX_WIRE_CODE = 4 * 1024 * 1024
MAX_ABI = 64 * 1024  # an ABI's JSON text, in characters
MAX_CALL_DATA = 4 * 1024 * 1024
MAX_AUTHORIZATION = 16
_NAME_FULLMATCH = _NAME_RE.fullmatch  # bound once: called for every name of every action


@dataclass(frozen=True, slots=True)
class Transfer:
    """Move tokens from ``sender``'s liquid balance to ``recipient``."""

    CODE: ClassVar[int] = 1
    NAME: ClassVar[str] = "transfer"
    sender: AccountName
    recipient: AccountName
    amount: int
    memo: str = ""

    def actors(self) -> tuple[AccountName, ...]:
        return (self.sender,)


@dataclass(frozen=True, slots=True)
class NewAccount:
    """Create ``name`` with active key ``key`` (governance accounts only)."""

    CODE: ClassVar[int] = 2
    NAME: ClassVar[str] = "newaccount"
    creator: AccountName
    name: AccountName
    key: PublicKey

    def actors(self) -> tuple[AccountName, ...]:
        return (self.creator,)


@dataclass(frozen=True, slots=True)
class UpdateKey:
    """Rotate ``account``'s active key."""

    CODE: ClassVar[int] = 3
    NAME: ClassVar[str] = "updatekey"
    account: AccountName
    key: PublicKey

    def actors(self) -> tuple[AccountName, ...]:
        return (self.account,)


@dataclass(frozen=True, slots=True)
class Stake:
    """Lock liquid tokens as stake, which is voting weight."""

    CODE: ClassVar[int] = 4
    NAME: ClassVar[str] = "stake"
    account: AccountName
    amount: int

    def actors(self) -> tuple[AccountName, ...]:
        return (self.account,)


@dataclass(frozen=True, slots=True)
class Unstake:
    """Start unbonding stake; it becomes liquid after the chain's unbonding delay."""

    CODE: ClassVar[int] = 5
    NAME: ClassVar[str] = "unstake"
    account: AccountName
    amount: int

    def actors(self) -> tuple[AccountName, ...]:
        return (self.account,)


@dataclass(frozen=True, slots=True)
class RegProducer:
    """Register (or update) ``account`` as a producer candidate with a signing key."""

    CODE: ClassVar[int] = 6
    NAME: ClassVar[str] = "regproducer"
    account: AccountName
    key: PublicKey
    url: str = ""

    def actors(self) -> tuple[AccountName, ...]:
        return (self.account,)


@dataclass(frozen=True, slots=True)
class ApproveProducer:
    """Admit a registered candidate to elections (governance accounts only)."""

    CODE: ClassVar[int] = 7
    NAME: ClassVar[str] = "approveproducer"
    governor: AccountName
    producer: AccountName

    def actors(self) -> tuple[AccountName, ...]:
        return (self.governor,)


@dataclass(frozen=True, slots=True)
class UnregProducer:
    """Withdraw ``account`` from elections."""

    CODE: ClassVar[int] = 8
    NAME: ClassVar[str] = "unregproducer"
    account: AccountName

    def actors(self) -> tuple[AccountName, ...]:
        return (self.account,)


@dataclass(frozen=True, slots=True)
class VoteProducer:
    """Replace ``voter``'s votes with ``producers`` (sorted, unique, at most 30)."""

    CODE: ClassVar[int] = 9
    NAME: ClassVar[str] = "voteproducer"
    voter: AccountName
    producers: tuple[AccountName, ...]

    def actors(self) -> tuple[AccountName, ...]:
        return (self.voter,)


@dataclass(frozen=True, slots=True)
class SetCode:
    """Deploy WebAssembly ``code`` (and its ABI, JSON text, may be empty) to ``account``."""

    CODE: ClassVar[int] = 10
    NAME: ClassVar[str] = "setcode"
    account: AccountName
    code: bytes
    abi: str = ""

    def actors(self) -> tuple[AccountName, ...]:
        return (self.account,)


@dataclass(frozen=True, slots=True)
class Call:
    """Run ``contract``'s action ``action_name`` on ``data``, authorized by the accounts in
    ``authorization`` (each signs the transaction)."""

    CODE: ClassVar[int] = 11
    NAME: ClassVar[str] = "call"
    contract: AccountName
    action_name: str
    authorization: tuple[AccountName, ...]
    data: bytes

    def actors(self) -> tuple[AccountName, ...]:
        return self.authorization


@dataclass(frozen=True, slots=True)
class AllowCode:
    """Allow (or stop allowing) ``account`` to deploy code on a chain where deploying needs
    approval (governance accounts only)."""

    CODE: ClassVar[int] = 12
    NAME: ClassVar[str] = "allowcode"
    governor: AccountName
    account: AccountName
    allowed: bool

    def actors(self) -> tuple[AccountName, ...]:
        return (self.governor,)


Action = (
    Transfer
    | NewAccount
    | UpdateKey
    | Stake
    | Unstake
    | RegProducer
    | ApproveProducer
    | UnregProducer
    | VoteProducer
    | SetCode
    | Call
    | AllowCode
)

ACTION_TYPES: tuple[type[Action], ...] = (
    Transfer,
    NewAccount,
    UpdateKey,
    Stake,
    Unstake,
    RegProducer,
    ApproveProducer,
    UnregProducer,
    VoteProducer,
    SetCode,
    Call,
    AllowCode,
)
_BY_CODE: dict[int, type[Action]] = {t.CODE: t for t in ACTION_TYPES}
_BY_NAME: dict[str, type[Action]] = {t.NAME: t for t in ACTION_TYPES}


# --- field kinds: how each field is checked on the wire and shown in JSON -----------------


def _wire_name(value: Any, what: str) -> Any:
    if type(value) is not str or _NAME_FULLMATCH(value) is None:
        raise EncodingError(what, "expected an account name")
    return AccountName(value)


def _wire_amount(value: Any, what: str) -> Any:
    return check_int(value, 1, MAX_AMOUNT, what)


def _wire_key(value: Any, what: str) -> Any:
    raw = check_bytes(value, 33, what)
    try:
        return check_public_key(raw)
    except ChainError as err:
        raise EncodingError(what, str(err)) from err


def _wire_text(limit: int) -> Callable[[Any, str], Any]:
    def check(value: Any, what: str) -> Any:
        return check_str(value, limit, what)

    return check


def _wire_names(value: Any, what: str) -> Any:
    items = check_list(value, MAX_VOTES, what)
    return tuple(_wire_name(v, what) for v in items)


def _wire_blob(lo: int, hi: int) -> Callable[[Any, str], Any]:
    def check(value: Any, what: str) -> Any:
        if type(value) is not bytes or not lo <= len(value) <= hi:
            raise EncodingError(what, f"expected {lo} to {hi} bytes")
        return value

    return check


def _wire_authorization(value: Any, what: str) -> Any:
    if type(value) is not list or not 1 <= len(value) <= MAX_AUTHORIZATION:
        raise EncodingError(what, f"expected 1 to {MAX_AUTHORIZATION} account names")
    names = tuple(_wire_name(v, what) for v in value)
    if len(set(names)) != len(names):
        raise EncodingError(what, "names an account twice")
    return names


def _wire_bool(value: Any, what: str) -> Any:
    if type(value) is not bool:
        raise EncodingError(what, "expected true or false")
    return value


_KINDS: dict[str, Callable[[Any, str], Any]] = {
    "sender": _wire_name,
    "recipient": _wire_name,
    "creator": _wire_name,
    "name": _wire_name,
    "account": _wire_name,
    "governor": _wire_name,
    "producer": _wire_name,
    "voter": _wire_name,
    "amount": _wire_amount,
    "key": _wire_key,
    "memo": _wire_text(MAX_MEMO),
    "url": _wire_text(MAX_URL),
    "producers": _wire_names,
    "code": _wire_blob(1, MAX_WIRE_CODE),
    "abi": _wire_text(MAX_ABI),
    "contract": _wire_name,
    "action_name": _wire_name,
    "authorization": _wire_authorization,
    "data": _wire_blob(0, MAX_CALL_DATA),
    "allowed": _wire_bool,
}
# Fields that JSON shows as hex (msgpack carries them as bytes).
_HEX_FIELDS = frozenset({"code", "data"})
# Fields JSON may leave out, and what they then are.
_JSON_DEFAULTS: dict[str, Any] = {"memo": "", "url": "", "abi": ""}


# Per action code: the class and, per field, its name, checker and error label. Built once:
# decoding runs for every transaction of every block.
_SPECS: dict[int, tuple[type[Action], tuple[tuple[str, Callable[[Any, str], Any], str], ...]]] = {
    t.CODE: (t, tuple((f.name, _KINDS[f.name], f"{t.NAME}.{f.name}") for f in fields(t)))
    for t in ACTION_TYPES
}


def encode_action(action: Action) -> list[Any]:
    out: list[Any] = [action.CODE]
    for name, _, _ in _SPECS[action.CODE][1]:
        value = getattr(action, name)
        out.append(list(value) if isinstance(value, tuple) else value)
    return out


def _decode_transfer(raw: list[Any]) -> Transfer:
    """decode_action for a transfer, written out: nearly every transaction is one, and this
    takes 2.5 microseconds where the generic path takes 8 (measured)."""
    if len(raw) != 5:
        raise EncodingError("transfer", "expected 4 fields")
    _, sender, recipient, amount, memo = raw
    if type(sender) is not str or _NAME_FULLMATCH(sender) is None:
        raise EncodingError("transfer.sender", "expected an account name")
    if type(recipient) is not str or _NAME_FULLMATCH(recipient) is None:
        raise EncodingError("transfer.recipient", "expected an account name")
    if type(amount) is not int or not 1 <= amount <= MAX_AMOUNT:
        raise EncodingError("transfer.amount", f"expected an integer in [1, {MAX_AMOUNT}]")
    if type(memo) is not str or len(memo) > MAX_MEMO:
        raise EncodingError("transfer.memo", f"expected a string of at most {MAX_MEMO} characters")
    return Transfer(AccountName(sender), AccountName(recipient), amount, memo)


def decode_action(raw: Any) -> Action:
    if type(raw) is list and raw and raw[0] == Transfer.CODE and type(raw[0]) is int:
        return _decode_transfer(raw)
    if type(raw) is not list or not raw or type(raw[0]) is not int:
        raise EncodingError("action", "expected [code, fields...]")
    spec = _SPECS.get(raw[0])
    if spec is None:
        raise EncodingError("action", f"unknown action code {raw[0]}")
    cls, checks = spec
    if len(raw) != len(checks) + 1:
        raise EncodingError(cls.NAME, f"expected {len(checks)} fields")
    return cls(*[check(v, what) for (_, check, what), v in zip(checks, raw[1:], strict=True)])


def action_to_json(action: Action) -> dict[str, Any]:
    data: dict[str, Any] = {}
    for f in fields(action):
        value = getattr(action, f.name)
        if f.name == "key":
            value = public_key_to_text(value)
        elif f.name in _HEX_FIELDS:
            value = value.hex()
        elif isinstance(value, tuple):
            value = list(value)
        data[f.name] = value
    return {"action": action.NAME, "data": data}


def action_from_json(obj: Any) -> Action:
    """Build an action from its JSON form; raises EncodingError naming the bad field."""
    if not isinstance(obj, dict) or not isinstance(obj.get("data"), dict):
        raise EncodingError("action", 'expected {"action": name, "data": {...}}')
    cls = _BY_NAME.get(obj.get("action"))  # type: ignore[arg-type]
    if cls is None:
        raise EncodingError("action", f"unknown action {obj.get('action')!r}")
    data = obj["data"]
    wire: list[Any] = [cls.CODE]
    for f in fields(cls):
        if f.name not in data:
            if f.name in _JSON_DEFAULTS:
                wire.append(_JSON_DEFAULTS[f.name])
                continue
            raise EncodingError(f"{cls.NAME}.{f.name}", "missing")
        value = data[f.name]
        if f.name == "key":
            try:
                value = public_key_from_text(value)
            except ChainError as err:
                raise EncodingError(f"{cls.NAME}.key", str(err)) from err
        elif f.name in _HEX_FIELDS:
            value = _from_hex(value, f"{cls.NAME}.{f.name}")
        wire.append(value)
    return decode_action(wire)


def _from_hex(value: Any, what: str) -> bytes:
    if not isinstance(value, str):
        raise EncodingError(what, "expected a hex string")
    try:
        return bytes.fromhex(value)
    except ValueError as err:
        raise EncodingError(what, "expected a hex string") from err
