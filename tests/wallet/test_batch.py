"""``bor-wallet push FILE`` of many transactions: the file's three forms, batches the node
takes, one line per transaction and a failing exit when any was refused."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

from bor_client.client import Client
from bor_client.errors import Busy
from wallet import batch
from wallet.cli import main
from wallet.errors import WalletError


def _tx(n: int, size: int = 1) -> dict[str, Any]:
    return {"packed_trx": f"{n:04x}" * size, "signatures": ["00" * 65]}


def _id(tx: dict[str, Any]) -> str:
    return hashlib.sha256(bytes.fromhex(tx["packed_trx"])).hexdigest()


class FakeNode(Client):
    """Answers push_transactions: each transaction whose packed_trx starts with "ff" is
    refused; a batch holding ``refuse_batch_with`` is refused whole with a 503."""

    def __init__(self) -> None:
        super().__init__("http://127.0.0.1:9")
        self.sent: list[tuple[str, Any]] = []
        self.refuse_batch_with = -1

    def request(self, path: str, body: Any = None) -> Any:
        assert body is not None
        self.sent.append((path, body))
        txs = body["transactions"]
        if any(tx == _tx(self.refuse_batch_with) for tx in txs):
            raise Busy(503, "busy", "too many requests in flight")
        return [
            {"error": {"code": 409, "name": "tx_duplicate", "what": "seen already"}}
            if tx["packed_trx"].startswith("ff")
            else {"transaction_id": _id(tx), "status": "included", "block_num": 7}
            for tx in txs
        ]


def test_a_file_holds_one_transaction_an_array_or_one_per_line() -> None:
    """An object is one transaction, an array or JSON lines (what -d appends) many; an empty
    file, an empty array, non-objects and text that is not JSON are refused."""
    one, two = _tx(1), _tx(2)
    assert batch.signed_transactions("f", json.dumps(one)) == one
    assert batch.signed_transactions("f", json.dumps([one, two])) == [one, two]
    lines = f"{json.dumps(one)}\n\n{json.dumps(two)}\n"
    assert batch.signed_transactions("f", lines) == [one, two]
    for text in ("", "[]", "[1]", '"x"', "{nope", f"{json.dumps(one)}\nnope"):
        with pytest.raises(WalletError):
            batch.signed_transactions("f", text)


def test_batches_hold_at_most_the_nodes_count_and_fit_its_body() -> None:
    """2,500 transactions go as 1,000, 1,000 and 500, in order; large ones are cut by bytes,
    and one larger than any batch goes alone."""
    txs = [_tx(n) for n in range(2500)]
    cut = list(batch.batches(txs))
    assert [len(b) for b in cut] == [1000, 1000, 500]
    assert [tx for b in cut for tx in b] == txs
    large = [_tx(n, 40_000) for n in range(6)]  # ~160 KB of JSON each
    assert [len(b) for b in batch.batches(large)] == [5, 1]
    huge = [_tx(1), _tx(2, 300_000), _tx(3)]
    assert [len(b) for b in batch.batches(huge)] == [1, 1, 1]


def test_each_transaction_gets_a_line_and_a_refusal_fails_the_command(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Accepted transactions print their id and block, refused ones their id and the node's
    error; a batch the node refuses whole fails each of its transactions and the next batch
    is still sent; the exit status is 1 when any failed, 0 when none did."""
    node = FakeNode()
    good = [_tx(n) for n in range(1, 4)]
    assert batch.push_all(node, good, "commit", False) == 0
    assert node.sent == [(batch.PATH, {"transactions": good, "mode": "commit"})]
    out = capsys.readouterr().out.splitlines()
    assert out == [f"transaction {_id(tx)} included in block 7" for tx in good]
    txs = [_tx(n) for n in range(1, 1003)] + [_tx(0xFF01)]
    node.refuse_batch_with = 5
    assert batch.push_all(node, txs, "sync", True) == 1
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(lines) == len(txs)
    assert {line["error"]["name"] for line in lines[:1000]} == {"busy"}
    assert [line["status"] for line in lines[1000:1002]] == ["included"] * 2
    assert lines[-1] == {
        "transaction_id": _id(txs[-1]),
        "error": {"code": 409, "name": "tx_duplicate", "what": "seen already"},
    }


def test_the_push_command_sends_a_file_of_many_in_batches(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``bor-wallet push FILE`` with an array goes through push_transactions and exits 1 when
    one transaction was refused."""
    node = FakeNode()
    monkeypatch.setattr("wallet.cli.Client", lambda url: node)
    path = tmp_path / "txs.json"
    path.write_text(json.dumps([_tx(1), _tx(0xFF02)]))
    assert main(["push", str(path), "--mode", "sync"]) == 1
    assert [p for p, _ in node.sent] == [batch.PATH]
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"transaction {_id(_tx(1))} included in block 7"
    assert out[1].startswith(f"transaction {_id(_tx(0xFF02))} refused (409 tx_duplicate)")
