"""The explorer as a person sees it in a real browser (Debian's chromium, headless, driven
by Playwright) against a running devnet node: the head climbs live, a transfer shows in its
block and its account, search finds the transaction, a contract's actions and rows are
listed, and nothing overflows a 375 px wide screen."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from chain.abi import parse_abi
from chain.core.execution.actions import Action, Call, SetCode, Transfer
from chain.core.execution.transaction import SignedTransaction, Transaction, tapos_of
from chain.core.primitives.types import AccountName, BlockId
from tests.integration.api.stream_clients import dev_keys
from tests.integration.conftest import NodeProcess, Nodes
from tests.node.api import kv_contract
from tests.support.wait import SLOWDOWN

CHROMIUM = Path("/usr/bin/chromium")
README = Path(__file__).resolve().parents[3] / "README.md"
# Playwright's own browser download does not work without the internet; these flags keep
# the system browser from reaching out (updates, sync, QUIC probes) and from needing a GPU.
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
WAIT_MS = 15_000 * SLOWDOWN
PHONE = {"width": 375, "height": 800}
CONTRACT = "alice"  # holds the kv contract of tests/node/api/kv_contract.py
ROWS = [(3, "carol", 30), (7, "bob", 70)]


def _browser_or_skip() -> Any:
    """Playwright, or a skip where the browser is missing (scripts/bootstrap.sh --dev installs
    both); in CI a missing browser fails rather than passing silently."""
    missing = "" if CHROMIUM.exists() else f"{CHROMIUM} is not installed"
    try:
        from playwright import sync_api
    except ImportError:
        missing = "playwright is not installed"
    if missing:
        if os.environ.get("CI"):
            pytest.fail(missing)
        pytest.skip(missing)
    return sync_api


def _documented_path() -> str:
    """The explorer's path in the README's address (http://127.0.0.1:8888/explorer/)."""
    found = re.search(r"\*\*http://127\.0\.0\.1:8888(/explorer/)\*\*", README.read_text())
    assert found, "README.md gives the explorer's address"
    return found.group(1)


def _push(node: NodeProcess, keys: dict[str, Any], action: Action, signer: str) -> Any:
    info = node.info()
    ref = tapos_of(BlockId(bytes.fromhex(info["head_block_id"])))
    tx = Transaction(int(time.time()) + 120, ref[0], ref[1], (action,))
    stx = SignedTransaction.sign(tx, bytes.fromhex(info["chain_id"]), [keys[signer]])
    body = {"packed_trx": stx.packed.hex(), "signatures": [stx.signatures[0].hex()]}
    answer = node.rpc("/v1/chain/push_transaction", body | {"mode": "commit"})
    assert answer["status"] == "included", answer
    return answer


@pytest.fixture
def chain(nodes: Nodes) -> Iterator[tuple[NodeProcess, dict[str, Any]]]:
    """A one-producer devnet with the kv contract and its rows at CONTRACT, then a transfer
    from alice to carol (its answer, with the last row's transaction id as ``put_id``)."""
    node = nodes.devnet(producers=1).start(wait_head=2)
    keys = dev_keys(node.data_dir)
    code = SetCode(AccountName(CONTRACT), kv_contract.wasm(), kv_contract.ABI)
    _push(node, keys, code, CONTRACT)
    abi = parse_abi(kv_contract.ABI)
    put: dict[str, Any] = {}
    for id_, owner, amount in ROWS:
        data = abi.encode_action("put", {"id": id_, "owner": owner, "amount": amount})
        call = Call(AccountName(CONTRACT), "put", (AccountName("bob"),), data)
        put = _push(node, keys, call, "bob")
    transfer = Transfer(AccountName("alice"), AccountName("carol"), 12_345, "explorer test")
    sent = _push(node, keys, transfer, "alice")
    yield node, sent | {"put_id": put["transaction_id"]}


def test_a_person_follows_the_chain_a_transfer_and_a_contract_in_the_explorer(
    chain: tuple[NodeProcess, dict[str, Any]], tmp_path: Path
) -> None:
    """What the page shows, read from the page the way a person reads it."""
    sync_api = _browser_or_skip()
    node, sent = chain
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        page = browser.new_page(viewport={"width": 1200, "height": 900})
        requests: list[str] = []
        errors: list[str] = []
        page.on("request", lambda request: requests.append(request.url))
        page.on("pageerror", lambda error: errors.append(str(error)))
        phone = browser.new_page(viewport=PHONE)
        try:
            _look(sync_api.expect, page, node, sent)
            _narrow(sync_api.expect, phone, node.url, sent["block_num"])
        except Exception:
            for name, shown in (("wide", page), ("phone", phone)):
                shot = tmp_path / f"explorer-failure-{name}.png"
                shown.screenshot(path=str(shot), full_page=True)
                print(f"explorer screenshot at failure: {shot}")
            raise
        finally:
            browser.close()
    assert errors == []
    foreign = [url for url in requests if not url.startswith((node.url, "ws://127.0.0.1"))]
    assert foreign == [], "the page asks nothing of another origin"


def _look(expect: Any, page: Any, node: NodeProcess, sent: dict[str, Any]) -> None:
    page.goto(node.url + _documented_path(), wait_until="domcontentloaded")
    expect(page.get_by_role("heading", name="Chain overview")).to_be_visible(timeout=WAIT_MS)
    expect(page.locator("#live")).to_have_text(re.compile("^Live"), timeout=WAIT_MS)
    head = page.locator("#head-num")
    expect(head).to_have_text(re.compile(r"^#\d+$"), timeout=WAIT_MS)
    first = int(head.inner_text()[1:])
    page.wait_for_function(
        "n => parseInt(document.querySelector('#head-num').textContent.slice(1)) > n",
        arg=first,
        timeout=WAIT_MS,
    )
    newest = page.locator("#recent-blocks tbody tr").first
    expect(newest).to_contain_text(re.compile(r"#\d+"))
    expect(page.locator("#producers")).to_contain_text("producera")

    tx_id, block_num = sent["transaction_id"], sent["block_num"]
    page.goto(f"{node.url}/explorer/#/block/{block_num}")
    expect(page.get_by_role("heading", name=f"Block #{block_num}")).to_be_visible()
    shown = page.locator("#block-transactions")
    expect(shown).to_contain_text(tx_id[:12])
    expect(shown).to_contain_text("transfer alice → carol 1.2345")

    search = page.get_by_label("Search")
    search.fill(tx_id)
    search.press("Enter")
    expect(page.locator("#tx-id")).to_have_text(tx_id, timeout=WAIT_MS)
    expect(page.get_by_role("link", name=f"#{block_num}")).to_be_visible()

    search.fill("carol")
    search.press("Enter")
    expect(page.get_by_role("heading", name="Account carol")).to_be_visible(timeout=WAIT_MS)
    balance = node.rpc("/v1/chain/get_account", {"account_name": "carol"})
    expect(page.locator("#balance")).to_have_text(balance["core_liquid_balance"])

    block_id = node.rpc("/v1/chain/get_block", {"block_num_or_id": block_num - 1})["id"]
    for query, number in ((str(block_num), block_num), (block_id, block_num - 1)):
        search.fill(query)
        search.press("Enter")
        expect(page.get_by_role("heading", name=f"Block #{number}")).to_be_visible()

    page.get_by_role("link", name="Contracts").click()
    page.get_by_label("Account").fill(CONTRACT)
    page.get_by_role("button", name="Show", exact=True).click()
    actions = page.locator("#contract-actions")
    expect(actions).to_contain_text("put")
    expect(actions).to_contain_text("id: u64, owner: name, amount: u64")
    rows = page.locator("#rows-kv tbody tr")
    expect(rows).to_have_count(len(ROWS), timeout=WAIT_MS)
    expect(rows.nth(1)).to_contain_text("70")

    search.fill(sent["put_id"])
    search.press("Enter")
    expect(page.get_by_role("heading", name=f"1. {CONTRACT}.put by bob")).to_be_visible()
    owner, amount = ROWS[-1][1], ROWS[-1][2]
    traced = page.locator(".action")
    expect(traced).to_contain_text(f'"owner": "{owner}"', timeout=WAIT_MS)
    expect(traced).to_contain_text(f'"amount": {amount}')
    expect(traced.get_by_role("heading", name="stored")).to_be_visible()

    page.get_by_role("link", name="Peers and sync").click()
    sync = node.rpc("/v1/node/sync")
    expect(page.locator("#sync-stage")).to_have_text(sync["stage"], timeout=WAIT_MS)


def _narrow(expect: Any, phone: Any, url: str, block_num: int) -> None:
    """Each page at 375 px: the document is no wider than the screen (wide tables scroll in
    their own box)."""
    for route, heading in (
        ("#/", "Chain overview"),
        (f"#/block/{block_num}", f"Block #{block_num}"),
        ("#/account/carol", "Account carol"),
        (f"#/contract/{CONTRACT}", f"Contract {CONTRACT}"),
        ("#/network", "Peers and sync"),
    ):
        phone.goto(f"{url}/explorer/{route}")
        expect(phone.get_by_role("heading", name=heading, exact=True)).to_be_visible(
            timeout=WAIT_MS
        )
        width = phone.evaluate("document.documentElement.scrollWidth")
        assert width <= PHONE["width"], (route, width)
