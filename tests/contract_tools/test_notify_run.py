"""The example token's notifications (eosio.token's ``require_recipient(from)`` and ``(to)``)
reaching a hand-written AssemblyScript handler, through the node's real runtime: who runs,
in what order, with which code, on whose fuel, and a refusing handler failing the transfer."""

from __future__ import annotations

from pathlib import Path

import pytest

from chain.core.execution.contracts import TxTrace, name_to_u64
from chain.core.primitives import schema
from chain.core.primitives.errors import ContractError
from chain.vm.runtime import ACTION_FUEL
from contract_tools.build import Built, build
from contract_tools.testing import LocalChain
from tests.contract_tools.conftest import require_toolchain
from tests.contract_tools.test_examples_run import symbol_code

LISTENER = Path(__file__).parent / "contracts" / "listener"


@pytest.fixture(scope="session")
def listener(tmp_path_factory: pytest.TempPathFactory) -> Built:
    require_toolchain()
    directory = tmp_path_factory.mktemp("contracts") / "listener"
    directory.mkdir()
    for name in ("listener.ts", "abi.json"):
        (directory / name).write_text((LISTENER / name).read_text())
    return build(directory)


@pytest.fixture
def shop(token: Built, listener: Built) -> LocalChain:
    """The token at token, with TOK created and 100 issued to alice, and the listener at
    shop (bob has no contract)."""
    tok = LocalChain()
    tok.create_accounts("alice", "bob")
    tok.deploy("token", token)
    tok.deploy("shop", listener)
    tok.push("token", "create", {"issuer": "alice", "maximum_supply": "1000.0000 TOK"}, "token")
    tok.push("token", "issue", {"to": "alice", "quantity": "100.0000 TOK", "memo": ""}, "alice")
    return tok


def incoming(tok: LocalChain) -> tuple[int, int] | None:
    """The shop's (count, total) of TOK received from the token contract."""
    key = schema.row_key(
        name_to_u64("shop"), name_to_u64("token"), name_to_u64("incoming"), symbol_code("TOK")
    )
    raw = tok.view.raw(key)
    if raw is None:
        return None
    row = raw[8:]  # after the payer
    return int.from_bytes(row[8:16], "little"), int.from_bytes(row[16:24], "little", signed=True)


def transfer(tok: LocalChain, sender: str, to: str, amount: str, memo: str = "") -> TxTrace:
    args = {"from": sender, "to": to, "quantity": amount, "memo": memo}
    return tok.push("token", "transfer", args, sender).trace


def test_a_transfer_notifies_sender_and_receiver_whose_handler_counts_it(
    shop: LocalChain,
) -> None:
    """alice -> shop: the token runs, then alice (no contract: recorded) and shop (its
    handler, code = token) one level deeper; the shop counts what it received, on the
    transaction's fuel; paying out from the shop is no income."""
    trace = transfer(shop, "alice", "shop", "2.5000 TOK")
    assert [(a.receiver, a.call.contract, a.call.action, a.depth) for a in trace.actions] == [
        ("token", "token", "transfer", 0),
        ("alice", "token", "transfer", 1),
        ("shop", "token", "transfer", 1),
    ]
    token, alice, handler = trace.actions
    assert alice.fuel == 0 and handler.fuel > ACTION_FUEL
    assert trace.fuel == token.fuel + handler.fuel
    assert handler.console == "received 25000" and handler.events == []
    assert incoming(shop) == (1, 25_000)
    transfer(shop, "alice", "shop", "1.0000 TOK")
    transfer(shop, "shop", "bob", "0.5000 TOK")
    assert incoming(shop) == (2, 35_000)


def test_a_refusing_handler_fails_the_transfer(shop: LocalChain) -> None:
    """The shop's assertion in its handler fails the whole transfer: no balance moves."""
    with pytest.raises(ContractError, match=r"^shop \(notified of token::transfer\): .*refused"):
        transfer(shop, "alice", "shop", "1.0000 TOK", "refuse")
    assert shop.row("token", "shop", "accounts", symbol_code("TOK")) is None
    assert shop.row("token", "alice", "accounts", symbol_code("TOK")) == {"balance": "100.0000 TOK"}
    assert incoming(shop) is None
