"""The examples, built from their annotated sources, run on contract_tools.testing's local
chain (the node's runtime and setcode) with their arguments encoded from JSON by their own
generated ABI, so code and ABI must agree."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from chain.abi import Abi
from chain.core.execution.state import StateView
from chain.core.primitives.errors import ContractError
from contract_tools.build import Built
from contract_tools.testing import BLOCK_TIME_S, LocalChain, Result


class Deployed:
    """One example deployed on a local chain, and the calls its tests make."""

    def __init__(self, built: Built, contract: str, accounts: list[str]) -> None:
        self.chain = LocalChain()
        self.chain.create_accounts(*accounts)
        self.chain.deploy(contract, built)
        self.contract = contract

    def push(self, action: str, args: dict[str, Any], *auth: str) -> Result:
        return self.chain.push(self.contract, action, args, list(auth))

    def read(self, action: str, args: dict[str, Any]) -> Any:
        return self.chain.call(self.contract, action, args)

    def row(self, scope: str | int, table: str, primary: int) -> Any:
        return self.chain.row(self.contract, scope, table, primary)

    def events(self, result: Result) -> list[tuple[str, Any]]:
        return result.events

    @property
    def view(self) -> StateView:
        return self.chain.view

    @property
    def abi(self) -> Abi:
        return self.chain.abis[self.contract]


def symbol_code(code: str) -> int:
    return int.from_bytes(code.encode().ljust(8, b"\0"), "little")


@pytest.fixture
def tok(token: Built) -> Deployed:
    return Deployed(token, "token", ["alice", "bob", "carol"])


def test_token_create_issue_transfer(tok: Deployed) -> None:
    """create, issue and transfer move balances in the accounts rows, update the supply in
    stat, and emit the issue and transfer events, as eosio.token does."""
    tok.push("create", {"issuer": "alice", "maximum_supply": "1000.0000 TOK"}, "token")
    trace = tok.push("issue", {"to": "alice", "quantity": "100.0000 TOK", "memo": "m"}, "alice")
    assert tok.events(trace) == [
        ("issue", {"to": "alice", "quantity": "100.0000 TOK", "memo": "m"})
    ]
    trace = tok.push(
        "transfer",
        {"from": "alice", "to": "bob", "quantity": "25.5000 TOK", "memo": "rent"},
        "alice",
    )
    tok_code = symbol_code("TOK")
    assert tok.row("alice", "accounts", tok_code) == {"balance": "74.5000 TOK"}
    assert tok.row("bob", "accounts", tok_code) == {"balance": "25.5000 TOK"}
    assert tok.row(tok_code, "stat", tok_code) == {
        "supply": "100.0000 TOK", "max_supply": "1000.0000 TOK", "issuer": "alice",
    }  # fmt: skip
    assert tok.events(trace) == [
        ("transfer", {"from": "alice", "to": "bob", "quantity": "25.5000 TOK", "memo": "rent"})
    ]
    assert trace.fuel > 0


@pytest.mark.parametrize(
    ("action", "args", "auth", "reason"),
    [
        ("transfer", {"from": "alice", "to": "bob", "quantity": "500.0000 TOK", "memo": ""},
         "alice", "token::transfer: assertion failed: overdrawn balance"),
        ("transfer", {"from": "alice", "to": "bob", "quantity": "1.0000 TOK", "memo": ""},
         "bob", "missing authority of alice"),
        ("transfer", {"from": "alice", "to": "nobody", "quantity": "1.0000 TOK", "memo": ""},
         "alice", "to account does not exist"),
        ("transfer", {"from": "alice", "to": "bob", "quantity": "1.000 TOK", "memo": ""},
         "alice", "symbol precision mismatch"),
        ("transfer", {"from": "alice", "to": "bob", "quantity": "1.0000 TOK", "memo": "x" * 257},
         "alice", "memo has more than 256 bytes"),
        ("issue", {"to": "bob", "quantity": "1.0000 TOK", "memo": ""},
         "alice", "tokens can only be issued to issuer account"),
        ("issue", {"to": "alice", "quantity": "901.0000 TOK", "memo": ""},
         "alice", "quantity exceeds available supply"),
        ("create", {"issuer": "alice", "maximum_supply": "1.0000 TOK"},
         "token", "token with symbol already exists"),
    ],
)  # fmt: skip
def test_token_refuses(
    tok: Deployed, action: str, args: dict[str, Any], auth: str, reason: str
) -> None:
    """The token's checks abort the action with eosio.token's message and change nothing."""
    tok.push("create", {"issuer": "alice", "maximum_supply": "1000.0000 TOK"}, "token")
    tok.push("issue", {"to": "alice", "quantity": "100.0000 TOK", "memo": ""}, "alice")
    with pytest.raises(ContractError) as err:
        tok.push(action, args, auth)
    assert reason in err.value.reason
    assert tok.row("alice", "accounts", symbol_code("TOK")) == {"balance": "100.0000 TOK"}


def test_registry_lifecycle(registry: Built) -> None:
    """Registrars register assets, owners transfer them (the owner index follows), attest
    counts, every change is an event, and the read-only actions return owner and assets."""
    reg = Deployed(registry, "registry", ["admin", "rega", "alice", "bob"])
    reg.push("init", {"admin": "admin"}, "registry")
    trace = reg.push("addregistrar", {"account": "rega"}, "admin")
    assert reg.events(trace) == [("roleadded", {"account": "rega"})]
    digest = hashlib.sha256(b"deed").hexdigest()
    for asset_id in (1, 2):
        reg.push(
            "register",
            {
                "registrar": "rega",
                "id": asset_id,
                "owner": "alice",
                "uri": "ipfs://x",
                "hash": digest,
            },
            "rega",
        )
    trace = reg.push("transfer", {"id": 1, "from": "alice", "to": "bob"}, "alice")
    assert reg.events(trace) == [("transferred", {"id": 1, "from": "alice", "to": "bob"})]
    trace = reg.push("attest", {"id": 1, "registrar": "rega", "note": "seen"}, "rega")
    assert reg.events(trace) == [("attested", {"id": 1, "registrar": "rega", "note": "seen"})]
    row = reg.row("registry", "assets", 1)
    assert row["owner"] == "bob" and row["attestations"] == 1 and row["hash"] == digest
    assert row["registered"] == BLOCK_TIME_S * 1_000_000
    assert reg.read("ownerof", {"id": 1}) == "bob"
    assert reg.read("assetsof", {"owner": "alice"}) == [2]
    assert reg.read("assetsof", {"owner": "bob"}) == [1]


def test_registry_roles(registry: Built) -> None:
    """Only the admin appoints registrars, only registrars register, only owners transfer."""
    reg = Deployed(registry, "registry", ["admin", "rega", "alice", "bob"])
    reg.push("init", {"admin": "admin"}, "registry")
    args = {"registrar": "rega", "id": 1, "owner": "alice", "uri": "u", "hash": "00" * 32}
    with pytest.raises(ContractError, match="missing authority of admin"):
        reg.push("addregistrar", {"account": "rega"}, "rega")
    with pytest.raises(ContractError, match="not a registrar"):
        reg.push("register", args, "rega")
    reg.push("addregistrar", {"account": "rega"}, "admin")
    reg.push("register", args, "rega")
    with pytest.raises(ContractError, match="from does not own the asset"):
        reg.push("transfer", {"id": 1, "from": "bob", "to": "alice"}, "bob")
    trace = reg.push("rmregistrar", {"account": "rega"}, "admin")
    assert reg.events(trace) == [("roleremoved", {"account": "rega"})]
    with pytest.raises(ContractError, match="not a registrar"):
        reg.push("attest", {"id": 1, "registrar": "rega", "note": ""}, "rega")
