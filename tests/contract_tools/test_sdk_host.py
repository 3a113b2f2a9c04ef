"""The SDK's typed inline actions (to a contract, and the chain's token paid natively),
hashes, key recovery and time types, built with the pinned asc and run by the runtime."""

from __future__ import annotations

import hashlib

import pytest

from chain.core.execution.state import Account
from chain.core.primitives.crypto import PrivateKey
from chain.core.primitives.keytext import ripemd160
from chain.core.primitives.types import AccountName
from contract_tools.build import Built
from tests.contract_tools.test_examples_run import Deployed


@pytest.fixture
def kit(hostkit: Built) -> Deployed:
    kit = Deployed(hostkit, "kit", ["alice", "bob"])
    key = PrivateKey(b"\x07" * 32).public_key
    kit.view.put_account(Account(AccountName("kit"), key, balance=100_000))
    return kit


def test_a_contract_pays_bor_and_sends_a_typed_action_inline(kit: Deployed) -> None:
    """sendNativeTransfer moves the chain's token from the contract's account; Action.of
    sends a struct as the data of a contract's action, run one level deeper."""
    kit.push("pay", {"to": "bob", "quantity": "2.5000 BOR", "memo": "thanks"}, "alice")
    assert kit.view.account(AccountName("bob")).balance == 25_000  # type: ignore[union-attr]
    assert kit.view.account(AccountName("kit")).balance == 75_000  # type: ignore[union-attr]
    trace = kit.push("relay", {"who": "alice", "text": "hello"}, "alice").trace
    note = trace.actions[1]
    assert (note.call.action, note.depth, note.console) == ("note", 1, "hello")
    assert note.call.authorization == ("kit",)
    assert kit.abi.decode_action("note", note.call.data) == {"who": "alice", "text": "hello"}


def test_hashes_and_key_recovery_match_the_nodes(kit: Deployed) -> None:
    """sha1, sha512 and ripemd160 give hashlib's digests; recoverKey gives the signer's
    packed key and assertRecoverKey accepts it."""
    data = b"bor" * 50
    out = kit.push("hashes", {"data": data.hex()}, "alice").trace.actions[0].return_value
    assert out == hashlib.sha1(data).digest() + hashlib.sha512(data).digest() + ripemd160(data)
    signer = PrivateKey(b"\x09" * 32)
    digest = hashlib.sha256(b"message").digest()
    sig = signer.sign(digest)
    packed = bytes([0, 31 + sig[64]]) + sig[:64]
    key = kit.read("recover", {"digest": digest.hex(), "signature": packed.hex()})
    assert bytes.fromhex(key) == b"\x00" + bytes(signer.public_key)


def test_time_types_read_the_blocks_time(kit: Deployed) -> None:
    """currentTimePoint, currentTimePointSec and currentBlockTime are the block's time in
    Antelope's three layouts, decoded by the ABI to Antelope's texts."""
    assert kit.read("now", {}) == {
        "point": "2023-11-14T22:13:20.000",
        "seconds": "2023-11-14T22:13:20",
        "slot": "2023-11-14T22:13:20.000",
    }
