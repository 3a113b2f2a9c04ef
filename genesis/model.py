"""The genesis file: a JSON document, validated field by field, hashed into the chain id.

The chain id is SHA-256 of the canonical msgpack encoding of the validated genesis, so JSON
formatting (spaces, key order) does not change it but any value does.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from chain.core.consensus.block import ProducerKey, Schedule
from chain.core.consensus.finality import FINALITY_DPOS, FINALITY_MODES, FINALITY_VOTES
from chain.core.consensus.qc import MAX_FINALIZERS
from chain.core.execution.sizes import min_block_bytes
from chain.core.execution.state import Account, Producer
from chain.core.initial_state import InitialState
from chain.core.primitives.crypto import public_key_from_text, public_key_to_text, sha256
from chain.core.primitives.encoding import pack
from chain.core.primitives.errors import ChainError
from chain.core.primitives.params import (
    CONTRACT_PARAMS,
    DEFAULT_MAX_BLOCK_BYTES,
    MAX_BLOCK_BYTES,
    ChainParams,
    slot_of_ms,
)
from chain.core.primitives.types import MAX_AMOUNT, AccountName, PublicKey, is_valid_name
from genesis.errors import GenesisError


@dataclass(frozen=True, slots=True)
class GenesisAccount:
    name: AccountName
    key: PublicKey
    balance: int


@dataclass(frozen=True, slots=True)
class GenesisProducer:
    name: AccountName
    key: PublicKey


@dataclass(frozen=True, slots=True)
class Genesis:
    initial_timestamp: datetime
    params: ChainParams
    token_supply: int
    accounts: tuple[GenesisAccount, ...]
    initial_producers: tuple[GenesisProducer, ...]

    @property
    def chain_id(self) -> bytes:
        return sha256(pack(self._canonical()))

    def _canonical(self) -> list[Any]:
        params = [getattr(self.params, f.name) for f in fields(self.params) if f.name not in _APART]
        # A dpos chain hashes as it did before finality by votes existed: its id is unchanged.
        finality: list[Any] = []
        if self.params.finality != FINALITY_DPOS:
            finality = [[self.params.finality, [list(f) for f in self.params.finalizers]]]
        # Likewise a chain at the default block size limit keeps the id it had before the
        # limit existed; another limit is another chain.
        block_bytes: list[Any] = []
        if self.params.max_block_bytes != DEFAULT_MAX_BLOCK_BYTES:
            block_bytes = [["max_block_bytes", self.params.max_block_bytes]]
        # And a chain at the default contract limits keeps the id it had before contracts.
        contracts: list[Any] = []
        defaults = ChainParams()
        changed = [
            [name, getattr(self.params, name)]
            for name in CONTRACT_PARAMS
            if getattr(self.params, name) != getattr(defaults, name)
        ]
        if changed:
            contracts = [["contracts", changed]]
        return [
            "bor-genesis-v1",
            int(self.initial_timestamp.timestamp() * 1000),
            [list(p) if isinstance(p, tuple) else p for p in params],
            self.token_supply,
            [[a.name, a.key, a.balance] for a in self.accounts],
            [[p.name, p.key] for p in self.initial_producers],
            *finality,
            *block_bytes,
            *contracts,
        ]

    def to_initial_state(self) -> InitialState:
        schedule = Schedule(0, tuple(ProducerKey(p.name, p.key) for p in self.initial_producers))
        return InitialState(
            chain_id=self.chain_id,
            params=self.params,
            genesis_slot=slot_of_ms(int(self.initial_timestamp.timestamp() * 1000)),
            accounts=tuple(Account(a.name, a.key, a.balance) for a in self.accounts),
            producers=tuple(Producer(p.name, p.key, approved=True) for p in self.initial_producers),
            schedule=schedule,
        )

    def to_json(self) -> dict[str, Any]:
        p = self.params
        return {
            "initial_timestamp": self.initial_timestamp.strftime("%Y-%m-%dT%H:%M:%S.")
            + f"{self.initial_timestamp.microsecond // 1000:03d}Z",
            "token": {
                "symbol": p.token_symbol,
                "precision": p.token_precision,
                "supply": self.token_supply,
            },
            "governance": list(p.governance),
            "chain_params": {
                "schedule_size": p.schedule_size,
                "blocks_per_turn": p.blocks_per_turn,
                "max_tx_lifetime_s": p.max_tx_lifetime_s,
                "max_tx_bytes": p.max_tx_bytes,
                "max_block_txs": p.max_block_txs,
                "max_block_bytes": p.max_block_bytes,
                "unbond_delay_s": p.unbond_delay_s,
                "election_interval_blocks": p.election_interval_blocks,
                "finality": p.finality,
                # Written only where they differ from the defaults, as the chain id hashes them.
                **{
                    name: getattr(p, name)
                    for name in CONTRACT_PARAMS
                    if getattr(p, name) != getattr(_DEFAULTS, name)
                },
            },
            "accounts": [
                {"name": a.name, "key": public_key_to_text(a.key), "balance": a.balance}
                for a in self.accounts
            ],
            "initial_producers": [
                {"name": x.name, "key": public_key_to_text(x.key)} for x in self.initial_producers
            ],
            **(
                {
                    "finalizers": [
                        {"name": n, "key": public_key_to_text(k), "weight": w}
                        for n, k, w in p.finalizers
                    ]
                }
                if p.finalizers
                else {}
            ),
        }


# --- validation ---------------------------------------------------------------------------

_DEFAULTS = ChainParams()
# Hashed apart, so that chains made before these parameters existed keep their ids.
_APART = ("finality", "finalizers", "max_block_bytes", *CONTRACT_PARAMS)
# What a genesis file without chain_params.finality gets: chains made before finality by
# votes existed keep their rule and their chain id. New chains finalize by votes because the
# genesis generator (``genesis.devnet``) writes it.
DEFAULT_FINALITY = FINALITY_DPOS


def _field(obj: dict[str, Any], name: str, path: str) -> Any:
    if not isinstance(obj, dict) or name not in obj:
        raise GenesisError(f"{path}{name}", "missing")
    return obj[name]


def _int(value: Any, field: str, lo: int, hi: int) -> int:
    if type(value) is not int or not lo <= value <= hi:
        raise GenesisError(field, f"must be an integer in [{lo}, {hi}]")
    return value


def _name(value: Any, field: str) -> AccountName:
    if not isinstance(value, str) or not is_valid_name(value):
        raise GenesisError(field, f"{value!r} is not an account name (1-12 of a-z, 1-5, '.')")
    return AccountName(value)


def _key(value: Any, field: str) -> PublicKey:
    try:
        return public_key_from_text(value)
    except ChainError as err:
        raise GenesisError(field, str(err)) from err


def _timestamp(value: Any) -> datetime:
    if not isinstance(value, str):
        raise GenesisError("initial_timestamp", "must be an ISO-8601 UTC time string")
    try:
        ts = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as err:
        raise GenesisError("initial_timestamp", f"not an ISO-8601 time: {value!r}") from err
    if ts.tzinfo is None:
        ts = ts.replace(tzinfo=UTC)
    return ts.astimezone(UTC)


def _params(obj: dict[str, Any], governance: tuple[AccountName, ...]) -> ChainParams:
    token = _field(obj, "token", "")
    symbol = _field(token, "symbol", "token.")
    if not isinstance(symbol, str) or not symbol.isalpha() or not symbol.isupper():
        raise GenesisError("token.symbol", "must be 1-7 upper-case letters")
    if not 1 <= len(symbol) <= 7:
        raise GenesisError("token.symbol", "must be 1-7 upper-case letters")
    precision = _int(_field(token, "precision", "token."), "token.precision", 0, 18)
    cp = obj.get("chain_params", {})
    if not isinstance(cp, dict):
        raise GenesisError("chain_params", "must be an object")
    defaults = ChainParams()
    limits = {
        "schedule_size": (1, 125),
        "blocks_per_turn": (1, 1000),
        "max_tx_lifetime_s": (1, 3600),
        "max_tx_bytes": (256, 1 << 20),
        "max_block_txs": (1, 10_000),
        "unbond_delay_s": (0, 10 * 365 * 86400),
        "election_interval_blocks": (1, 1_000_000),
    }
    unknown = set(cp) - set(limits) - {"finality", "max_block_bytes", *CONTRACT_PARAMS}
    if unknown:
        raise GenesisError(f"chain_params.{sorted(unknown)[0]}", "unknown parameter")
    values: dict[str, Any] = {
        k: _int(cp.get(k, getattr(defaults, k)), f"chain_params.{k}", lo, hi)
        for k, (lo, hi) in limits.items()
    }
    # Every transaction the chain admits must fit in a block, and every block in a frame.
    lowest = min_block_bytes(values["max_tx_bytes"])
    values["max_block_bytes"] = _int(
        cp.get("max_block_bytes", defaults.max_block_bytes),
        "chain_params.max_block_bytes",
        lowest,
        MAX_BLOCK_BYTES,
    )
    finality = cp.get("finality", DEFAULT_FINALITY)
    if finality not in FINALITY_MODES:
        raise GenesisError("chain_params.finality", f"must be one of {', '.join(FINALITY_MODES)}")
    return ChainParams(
        token_symbol=symbol,
        token_precision=precision,
        governance=governance,
        finality=finality,
        finalizers=_finalizers(obj.get("finalizers", []), finality),
        **values,
        **_contract_params(cp, defaults),
    )


# The contract parameters' ranges. Code up to 1 MiB: a setcode transaction (max_tx_bytes +
# max_code_bytes) then stays well inside a block (MAX_BLOCK_BYTES); a module larger than
# that is no contract. Memory up to 16 MiB and fuel up to 10^10 per transaction keep one
# transaction's work within seconds; the block's fuel holds at least one transaction's.
_CONTRACT_LIMITS = {
    "max_code_bytes": (1024, 1 << 20),
    "max_memory_pages": (1, 256),
    "max_tx_fuel": (100_000, 10_000_000_000),
    "max_inline_depth": (0, 16),
    "max_ram_bytes": (1024, 1 << 34),
}
MAX_BLOCK_FUEL = 1_000_000_000_000
DEPLOY_RULES = ("open", "approved")


def _contract_params(cp: dict[str, Any], defaults: ChainParams) -> dict[str, Any]:
    values: dict[str, Any] = {
        k: _int(cp.get(k, getattr(defaults, k)), f"chain_params.{k}", lo, hi)
        for k, (lo, hi) in _CONTRACT_LIMITS.items()
    }
    values["max_block_fuel"] = _int(
        cp.get("max_block_fuel", defaults.max_block_fuel),
        "chain_params.max_block_fuel",
        values["max_tx_fuel"],  # else a transaction allowed its fuel would fit no block
        MAX_BLOCK_FUEL,
    )
    deploy = cp.get("contract_deploy", defaults.contract_deploy)
    if deploy not in DEPLOY_RULES:
        raise GenesisError(
            "chain_params.contract_deploy", f"must be one of {', '.join(DEPLOY_RULES)}"
        )
    values["contract_deploy"] = deploy
    return values


def _finalizers(raw: Any, finality: str) -> tuple[tuple[AccountName, bytes, int], ...]:
    """Finalizers named in genesis; none means the active producers, one vote each."""
    if not isinstance(raw, list) or len(raw) > MAX_FINALIZERS:
        raise GenesisError("finalizers", f"must be a list of at most {MAX_FINALIZERS}")
    if raw and finality != FINALITY_VOTES:
        raise GenesisError("finalizers", "only a chain with chain_params.finality = votes has any")
    out: list[tuple[AccountName, bytes, int]] = []
    for i, f in enumerate(raw):
        where = f"finalizers[{i}]"
        name = _name(_field(f, "name", f"{where}."), f"{where}.name")
        key = _key(_field(f, "key", f"{where}."), f"{where}.key")
        weight = _int(f.get("weight", 1), f"{where}.weight", 1, 1_000_000)
        if any(x[0] == name for x in out):
            raise GenesisError(f"{where}.name", f"duplicate finalizer {name!r}")
        if any(x[1] == key for x in out):
            raise GenesisError(f"{where}.key", "another finalizer has this key")
        out.append((name, key, weight))
    return tuple(out)


def parse_genesis(obj: Any) -> Genesis:
    """Validate a parsed genesis document; raises GenesisError naming the bad field."""
    if not isinstance(obj, dict):
        raise GenesisError("(root)", "must be a JSON object")
    ts = _timestamp(_field(obj, "initial_timestamp", ""))
    raw_accounts = _field(obj, "accounts", "")
    if not isinstance(raw_accounts, list) or not raw_accounts:
        raise GenesisError("accounts", "must be a non-empty list")
    accounts: list[GenesisAccount] = []
    seen: set[str] = set()
    for i, a in enumerate(raw_accounts):
        where = f"accounts[{i}]"
        name = _name(_field(a, "name", f"{where}."), f"{where}.name")
        if name in seen:
            raise GenesisError(f"{where}.name", f"duplicate account {name!r}")
        seen.add(name)
        key = _key(_field(a, "key", f"{where}."), f"{where}.key")
        balance = _int(a.get("balance", 0), f"{where}.balance", 0, MAX_AMOUNT)
        accounts.append(GenesisAccount(name, key, balance))
    raw_gov = _field(obj, "governance", "")
    if not isinstance(raw_gov, list) or not raw_gov:
        raise GenesisError("governance", "must name at least one account")
    governance = tuple(_name(g, f"governance[{i}]") for i, g in enumerate(raw_gov))
    for i, g in enumerate(governance):
        if g not in seen:
            raise GenesisError(f"governance[{i}]", f"{g!r} is not a genesis account")
    params = _params(obj, governance)
    supply = _int(_field(obj["token"], "supply", "token."), "token.supply", 0, MAX_AMOUNT)
    total = sum(a.balance for a in accounts)
    if total != supply:
        raise GenesisError("token.supply", f"is {supply} but account balances add up to {total}")
    raw_producers = _field(obj, "initial_producers", "")
    if not isinstance(raw_producers, list) or not raw_producers:
        raise GenesisError("initial_producers", "must be a non-empty list")
    if len(raw_producers) > params.schedule_size:
        raise GenesisError(
            "initial_producers", f"more than chain_params.schedule_size={params.schedule_size}"
        )
    producers: list[GenesisProducer] = []
    for i, p in enumerate(raw_producers):
        where = f"initial_producers[{i}]"
        name = _name(_field(p, "name", f"{where}."), f"{where}.name")
        if name not in seen:
            raise GenesisError(f"{where}.name", f"{name!r} is not a genesis account")
        if any(x.name == name for x in producers):
            raise GenesisError(f"{where}.name", f"duplicate producer {name!r}")
        producers.append(GenesisProducer(name, _key(_field(p, "key", f"{where}."), f"{where}.key")))
    return Genesis(
        ts, params, supply, tuple(accounts), tuple(sorted(producers, key=lambda p: p.name))
    )


def load_genesis(path: str | Path) -> Genesis:
    try:
        text = Path(path).read_text()
    except OSError as err:
        raise GenesisError("(file)", f"cannot read {path}: {err.strerror}") from err
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as err:
        raise GenesisError("(file)", f"not valid JSON: {err}") from err
    return parse_genesis(obj)
