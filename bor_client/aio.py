"""The asyncio client: the same methods as ``Client``, awaited, over one aiohttp session
(its connections reused), plus the chain stream.

Use it as ``async with AsyncClient(url) as client:``, or call ``close()``. Many pushes may
run at once on one client; the first ones share one read of the chain's info.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

import aiohttp

from bor_client import requests as q
from bor_client import results as r
from bor_client.contracts import AsyncContract
from bor_client.errors import NodeUnreachable, RpcError
from bor_client.keys import Signer
from bor_client.stream import Cursor, Stream
from bor_client.transactions import Amount, Builder, body_of, stake, transfer, units, unstake, vote
from bor_client.transport import DEFAULT_TIMEOUT_S, MAX_ANSWER_BYTES, check_url, encode_body
from bor_client.transport import read_answer as _read_answer
from chain.core.execution.actions import Action
from chain.core.execution.transaction import SignedTransaction

T = TypeVar("T")
Pushable = Sequence[Action] | SignedTransaction
# Connections kept to the node: as many requests as this go out at once, the rest wait for
# one (aiohttp's default, 100, is more than a node's http-max-in-flight wants from one client).
MAX_CONNECTIONS = 64


class AsyncClient:
    """A node's RPC at ``url``; ``signer`` holds the keys its pushes sign with."""

    def __init__(
        self,
        url: str,
        signer: Signer | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
        max_connections: int = MAX_CONNECTIONS,
    ) -> None:
        self.url = check_url(url)
        self.timeout = timeout
        self.max_connections = max_connections
        self.builder = Builder(signer or Signer())
        self._session: aiohttp.ClientSession | None = None
        self._reading = asyncio.Lock()  # one read of what the builder lacks at a time

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    @property
    def session(self) -> aiohttp.ClientSession:
        """The one session (opened on first use): its connections are reused."""
        if self._session is None:
            connector = aiohttp.TCPConnector(limit=self.max_connections)
            timeout = aiohttp.ClientTimeout(total=self.timeout)
            self._session = aiohttp.ClientSession(connector=connector, timeout=timeout)
        return self._session

    # --- the transport ------------------------------------------------------------------

    async def request(self, path: str, body: Any = None) -> Any:
        """POST ``body`` as JSON to ``path``; the answer's JSON."""
        headers = {"Content-Type": "application/json"}
        try:
            async with self.session.post(
                self.url + path, data=encode_body(body), headers=headers
            ) as response:
                raw = await _read_body(response)
                status, reason = response.status, response.reason or ""
        except (aiohttp.ClientError, OSError, TimeoutError) as err:
            why = "timed out" if isinstance(err, TimeoutError) else err
            raise NodeUnreachable(f"cannot reach the node at {self.url}: {why}") from err
        return _read_answer(status, reason, raw)

    async def send(self, request: q.Request[T]) -> T:
        return request.parse(await self.request(request.path, request.body))

    # --- the routes ---------------------------------------------------------------------

    async def get_info(self) -> r.Info:
        return await self.send(q.get_info())

    async def get_block(self, block_num_or_id: int | str) -> r.Block:
        return await self.send(q.get_block(block_num_or_id))

    async def get_account(self, name: str) -> r.Account:
        return await self.send(q.get_account(name))

    async def get_producers(
        self, limit: int | None = None, lower_bound: str | None = None
    ) -> r.Producers:
        return await self.send(q.get_producers(limit, lower_bound))

    async def get_transaction(self, tx_id: str) -> r.TxStatus:
        return await self.send(q.get_transaction(tx_id))

    async def push_transaction(
        self,
        tx: SignedTransaction | Mapping[str, Any],
        mode: str = "sync",
        timeout_ms: int | None = None,
    ) -> r.PushResult:
        body = body_of(tx) if isinstance(tx, SignedTransaction) else tx
        return await self.send(q.push_transaction(body, mode, timeout_ms))

    async def push_transactions(
        self,
        txs: Sequence[SignedTransaction | Mapping[str, Any]],
        mode: str = "sync",
        timeout_ms: int | None = None,
    ) -> q.BatchResults:
        bodies = [body_of(t) if isinstance(t, SignedTransaction) else t for t in txs]
        return await self.send(q.push_transactions(bodies, mode, timeout_ms))

    async def get_finalizer_info(self) -> r.FinalizerInfo:
        return await self.send(q.get_finalizer_info())

    async def get_evidence(self) -> r.Evidence:
        return await self.send(q.get_evidence())

    async def health(self) -> r.Health:
        return await self.send(q.health())

    async def sync(self) -> r.Json:
        return await self.send(q.sync())

    async def snapshots(self) -> r.Snapshots:
        return await self.send(q.snapshots())

    async def peers(self) -> r.Json:
        return await self.send(q.peers())

    async def get_code(self, account: str) -> r.Code:
        return await self.send(q.get_code(account))

    async def get_abi(self, account: str) -> r.AbiResult:
        return await self.send(q.get_abi(account))

    async def get_table_rows(self, query: q.RowsQuery) -> r.TableRows:
        return await self.send(q.get_table_rows(query))

    async def get_currency_balance(
        self, code: str, account: str, symbol: str | None = None
    ) -> tuple[str, ...]:
        return await self.send(q.get_currency_balance(code, account, symbol))

    async def get_currency_stats(self, code: str, symbol: str) -> dict[str, r.CurrencyStats]:
        return await self.send(q.get_currency_stats(code, symbol))

    async def call(
        self,
        contract: str,
        action: str,
        data: Mapping[str, Any] | str = "",
        authorization: Sequence[str] = (),
    ) -> r.CallResult:
        return await self.send(q.call(contract, action, data, authorization))

    # --- transactions -------------------------------------------------------------------

    async def info(self) -> r.Info:
        """The chain's info as the builder last read it (read now if it never did)."""
        if self.builder.info is None:
            self.builder.set_info(await self.get_info())
        assert self.builder.info is not None
        return self.builder.info

    async def sign(self, actions: Iterable[Action]) -> SignedTransaction:
        """``actions`` as one transaction signed by every authorizing account's key."""
        listed = list(actions)
        builder = self.builder
        async with self._reading:
            if builder.needs_info():
                builder.set_info(await self.get_info())
            for account in builder.unknown_accounts(listed):
                builder.set_account_key(account, (await self.get_account(account)).key)
        return builder.sign(listed)

    async def push(
        self, actions: Pushable | Action, mode: str = "commit", timeout_ms: int | None = None
    ) -> r.PushResult:
        """Sign ``actions`` (unless signed already) and push them as one transaction."""
        stx = await self._signed(actions)
        try:
            return await self.push_transaction(stx, mode, timeout_ms)
        except RpcError as err:
            self.builder.refused(err)
            raise

    async def push_many(
        self, transactions: Iterable[Pushable], mode: str = "sync", timeout_ms: int | None = None
    ) -> q.BatchResults:
        """Each element signed (unless signed already) and pushed in batches of at most
        ``MAX_BATCH``: a result or an error per transaction, in order."""
        signed = [await self._signed(t) for t in transactions]
        out: list[r.PushResult | RpcError] = []
        for start in range(0, len(signed), q.MAX_BATCH):
            chunk = signed[start : start + q.MAX_BATCH]
            out.extend(await self.push_transactions(chunk, mode, timeout_ms))
        return tuple(out)

    async def _signed(self, actions: Pushable | Action) -> SignedTransaction:
        if isinstance(actions, SignedTransaction):
            return actions
        return await self.sign([actions] if not isinstance(actions, Sequence) else actions)

    async def transfer(
        self, sender: str, recipient: str, amount: Amount, memo: str = "", mode: str = "commit"
    ) -> r.PushResult:
        """``amount``: base units (int) or the token's text (``"10.5"``, ``"10.5000 BOR"``)."""
        action = transfer(sender, recipient, units(amount, await self.info()), memo)
        return await self.push([action], mode)

    async def stake(self, account: str, amount: Amount, mode: str = "commit") -> r.PushResult:
        return await self.push([stake(account, units(amount, await self.info()))], mode)

    async def unstake(self, account: str, amount: Amount, mode: str = "commit") -> r.PushResult:
        return await self.push([unstake(account, units(amount, await self.info()))], mode)

    async def vote(
        self, voter: str, producers: Iterable[str], mode: str = "commit"
    ) -> r.PushResult:
        return await self.push([vote(voter, producers)], mode)

    def contract(self, account: str) -> AsyncContract:
        return AsyncContract(self, account)

    def stream(
        self,
        stream: str = "blocks",
        *,
        accounts: Sequence[str] = (),
        actions: Sequence[str] = (),
        irreversible_only: bool = False,
        transactions: bool = False,
        cursor: Cursor | None = None,
        cursor_file: str | Path | None = None,
    ) -> Stream:
        """``/v1/chain/stream`` as an async iterator of frames, resumed from its cursor after
        a disconnect or a ``lagged`` (``bor_client.stream`` says when a cursor is stored)."""
        return Stream(
            self.url,
            stream=stream,
            accounts=accounts,
            actions=actions,
            irreversible_only=irreversible_only,
            transactions=transactions,
            cursor=cursor,
            cursor_file=cursor_file,
        )


async def _read_body(response: aiohttp.ClientResponse) -> bytes:
    """The whole answer, up to MAX_ANSWER_BYTES (one more byte: the JSON will not parse).
    ``content.read(n)`` alone returns what has arrived so far, which for a large answer is
    only its first chunks."""
    chunks = bytearray()
    while len(chunks) <= MAX_ANSWER_BYTES:
        chunk = await response.content.read(MAX_ANSWER_BYTES + 1 - len(chunks))
        if not chunk:
            break
        chunks += chunk
    return bytes(chunks)
