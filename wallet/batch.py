"""``bor-wallet push FILE`` of many signed transactions: read them, send them in batches
through /v1/chain/push_transactions, and print one line per transaction.

A file holds one signed transaction (a JSON object, as ``-d`` prints it), a JSON array of
them, or one per line (what ``-d`` appends to a file, command after command).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from typing import Any

from bor_client.client import Client
from bor_client.errors import RpcError
from wallet.errors import WalletError

PATH = "/v1/chain/push_transactions"
# The node's MAX_BATCH; and bytes of JSON a batch holds at most, under the node's default
# max-http-body-bytes (1 MiB) with room for the object around them.
MOST_PER_BATCH = 1000
MOST_BATCH_BYTES = 900 << 10


def signed_transactions(source: str, text: str) -> dict[str, Any] | list[dict[str, Any]]:
    """The one transaction (an object) or the many (a list) that ``text`` holds."""
    try:
        parsed: Any = json.loads(text)
    except ValueError as err:
        lines = [line for line in text.splitlines() if line.strip()]
        try:
            parsed = [json.loads(line) for line in lines]
        except ValueError:
            raise WalletError(f"cannot read signed transactions from {source}: {err}") from err
        if not lines:
            raise WalletError(f"{source} holds no signed transaction") from err
    if isinstance(parsed, dict):
        return parsed
    if isinstance(parsed, list) and parsed and all(isinstance(t, dict) for t in parsed):
        return parsed
    raise WalletError(
        f"{source}: a signed transaction is a JSON object {{packed_trx, signatures}};"
        " many are an array of them or one per line"
    )


def batches(txs: list[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    """``txs`` in order, cut into batches the node takes (a transaction too large for any
    batch goes alone, and gets the node's answer for it)."""
    batch: list[dict[str, Any]] = []
    size = 0
    for tx in txs:
        tx_size = len(json.dumps(tx)) + 2
        if batch and (len(batch) == MOST_PER_BATCH or size + tx_size > MOST_BATCH_BYTES):
            yield batch
            batch, size = [], 0
        batch.append(tx)
        size += tx_size
    if batch:
        yield batch


def push_all(client: Client, txs: list[dict[str, Any]], mode: str, as_json: bool) -> int:
    """Push ``txs`` in batches; one line per transaction (``as_json``: one JSON object);
    1 if any was refused, else 0. A batch the node refuses as a whole refuses each of its
    transactions with the node's error; the next batches are still sent."""
    failed = False
    for batch in batches(txs):
        try:
            answers = client.request(PATH, {"transactions": batch, "mode": mode})
        except RpcError as err:
            answers = [{"error": {"code": err.status, "name": err.name, "what": err.what}}]
            answers *= len(batch)
        if not isinstance(answers, list) or len(answers) != len(batch):
            raise WalletError("the node's answer to push_transactions is not one per transaction")
        for tx, answer in zip(batch, answers, strict=True):
            failed |= "error" in answer
            print(_line(tx, answer, as_json))
    return 1 if failed else 0


def _line(tx: dict[str, Any], answer: dict[str, Any], as_json: bool) -> str:
    tx_id = answer.get("transaction_id") or _local_id(tx)
    error = answer.get("error")
    if as_json:
        if error is not None:
            return json.dumps({"transaction_id": tx_id, "error": error})
        fields = ("block_num", "status")
        return json.dumps({"transaction_id": tx_id} | {key: answer.get(key) for key in fields})
    if error is not None:
        return f"transaction {tx_id} refused ({error['code']} {error['name']}): {error['what']}"
    line = f"transaction {tx_id} {answer['status']}"
    return line + (f" in block {answer['block_num']}" if "block_num" in answer else "")


def _local_id(tx: dict[str, Any]) -> str | None:
    """The transaction's id (sha256 of its packed bytes), for the line of one the node
    refused; None when ``packed_trx`` is not hex."""
    try:
        return hashlib.sha256(bytes.fromhex(tx["packed_trx"])).hexdigest()
    except (KeyError, TypeError, ValueError):
        return None
