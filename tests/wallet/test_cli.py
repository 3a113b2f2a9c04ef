"""The real ``bor-wallet`` command against a fake node on loopback: amounts are taken only in
the documented forms, bad input ends in one line on stderr (never a traceback), and scripts
get ``--json`` and ``--version``."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from chain.core.execution.actions import MAX_MEMO, Transfer
from chain.core.execution.transaction import decode_transaction
from chain.core.primitives.crypto import PrivateKey, public_key_to_text
from chain.core.primitives.types import MAX_AMOUNT
from tests.support.answers import account_json, info_json

BIN = Path(sys.executable).parent
KEY = PrivateKey.from_text("PVT_K1_" + "11" * 32)
TX_ID = "ab" * 32
PRODUCERS = 3000  # their JSON (~200 KB) outgrows a pipe's buffer: the writer meets the closed end


@dataclass
class FakeNode:
    """What the fake node was sent: the actions of each pushed transaction."""

    url: str = ""
    pushed: list[Any] = field(default_factory=list)


async def _get_info(request: web.Request) -> web.Response:
    return web.json_response(info_json())


async def _get_account(request: web.Request) -> web.Response:
    body = await request.json()
    return web.json_response(account_json(body["account_name"], public_key_to_text(KEY.public_key)))


async def _get_producers(request: web.Request) -> web.Response:
    rows = [{"owner": f"producer{i}", "total_votes": i} for i in range(PRODUCERS)]
    return web.json_response({"producers": rows})


def _push_handler(node: FakeNode) -> Any:
    async def push(request: web.Request) -> web.Response:
        body = await request.json()
        node.pushed.append(decode_transaction(bytes.fromhex(body["packed_trx"])).actions)
        return web.json_response({"transaction_id": TX_ID, "status": "included", "block_num": 7})

    return push


@pytest.fixture(scope="module")
def node() -> Iterator[FakeNode]:
    """A fake node's RPC on a loopback port, served by a thread of its own."""
    fake = FakeNode()
    app = web.Application()
    app.router.add_post("/v1/chain/get_info", _get_info)
    app.router.add_post("/v1/chain/get_account", _get_account)
    app.router.add_post("/v1/chain/get_producers", _get_producers)
    app.router.add_post("/v1/chain/push_transaction", _push_handler(fake))
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(app)
    loop.run_until_complete(runner.setup())
    site = web.TCPSite(runner, "127.0.0.1", 0)
    loop.run_until_complete(site.start())
    fake.url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    yield fake
    asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(5)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5)
    loop.close()


