"""The synchronous client: one method per public route of the node's RPC, and the
transactions built, signed and pushed on top of them.

Plain ``urllib`` (no event loop, nothing to close), which suits scripts and the wallet; an
application that pushes many transactions at once wants ``AsyncClient`` (one connection pool).
Every failure is a ``bor_client.errors`` error: ``RpcError`` (by status: ``NotFound``...)
when the node answered, ``NodeUnreachable`` when it could not be reached in time.
"""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar

from bor_client import requests as q
from bor_client import results as r
from bor_client.contracts import Contract
from bor_client.errors import NodeUnreachable, RpcError
from bor_client.keys import Signer
from bor_client.transactions import Amount, Builder, body_of, stake, transfer, units, unstake, vote
from bor_client.transport import DEFAULT_TIMEOUT_S, MAX_ANSWER_BYTES, check_url, encode_body
from bor_client.transport import read_answer as _read_answer
from chain.core.execution.actions import Action
from chain.core.execution.transaction import SignedTransaction

T = TypeVar("T")
Pushable = Sequence[Action] | SignedTransaction


class Client:
    """A node's RPC at ``url``; ``signer`` holds the keys its pushes sign with."""

    def __init__(
        self, url: str, signer: Signer | None = None, timeout: float = DEFAULT_TIMEOUT_S
    ) -> None:
        self.url = check_url(url)
        self.timeout = timeout
        self.builder = Builder(signer or Signer())

    # --- the transport ------------------------------------------------------------------

    def request(self, path: str, body: Any = None) -> Any:
        """POST ``body`` as JSON to ``path``; the answer's JSON."""
        request = urllib.request.Request(
            self.url + path, data=encode_body(body), headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                status, reason = response.status, response.reason
                raw = response.read(MAX_ANSWER_BYTES)
        except urllib.error.HTTPError as err:
            status, reason, raw = err.code, str(err.reason), _body(err)
        except (urllib.error.URLError, OSError) as err:
            why = getattr(err, "reason", err)
            raise NodeUnreachable(f"cannot reach the node at {self.url}: {why}") from err
        return _read_answer(status, reason, raw)

    def send(self, request: q.Request[T]) -> T:
        return request.parse(self.request(request.path, request.body))

    # --- the routes ---------------------------------------------------------------------

    def get_info(self) -> r.Info:
        return self.send(q.get_info())

    def get_block(self, block_num_or_id: int | str) -> r.Block:
        return self.send(q.get_block(block_num_or_id))

    def get_account(self, name: str) -> r.Account:
        return self.send(q.get_account(name))

    def get_producers(
        self, limit: int | None = None, lower_bound: str | None = None
    ) -> r.Producers:
        return self.send(q.get_producers(limit, lower_bound))

    def get_transaction(self, tx_id: str) -> r.TxStatus:
        return self.send(q.get_transaction(tx_id))

    def push_transaction(
        self,
        tx: SignedTransaction | Mapping[str, Any],
        mode: str = "sync",
        timeout_ms: int | None = None,
    ) -> r.PushResult:
        body = body_of(tx) if isinstance(tx, SignedTransaction) else tx
        return self.send(q.push_transaction(body, mode, timeout_ms))

    def push_transactions(
        self,
        txs: Sequence[SignedTransaction | Mapping[str, Any]],
        mode: str = "sync",
        timeout_ms: int | None = None,
    ) -> q.BatchResults:
        """One batch (at most ``MAX_BATCH``); ``push_many`` splits any number."""
        bodies = [body_of(t) if isinstance(t, SignedTransaction) else t for t in txs]
        return self.send(q.push_transactions(bodies, mode, timeout_ms))

    def get_finalizer_info(self) -> r.FinalizerInfo:
        return self.send(q.get_finalizer_info())

    def get_evidence(self) -> r.Evidence:
        return self.send(q.get_evidence())

    def health(self) -> r.Health:
        return self.send(q.health())

    def sync(self) -> r.Json:
        return self.send(q.sync())

    def snapshots(self) -> r.Snapshots:
        return self.send(q.snapshots())

    def peers(self) -> r.Json:
        return self.send(q.peers())

    def get_code(self, account: str) -> r.Code:
        return self.send(q.get_code(account))

    def get_abi(self, account: str) -> r.AbiResult:
        return self.send(q.get_abi(account))

    def get_table_rows(self, query: q.RowsQuery) -> r.TableRows:
        return self.send(q.get_table_rows(query))

    def get_currency_balance(
        self, code: str, account: str, symbol: str | None = None
    ) -> tuple[str, ...]:
        return self.send(q.get_currency_balance(code, account, symbol))

    def get_currency_stats(self, code: str, symbol: str) -> dict[str, r.CurrencyStats]:
        return self.send(q.get_currency_stats(code, symbol))

    def call(
        self,
        contract: str,
        action: str,
        data: Mapping[str, Any] | str = "",
        authorization: Sequence[str] = (),
    ) -> r.CallResult:
        return self.send(q.call(contract, action, data, authorization))

    # --- transactions -------------------------------------------------------------------

    def info(self) -> r.Info:
        """The chain's info as the builder last read it (read now if it never did)."""
        if self.builder.info is None:
            self.builder.set_info(self.get_info())
        assert self.builder.info is not None
        return self.builder.info

    def sign(self, actions: Iterable[Action]) -> SignedTransaction:
        """``actions`` as one transaction signed by every authorizing account's key."""
        listed = list(actions)
        builder = self.builder
        if builder.needs_info():
            builder.set_info(self.get_info())
        for account in builder.unknown_accounts(listed):
            builder.set_account_key(account, self.get_account(account).key)
        return builder.sign(listed)

    def push(
        self, actions: Pushable | Action, mode: str = "commit", timeout_ms: int | None = None
    ) -> r.PushResult:
        """Sign ``actions`` (unless signed already) and push them as one transaction:
        ``mode`` async returns at once, sync after validation, commit after inclusion."""
        stx = _signed(self, actions)
        try:
            return self.push_transaction(stx, mode, timeout_ms)
        except RpcError as err:
            self.builder.refused(err)
            raise

    def push_many(
        self, transactions: Iterable[Pushable], mode: str = "sync", timeout_ms: int | None = None
    ) -> q.BatchResults:
        """Each element signed (unless signed already) and pushed in batches of at most
        ``MAX_BATCH``: a result or an error per transaction, in order."""
        signed = [_signed(self, t) for t in transactions]
        out: list[r.PushResult | RpcError] = []
        for start in range(0, len(signed), q.MAX_BATCH):
            out.extend(
                self.push_transactions(signed[start : start + q.MAX_BATCH], mode, timeout_ms)
            )
        return tuple(out)

    def transfer(
        self, sender: str, recipient: str, amount: Amount, memo: str = "", mode: str = "commit"
    ) -> r.PushResult:
        """``amount``: base units (int) or the token's text (``"10.5"``, ``"10.5000 BOR"``)."""
        return self.push([transfer(sender, recipient, units(amount, self.info()), memo)], mode)

    def stake(self, account: str, amount: Amount, mode: str = "commit") -> r.PushResult:
        return self.push([stake(account, units(amount, self.info()))], mode)

    def unstake(self, account: str, amount: Amount, mode: str = "commit") -> r.PushResult:
        return self.push([unstake(account, units(amount, self.info()))], mode)

    def vote(self, voter: str, producers: Iterable[str], mode: str = "commit") -> r.PushResult:
        return self.push([vote(voter, producers)], mode)

    def contract(self, account: str) -> Contract:
        """The contract at ``account``: its actions and tables through its ABI."""
        return Contract(self, account)


def _signed(client: Client, actions: Pushable | Action) -> SignedTransaction:
    if isinstance(actions, SignedTransaction):
        return actions
    return client.sign([actions] if not isinstance(actions, Sequence) else actions)


def _body(err: urllib.error.HTTPError) -> bytes:
    try:
        return err.read(MAX_ANSWER_BYTES)
    except OSError:  # the body was cut off: the status and reason still say what happened
        return b""
