"""push_transactions against a real devnet node: whole batches included, per-transaction
errors that do not sink the rest, Antelope's array form, one 400 for what is not a batch, and
``bor-wallet push FILE`` sending a file of many."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from chain.core.execution.actions import Transfer
from chain.core.execution.transaction import SignedTransaction, Transaction, tapos_of
from chain.core.primitives.crypto import PrivateKey
from chain.core.primitives.types import AccountName, BlockId
from node.api.routes import MAX_BATCH
from tests.integration.conftest import NodeProcess, Nodes
from tests.support.wait import SLOWDOWN

PATH = "/v1/chain/push_transactions"
BIN = Path(sys.executable).parent


def _post(node: NodeProcess, body: Any, timeout: float = 60) -> tuple[int, Any]:
    """POST ``body`` (any JSON) to push_transactions: the status and the JSON answer."""
    request = urllib.request.Request(
        node.url + PATH, json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout * SLOWDOWN) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


class Signer:
    """Signs alice's transfers to bob for ``node``'s chain at its current head."""

    def __init__(self, node: NodeProcess) -> None:
        info = node.info()
        keys = json.loads((node.data_dir / "keys.json").read_text())
        self.key = PrivateKey.from_text(keys["alice"])
        self.chain_id = bytes.fromhex(info["chain_id"])
        self.ref = tapos_of(BlockId(bytes.fromhex(info["head_block_id"])))

    def transfer(self, amount: int, memo: str, expiration: int = 0) -> SignedTransaction:
        action = Transfer(AccountName("alice"), AccountName("bob"), amount, memo)
        tx = Transaction(expiration or int(time.time()) + 120, *self.ref, (action,))
        return SignedTransaction.sign(tx, self.chain_id, [self.key])


def _body(stx: SignedTransaction) -> dict[str, Any]:
    return {"packed_trx": stx.packed.hex(), "signatures": [s.hex() for s in stx.signatures]}


def _balance(node: NodeProcess, name: str) -> int:
    return int(node.rpc("/v1/chain/get_account", {"account_name": name})["balance"])


def test_a_batch_of_100_transfers_is_included_and_antelopes_array_form_works(
    nodes: Nodes, tmp_path: Path
) -> None:
    """100 transfers in one commit-mode batch are each answered included with their block,
    and bob's balance grows by their sum; Antelope's array form (compression 0, empty
    context-free data) is accepted in mode sync; ``bor-wallet push FILE`` of an array
    prints one line per transaction."""
    node = nodes.devnet().start(wait_head=1)
    signer = Signer(node)
    before = _balance(node, "bob")
    txs = [signer.transfer(1 + n, f"batch {n}") for n in range(100)]
    body = {"transactions": [_body(stx) for stx in txs], "mode": "commit"}
    status, answers = _post(node, body)
    assert status == 200 and len(answers) == 100, answers
    assert [a["transaction_id"] for a in answers] == [stx.id.hex() for stx in txs]
    assert {a["status"] for a in answers} == {"included"}, answers
    assert all(a["block_num"] >= 1 for a in answers)
    assert _balance(node, "bob") == before + sum(range(1, 101))

    antelope = [signer.transfer(7, f"antelope {n}") for n in range(3)]
    items = [_body(stx) | {"compression": 0, "packed_context_free_data": ""} for stx in antelope]
    status, answers = _post(node, items)
    assert status == 200
    assert answers == [{"transaction_id": s.id.hex(), "status": "accepted"} for s in antelope]

    wallet_txs = [signer.transfer(3, f"wallet {n}") for n in range(2)]
    file = tmp_path / "txs.json"
    file.write_text(json.dumps([_body(stx) for stx in wallet_txs]))
    pushed = subprocess.run(
        [str(BIN / "bor-wallet"), "--url", node.url, "push", str(file), "--mode", "sync"],
        capture_output=True,
        text=True,
        timeout=60 * SLOWDOWN,
    )
    assert pushed.returncode == 0, pushed.stderr
    assert pushed.stdout.splitlines() == [f"transaction {s.id.hex()} accepted" for s in wallet_txs]


def test_bad_transactions_get_their_own_errors_and_a_non_batch_one_400(nodes: Nodes) -> None:
    """A batch with a bad signature, a duplicate, an expired transaction and malformed hex
    among good ones answers each bad one with its code and name and admits the good ones;
    a batch over MAX_BATCH, an empty one and a body of another type are one 400 each."""
    node = nodes.devnet().start(wait_head=1)
    signer = Signer(node)
    first, second, third = (signer.transfer(n, f"mixed {n}") for n in (1, 2, 3))
    forged = _body(signer.transfer(4, "forged"))
    sig = forged["signatures"][0]
    forged["signatures"] = [sig[:64] + "00" * 32 + sig[128:]]  # s = 0: recovers no key
    items = [
        _body(first),
        forged,
        _body(second),
        _body(first),
        _body(signer.transfer(5, "expired", expiration=1)),
        {"packed_trx": "not hex", "signatures": _body(third)["signatures"]},
        _body(third),
    ]
    status, answers = _post(node, {"transactions": items, "mode": "sync"})
    assert status == 200 and len(answers) == len(items), answers
    outcomes = [a["status"] if "status" in a else a["error"]["name"] for a in answers]
    assert outcomes == [
        "accepted",
        "bad_signature",
        "accepted",
        "tx_duplicate",
        "tx_expired",
        "bad_field",
        "accepted",
    ]
    assert [a["error"]["code"] for a in answers if "error" in a] == [401, 409, 422, 400]
    for stx in (first, second, third):
        found = node.rpc("/v1/chain/get_transaction", {"id": stx.id.hex()})
        assert found["status"] in ("pending", "executed", "irreversible")

    over = [_body(first)] * (MAX_BATCH + 1)
    not_batches: list[Any] = [over, [], {"transactions": []}, "text", {"mode": "sync"}]
    for body in not_batches:
        status, answer = _post(node, body)
        assert status == 400, (str(body)[:60], answer)
        assert answer["error"]["name"] and answer["error"]["what"]