@pytest.fixture(scope="module")
def env(node: FakeNode, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment of a wallet that holds the key of every account of the fake node."""
    wallet = tmp_path_factory.mktemp("wallet") / "test.wallet"
    environ = os.environ | {
        "BOR_URL": node.url,
        "BOR_WALLET": str(wallet),
        "BOR_WALLET_PASSWORD": "correct horse",
    }
    imported = _wallet(environ, "import", "--key", KEY.to_text())
    assert imported.returncode == 0, imported.stderr
    return environ


def _wallet(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "bor-wallet"), *args], env=env, capture_output=True, text=True, timeout=60
    )


def _refused(result: subprocess.CompletedProcess[str]) -> str:
    """The one line a refused command wrote to stderr."""
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("bor-wallet: ")
    return result.stderr


def _sent_amount(node: FakeNode) -> int:
    (action,) = node.pushed[-1]
    assert isinstance(action, Transfer)
    return action.amount


@pytest.mark.parametrize(
    ("text", "units"),
    [("10", 100_000), ("10.5", 105_000), ("10.5000 BOR", 105_000), ("0.0001", 1)],
)
def test_the_documented_amount_forms_are_sent(
    env: dict[str, str], node: FakeNode, text: str, units: int
) -> None:
    """10, 10.5 and '10.5000 BOR' become the same base units the README says they are."""
    sent = _wallet(env, "transfer", "alice", "bob", text)
    assert sent.returncode == 0, sent.stderr
    assert _sent_amount(node) == units


@pytest.mark.parametrize(
    "text",
    ["1e5", "1_000", "inf", "nan", "1e400", "-5", "+5", ".5", "5.", "0x10", "10 EOS", "١٠"],
)
def test_other_amount_forms_are_refused(env: dict[str, str], node: FakeNode, text: str) -> None:
    """Exponents, digit separators, signs, infinities and other symbols are refused in one
    line naming the accepted forms, before anything is sent."""
    before = len(node.pushed)
    line = _refused(_wallet(env, "transfer", "alice", "bob", text))
    assert "10, 10.5 (at most 4 decimals) or '10.5000 BOR'" in line
    assert len(node.pushed) == before


def test_more_decimals_than_the_token_has_are_refused(env: dict[str, str]) -> None:
    """An amount finer than the token's precision is refused, not rounded."""
    assert "has 5 decimals; the token has 4" in _refused(
        _wallet(env, "transfer", "alice", "bob", "1.00001")
    )


def test_zero_is_refused(env: dict[str, str]) -> None:
    """A transfer of nothing is refused by the wallet."""
    assert "more than zero" in _refused(_wallet(env, "transfer", "alice", "bob", "0.0000"))


@pytest.mark.parametrize("text", ["99999999999999999999", "461168601842738.7905"])
def test_an_amount_above_the_maximum_is_refused_with_the_maximum(
    env: dict[str, str], text: str
) -> None:
    """An amount beyond the chain's maximum is refused naming the maximum, not a traceback."""
    line = _refused(_wallet(env, "stake", "alice", text))
    assert "above the maximum, 461168601842738.7904 BOR" in line


def test_the_maximum_amount_itself_is_sent(env: dict[str, str], node: FakeNode) -> None:
    """The largest amount the chain takes is still accepted."""
    sent = _wallet(env, "transfer", "alice", "bob", "461168601842738.7904")
    assert sent.returncode == 0, sent.stderr
    assert _sent_amount(node) == MAX_AMOUNT


def test_a_memo_over_the_limit_is_refused_before_signing(
    env: dict[str, str], node: FakeNode
) -> None:
    """A memo longer than the chain takes is refused with its length and the limit, and no
    transaction is pushed."""
    before = len(node.pushed)
    line = _refused(_wallet(env, "transfer", "alice", "bob", "1", "--memo", "x" * 10_000))
    assert f"memo is 10000 characters; at most {MAX_MEMO}" in line
    assert len(node.pushed) == before
    kept = _wallet(env, "transfer", "alice", "bob", "1", "--memo", "é" * MAX_MEMO)
    assert kept.returncode == 0, kept.stderr


@pytest.mark.parametrize("doc", ['{"x": 1}', "[1, 2]", '{"alice": "PVT_K1_zz"}'])
def test_a_dev_keys_file_of_another_shape_is_refused(
    env: dict[str, str], tmp_path: Path, doc: str
) -> None:
    """``import --from-dev-keys`` with a JSON file that is not a label-to-key map fails in one
    line naming the file."""
    bad = tmp_path / "bad.json"
    bad.write_text(doc)
    assert str(bad) in _refused(_wallet(env, "import", "--from-dev-keys", str(bad)))


@pytest.mark.parametrize(
    "command",
    [
        ["transfer", "alice", "bob", "2.5"],
        ["stake", "alice", "1"],
        ["vote", "alice", "producera"],
        ["unregproducer", "alice"],
    ],
)
def test_json_prints_one_object_for_scripts(env: dict[str, str], command: list[str]) -> None:
    """With --json a sending command prints exactly one JSON object: id, block and status."""
    sent = _wallet(env, *command, "--json")
    assert sent.returncode == 0, sent.stderr
    assert json.loads(sent.stdout) == {
        "transaction_id": TX_ID,
        "block_num": 7,
        "status": "included",
    }
    assert sent.stdout.count("\n") == 1


def test_version_is_the_package_version(env: dict[str, str]) -> None:
    """--version prints the installed package's version."""
    from importlib.metadata import version

    shown = _wallet(env, "--version")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.strip() == f"bor-wallet {version('bor')}"


@pytest.mark.parametrize(
    "url", ["foo", "http://127.0.0.1:notaport", "http://127.0.0.1:70000", "http://", "ftp://x"]
)
@pytest.mark.parametrize("source", ["flag", "environment"])
def test_a_bad_node_url_is_refused_in_one_line_naming_it(
    env: dict[str, str], url: str, source: str
) -> None:
    """A node URL urllib cannot call, from --url or BOR_URL, is one line naming it, not a
    traceback from inside urllib."""
    if source == "flag":
        result = _wallet(env, "--url", url, "get", "info")
    else:
        result = _wallet(env | {"BOR_URL": url}, "get", "info")
    assert f"node URL {url!r}: " in _refused(result)


def _to_closed_pipe(env: dict[str, str], *command: str) -> subprocess.CompletedProcess[str]:
    """Run ``command`` with stdout a pipe whose reader has already left, as in ``| head``."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run(
            list(command), env=env, stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=60
        )
    finally:
        os.close(write_end)


def test_a_reader_that_leaves_ends_the_wallet_quietly(env: dict[str, str]) -> None:
    """``bor-wallet get producers | head``: no traceback and nothing on stderr."""
    result = _to_closed_pipe(env, str(BIN / "bor-wallet"), "get", "producers")
    assert result.stderr == ""
    assert result.returncode == 141


def test_a_reader_that_leaves_ends_the_node_cli_quietly(
    env: dict[str, str], tmp_path: Path
) -> None:
    """A bor-node command whose output nobody reads any more stops without an error line."""
    result = _to_closed_pipe(
        env, str(BIN / "bor-node"), "genesis", "new", "--out", str(tmp_path / "g")
    )
    assert result.stderr == ""
    assert result.returncode == 141
