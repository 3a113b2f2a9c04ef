"""What Antelope's clients read: the fields added to get_info, get_block and get_account (BoR's
own fields unchanged), get_abi and get_code under Antelope's ``account_name``, and the native
token's get_currency_balance and get_currency_stats."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from chain.core.execution.actions import Transfer
from chain.core.execution.state import Producer
from chain.core.primitives.crypto import PrivateKey, public_key_to_text
from chain.core.primitives.keytext import public_key_text, signature_text
from chain.core.primitives.types import AccountName
from genesis.testing import DevNet
from node.api.antelope import producers_page
from node.api.fields import BadField, Field, MissingField, Text, object_schema, parse_fields
from tests.node.api.test_rpc import A, B, Rig, _run

NAME = Text("[a-z]{1,12}", 12, "a name")


def test_a_field_with_an_alias_takes_either_name_and_checks_both() -> None:
    """A field is given under its name or its alias (the name wins), is missing under
    neither, and is refused when either is malformed; the schema asks for one of them."""
    field = Field("account", NAME, "the account", alias="account_name")
    assert parse_fields([field], {"account_name": "bob"}) == {"account": "bob"}
    assert parse_fields([field], {"account": "al", "account_name": "bob"}) == {"account": "al"}
    try:
        parse_fields([field], {})
    except MissingField as err:
        assert "account_name" in str(err)
    else:
        raise AssertionError("neither name given, yet accepted")
    try:
        parse_fields([field], {"account": "al", "account_name": 7})
    except BadField as err:
        assert err.field == "account_name"
    else:
        raise AssertionError("a malformed alias, yet accepted")
    schema = object_schema([field])
    assert set(schema["properties"]) == {"account", "account_name"}
    assert schema["allOf"] == [
        {"anyOf": [{"required": ["account"]}, {"required": ["account_name"]}]}
    ]


def test_info_block_and_account_carry_antelopes_fields(tmp_path: Path) -> None:
    """get_info has the block limits (fuel, bytes), get_block confirmed and its TaPoS
    prefix, get_account the head, the liquid balance as an asset and the key as a permission;
    BoR's own fields are still there."""

    async def scenario(rig: Rig) -> None:
        params = rig.runner.view.params
        await rig.produce()
        _, info = await rig.post("/v1/chain/get_info", {})
        assert info["block_cpu_limit"] == info["virtual_block_cpu_limit"] == params.max_block_fuel
        assert info["block_net_limit"] == params.max_block_bytes
        assert info["fork_db_head_block_id"] == info["head_block_id"]
        assert info["token_symbol"] == "BOR"
        _, block = await rig.post("/v1/chain/get_block", {"block_num_or_id": 1})
        block_id = bytes.fromhex(block["id"])
        assert block["confirmed"] == 0
        assert block["ref_block_prefix"] == int.from_bytes(block_id[8:12], "little")
        assert block["producer_signature"].startswith("SIG_K1_") and "irreversible" in block
        _, account = await rig.post("/v1/chain/get_account", {"account_name": A})
        assert account["head_block_num"] == info["head_block_num"]
        assert account["core_liquid_balance"].endswith(" BOR")
        whole, fraction = account["core_liquid_balance"][:-4].split(".")
        assert int(whole + fraction) == account["balance"] and len(fraction) == 4
        key = bytes.fromhex(account["key"].removeprefix("PUB_K1_"))
        assert account["key"] == public_key_to_text(key)
        active = {p["perm_name"]: p for p in account["permissions"]}["active"]
        assert active["required_auth"]["keys"] == [{"key": public_key_text(key), "weight": 1}]
        assert account["voter_info"]["owner"] == A and "weight" in account["voter_info"]

    _run(tmp_path, scenario)


def test_a_push_signed_in_sig_k1_text_shows_in_its_block_as_antelope_lists_it(
    tmp_path: Path,
) -> None:
    """push_transaction takes Antelope's SIG_K1_ signatures (a changed character fails the
    text's checksum: a 401 bad_signature, as a signature that recovers no key); the block
    then has the producer's signature as SIG_K1_ text (hex beside) and the transaction with
    Antelope's receipt fields beside BoR's."""

    async def scenario(rig: Rig) -> None:
        stx = await rig.tx(Transfer(A, B, 5))
        texts = [signature_text(s) for s in stx.signatures]
        body = {"packed_trx": stx.packed.hex(), "mode": "sync"}
        typo = texts[0][:-1] + ("2" if texts[0][-1] != "2" else "3")
        status, error = await rig.post("/v1/chain/push_transaction", body | {"signatures": [typo]})
        assert (status, error["error"]["name"]) == (401, "bad_signature")
        assert "checksum" in error["error"]["what"]
        status, pushed = await rig.post("/v1/chain/push_transaction", body | {"signatures": texts})
        assert (status, pushed["status"]) == (200, "accepted"), pushed
        produced = await rig.produce()
        query = {"block_num_or_id": produced.header.num}
        _, block = await rig.post("/v1/chain/get_block", query)
        assert block["producer_signature"] == signature_text(produced.signature)
        assert block["producer_signature_hex"] == produced.signature.hex()
        (entry,) = block["transactions"]
        assert entry["id"] == stx.id.hex() and entry["signatures"] == [stx.signatures[0].hex()]
        assert (entry["status"], entry["cpu_usage_us"]) == ("executed", 0)
        assert entry["net_usage_words"] == (len(stx.packed) + 7) // 8
        assert entry["trx"] | {"id": stx.id.hex(), "signatures": texts} == entry["trx"]
        assert entry["trx"]["packed_trx"] == stx.packed.hex()

    _run(tmp_path, scenario)


