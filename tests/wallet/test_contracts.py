"""The wallet's contract commands: ABI-checked deployment, action data encoded by the
contract's ABI, and each mistake named in one line (a WalletError or EncodingError)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bor_client.results import AbiResult
from chain.core.primitives.errors import EncodingError
from tests.node.api import kv_contract
from wallet import contracts
from wallet.cli import main
from wallet.errors import WalletError


class AbiNode:
    """Stands in for the SDK's client: answers get_abi with the kv contract's ABI."""

    def __init__(self, abi: str | None) -> None:
        self.abi = abi
        self.asked: list[str] = []

    def get_abi(self, account: str) -> AbiResult:
        self.asked.append(account)
        abi = None if self.abi is None else json.loads(self.abi)
        antelope = {"version": "eosio::abi/1.2"}  # Antelope's form: the wallet reads BoR's
        return AbiResult(account, account, antelope, abi)


def test_setcode_reads_the_module_and_checks_the_abi(tmp_path: Path) -> None:
    """set code takes a wasm file and its ABI; a file that is no module, or an ABI with an
    unknown type, is refused before anything is signed."""
    wasm = tmp_path / "kv.wasm"
    wasm.write_bytes(kv_contract.wasm())
    abi = tmp_path / "kv.abi.json"
    abi.write_text(kv_contract.ABI)
    action = contracts.setcode_action("alice", str(wasm), str(abi))
    assert action.code == kv_contract.wasm() and action.abi == kv_contract.ABI
    abi.write_text(
        json.dumps(
            {
                "version": "bor::abi/1",
                "structs": [{"name": "a", "fields": [{"name": "x", "type": "f32"}]}],
            }
        )
    )
    with pytest.raises(EncodingError, match="unknown type 'f32'"):
        contracts.setcode_action("alice", str(wasm), str(abi))
    with pytest.raises(WalletError, match="not a WebAssembly module"):
        contracts.setcode_action("alice", str(abi), None)


def test_push_action_encodes_json_with_the_contracts_abi() -> None:
    """push action encodes its JSON with the ABI fetched by get_abi, authorized by --auth."""
    node = AbiNode(kv_contract.ABI)
    call = contracts.call_action(
        node, "alice", "put", '{"id": 1, "owner": "bob", "amount": 2}', "bob,carol", False
    )
    assert call.authorization == ("bob", "carol")
    assert call.data == (1).to_bytes(8, "little") + bytes.fromhex("0000000000000e3d") + (
        2
    ).to_bytes(8, "little")
    assert node.asked == ["alice"]
    with pytest.raises(EncodingError, match=r"put\.owner: missing"):
        contracts.call_action(node, "alice", "put", '{"id": 1, "amount": 2}', "bob", False)
    with pytest.raises(WalletError, match="no ABI"):
        contracts.call_action(AbiNode(None), "alice", "put", "{}", "bob", False)
    raw = contracts.call_action(AbiNode(None), "alice", "put", "0102", "bob", True)
    assert raw.data == b"\x01\x02"
    with pytest.raises(WalletError, match="--auth"):
        contracts.authorizers("bob,bob")


def test_table_and_call_bodies() -> None:
    """get table and call build the RPC's bodies: bounds, reverse and payers only when
    given, hex when asked."""
    body = contracts.table_body("alice", "alice", "kv", "bob", None, 5, True, False)
    assert body == {
        "code": "alice",
        "scope": "alice",
        "table": "kv",
        "limit": 5,
        "json": True,
        "index_position": "secondary",
        "lower_bound": "bob",
    }
    downwards = contracts.table_body("a", "a", "kv", None, "9", 5, False, True, reverse=True)
    assert downwards | {"show_payer": True} == contracts.table_body(
        "a", "a", "kv", None, "9", 5, False, True, reverse=True, show_payer=True
    )
    assert (downwards["reverse"], downwards["json"], downwards["upper_bound"]) == (True, False, "9")
    assert contracts.call_body("alice", "get", '{"id": 1}', "bob", False) == {
        "contract": "alice",
        "action": "get",
        "data": {"id": 1},
        "authorization": ["bob"],
    }


def test_a_bad_command_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A wallet command with bad contract input exits 1 with one line on stderr."""
    assert main(["--url", "http://127.0.0.1:9", "push", "action", "alice", "put"]) == 1
    assert main(["set", "code", "alice", str(tmp_path / "missing.wasm")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and err[0].startswith("bor-wallet: usage: push action")
    assert "cannot read the module" in err[1]


@pytest.mark.parametrize(("flags", "allowed"), [([], True), (["--revoke"], False)])
def test_allowcode_sends_the_governors_allowcode(
    monkeypatch: pytest.MonkeyPatch, flags: list[str], allowed: bool
) -> None:
    """`allowcode GOVERNOR ACCOUNT` sends one allowcode action; --revoke sends allowed=false."""
    sent: list[Any] = []

    def fake_send(args: Any, actions: list[Any]) -> int:
        sent.extend(actions)
        return 0

    monkeypatch.setattr("wallet.cli._send", fake_send)
    assert main(["allowcode", "bor.gov", "token", *flags]) == 0
    assert [(a.NAME, a.governor, a.account, a.allowed) for a in sent] == [
        ("allowcode", "bor.gov", "token", allowed)
    ]
