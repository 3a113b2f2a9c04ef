"""A contract through its ABI: push an action by name with JSON arguments, read a table
page by page, run an action read-only.

The ABI is read once from the node (``get_abi``) and arguments are encoded here by
``chain.abi``, so a mistake is named (``transfer.quantity: ...``) before anything is signed.
Tables are read in pages (``get_table_rows`` with Antelope's ``more`` and ``next_key``): the
row iterators ask for the next page only when the caller has used the last.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any, Protocol

from bor_client.errors import BadArgument, NoAbi
from bor_client.requests import RowsQuery
from bor_client.results import AbiResult, CallResult, PushResult, TableRows
from chain.abi import Abi, parse_abi
from chain.core.execution.actions import Action, Call
from chain.core.primitives.types import AccountName, account_name

MAX_AUTHORIZERS = 16
# Pages one iteration reads at most: a table whose next_key never moves on (a node's fault)
# ends the loop rather than spin forever.
MAX_PAGES = 1_000_000


class SyncRpc(Protocol):
    """What a ``Contract`` needs of ``Client``."""

    def get_abi(self, account: str) -> AbiResult: ...
    def get_table_rows(self, query: RowsQuery) -> TableRows: ...
    def call(
        self,
        contract: str,
        action: str,
        data: Mapping[str, Any] | str,
        authorization: Sequence[str],
    ) -> CallResult: ...
    def push(self, actions: Sequence[Action], mode: str, timeout_ms: int | None) -> PushResult: ...


class AsyncRpc(Protocol):
    """What an ``AsyncContract`` needs of ``AsyncClient``."""

    async def get_abi(self, account: str) -> AbiResult: ...
    async def get_table_rows(self, query: RowsQuery) -> TableRows: ...
    async def call(
        self,
        contract: str,
        action: str,
        data: Mapping[str, Any] | str,
        authorization: Sequence[str],
    ) -> CallResult: ...
    async def push(
        self, actions: Sequence[Action], mode: str, timeout_ms: int | None
    ) -> PushResult: ...


def abi_of(result: AbiResult) -> Abi:
    """The parsed ABI of a get_abi answer; ``NoAbi`` when the contract has none."""
    if result.bor_abi is None:
        raise NoAbi(f"{result.account} has no ABI: give the data as hex")
    return parse_abi(json.dumps(result.bor_abi))


def authorizers(authorization: str | Sequence[str]) -> tuple[AccountName, ...]:
    """``"alice"``, ``"alice,bob"`` or a list: 1 to 16 different accounts."""
    listed = authorization.split(",") if isinstance(authorization, str) else authorization
    names = tuple(account_name(n.strip()) for n in listed if n.strip())
    if not 1 <= len(names) <= MAX_AUTHORIZERS or len(set(names)) != len(names):
        raise BadArgument(f"authorization: 1 to {MAX_AUTHORIZERS} different accounts")
    return names


def encode(abi: Abi | None, action: str, data: Mapping[str, Any] | bytes) -> bytes:
    """``data`` in the action's binary form: bytes as they are, JSON encoded by the ABI."""
    if isinstance(data, bytes):
        return data
    if abi is None:
        raise NoAbi(f"no ABI to encode {action}'s arguments with: give them as bytes")
    return abi.encode_action(action, data)


def _next(query: RowsQuery, page: TableRows) -> RowsQuery | None:
    if not page.more or not page.next_key:
        return None
    return replace(query, lower_bound=page.next_key)


class Contract:
    """The contract at ``account``, through a sync ``Client``."""

    def __init__(self, client: SyncRpc, account: str) -> None:
        self.client = client
        self.account = account_name(account)
        self._abi: Abi | None = None

    def abi(self) -> Abi:
        if self._abi is None:
            self._abi = abi_of(self.client.get_abi(self.account))
        return self._abi

    def action(
        self, name: str, data: Mapping[str, Any] | bytes, authorization: str | Sequence[str]
    ) -> Call:
        """The ``call`` action running ``name`` with ``data``, authorized by those accounts."""
        auth = authorizers(authorization)
        abi = None if isinstance(data, bytes) else self.abi()
        return Call(self.account, account_name(name), auth, encode(abi, name, data))

    def push(
        self,
        name: str,
        data: Mapping[str, Any] | bytes,
        authorization: str | Sequence[str],
        mode: str = "commit",
        timeout_ms: int | None = None,
    ) -> PushResult:
        return self.client.push([self.action(name, data, authorization)], mode, timeout_ms)

    def call(
        self, name: str, data: Mapping[str, Any] | str = "", authorization: Sequence[str] = ()
    ) -> CallResult:
        """Run ``name`` read-only on the node's head state (nothing signed or stored)."""
        return self.client.call(self.account, name, data, authorization)

    def pages(self, table: str, scope: str | int, **bounds: Any) -> Iterator[TableRows]:
        """Every page of ``table`` in ``scope``; ``bounds``: ``RowsQuery``'s other fields."""
        query: RowsQuery | None = RowsQuery(self.account, table, scope, **bounds)
        for _ in range(MAX_PAGES):
            if query is None:
                return
            page = self.client.get_table_rows(query)
            yield page
            query = _next(query, page)

    def rows(self, table: str, scope: str | int, **bounds: Any) -> Iterator[Any]:
        """Every row of ``table`` in ``scope``, read a page at a time."""
        for page in self.pages(table, scope, **bounds):
            yield from page.rows


class AsyncContract:
    """The contract at ``account``, through an ``AsyncClient``."""

    def __init__(self, client: AsyncRpc, account: str) -> None:
        self.client = client
        self.account = account_name(account)
        self._abi: Abi | None = None

    async def abi(self) -> Abi:
        if self._abi is None:
            self._abi = abi_of(await self.client.get_abi(self.account))
        return self._abi

    async def action(
        self, name: str, data: Mapping[str, Any] | bytes, authorization: str | Sequence[str]
    ) -> Call:
        auth = authorizers(authorization)
        abi = None if isinstance(data, bytes) else await self.abi()
        return Call(self.account, account_name(name), auth, encode(abi, name, data))

    async def push(
        self,
        name: str,
        data: Mapping[str, Any] | bytes,
        authorization: str | Sequence[str],
        mode: str = "commit",
        timeout_ms: int | None = None,
    ) -> PushResult:
        action = await self.action(name, data, authorization)
        return await self.client.push([action], mode, timeout_ms)

    async def call(
        self, name: str, data: Mapping[str, Any] | str = "", authorization: Sequence[str] = ()
    ) -> CallResult:
        return await self.client.call(self.account, name, data, authorization)

    async def pages(self, table: str, scope: str | int, **bounds: Any) -> AsyncIterator[TableRows]:
        query: RowsQuery | None = RowsQuery(self.account, table, scope, **bounds)
        for _ in range(MAX_PAGES):
            if query is None:
                return
            page = await self.client.get_table_rows(query)
            yield page
            query = _next(query, page)

    async def rows(self, table: str, scope: str | int, **bounds: Any) -> AsyncIterator[Any]:
        async for page in self.pages(table, scope, **bounds):
            for row in page.rows:
                yield row