def test_get_abi_and_get_code_take_antelopes_account_name(tmp_path: Path) -> None:
    """get_abi and get_code take account_name as Antelope's clients send it: an account
    without a contract is 404, not a 400 for the field."""

    async def scenario(rig: Rig) -> None:
        for path in ("/v1/chain/get_abi", "/v1/chain/get_code"):
            status, error = await rig.post(path, {"account_name": A})
            assert (status, error["error"]["name"]) == (404, "not_found"), path
            status, error = await rig.post(path, {})
            assert (status, error["error"]["name"]) == (400, "missing_field"), path

    _run(tmp_path, scenario)


def test_native_balances_and_supply_as_antelope_lists_them(tmp_path: Path) -> None:
    """get_currency_balance lists the native liquid balance as an asset (none for another
    symbol; 404 for no such account); get_currency_stats gives the supply, which a transfer
    leaves unchanged, and refuses another symbol."""

    async def scenario(rig: Rig) -> None:
        native = {"code": "eosio.token", "account": A}
        _, account = await rig.post("/v1/chain/get_account", {"account_name": A})
        status, balances = await rig.post("/v1/chain/get_currency_balance", native)
        assert (status, balances) == (200, [account["core_liquid_balance"]])
        assert (await rig.post("/v1/chain/get_currency_balance", native | {"symbol": "BOR"}))[
            1
        ] == balances
        status, none = await rig.post("/v1/chain/get_currency_balance", native | {"symbol": "X"})
        assert (status, none) == (200, [])
        unknown = native | {"account": "nobody"}
        assert (await rig.post("/v1/chain/get_currency_balance", unknown))[0] == 404
        stats_body = {"code": "eosio.token", "symbol": "BOR"}
        status, stats = await rig.post("/v1/chain/get_currency_stats", stats_body)
        supply = rig.net.genesis.token_supply
        whole, fraction = stats["BOR"]["supply"][:-4].split(".")
        assert status == 200 and int(whole + fraction) == supply
        assert stats["BOR"]["max_supply"] == stats["BOR"]["supply"]
        await rig.tx(Transfer(A, B, 5))
        assert (await rig.post("/v1/chain/get_currency_stats", stats_body))[1] == stats
        other = {"code": "eosio.token", "symbol": "TOK"}
        assert (await rig.post("/v1/chain/get_currency_stats", other))[0] == 404

    _run(tmp_path, scenario)


def test_producers_page_by_votes_with_more_naming_the_next() -> None:
    """Producers come most votes first (ties by name); lower_bound starts at a producer (an
    unknown one gives none, as nodeos); more names the next; json false gives hex."""
    key = PrivateKey.from_text("PVT_K1_" + "11" * 32).public_key
    producers = [
        Producer(AccountName(n), key, total_votes=v, registered=n != "dan")
        for n, v in (("carol", 5), ("alice", 9), ("bob", 5), ("dan", 0))
    ]
    first = producers_page(producers, {"alice"}, "", 2, True)
    assert [r["owner"] for r in first["rows"]] == ["alice", "bob"] and first["more"] == "carol"
    top = first["rows"][0]
    assert (top["total_votes"], top["voted_stake"], top["is_active"]) == (
        "9.00000000000000000",
        9,
        1,
    )
    assert top["producer_key"] == public_key_text(key) and top["key"] == public_key_to_text(key)
    assert (top["in_schedule"], first["rows"][1]["in_schedule"]) == (True, False)
    assert first["total_producer_vote_weight"] == "19.00000000000000000"
    rest = producers_page(producers, set(), first["more"], 2, True)
    assert [(r["owner"], r["is_active"]) for r in rest["rows"]] == [("carol", 1), ("dan", 0)]
    assert rest["more"] == ""
    assert producers_page(producers, set(), "nobody", 2, True)["rows"] == []
    assert producers_page(producers, set(), "", 1, False)["rows"] == [producers[1].encode().hex()]


def test_get_producers_takes_antelopes_request(tmp_path: Path) -> None:
    """get_producers answers eosjs' request (json, lower_bound, limit) page by page, every
    producer once, with the schedules beside; a limit past 1000 is a 400."""

    async def scenario(rig: Rig) -> None:
        await rig.produce()
        seen: list[str] = []
        page: dict[str, Any] = {"more": ""}
        while True:
            body = {"json": True, "lower_bound": page["more"], "limit": 1}
            status, page = await rig.post("/v1/chain/get_producers", body)
            assert status == 200 and len(page["rows"]) == 1, page
            seen.append(page["rows"][0]["owner"])
            if not page["more"]:
                break
        assert sorted(seen) == ["producera", "producerb", "producerc"]
        assert page["active"]["producers"][0]["block_signing_key"].startswith("PUB_K1_")
        status, error = await rig.post("/v1/chain/get_producers", {"limit": 1001})
        assert (status, error["error"]["name"]) == (400, "bad_field")

    _run(tmp_path, scenario, net=DevNet.create(3))
