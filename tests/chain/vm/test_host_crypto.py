"""The hashing and key-recovery host functions: Antelope's digests and packed keys, their
fuel, and how a wrong length, type, header, signature or pointer aborts the action."""

from __future__ import annotations

import hashlib

import pytest

from chain.core.execution.state import StateView
from chain.core.primitives.crypto import PrivateKey
from chain.core.primitives.errors import ContractError, OutOfFuel
from chain.core.primitives.keytext import ripemd160, ripemd160_python
from chain.testing import MemoryKV
from chain.vm import ContractRuntime
from chain.vm.host_crypto import RECOVER_FUEL
from tests.chain.vm.wat import contract, deploy, run

SIGNER = PrivateKey(b"\x03" * 32)
DIGEST = hashlib.sha256(b"hello").digest()
_SIG = SIGNER.sign(DIGEST)
PACKED_SIG = bytes([0, 31 + _SIG[64]]) + _SIG[:64]
PACKED_KEY = b"\x00" + bytes(SIGNER.public_key)


@pytest.fixture(scope="module")
def runtime() -> ContractRuntime:
    return ContractRuntime()


def hexed(data: bytes) -> str:
    return "".join(f"\\{b:02x}" for b in data)


def go(runtime: ContractRuntime, body: str, memory: bytes = b"", fuel: int = 20_000_000) -> bytes:
    """Run ``body`` with ``memory`` at address 0; the return value is bytes 1000..1200."""
    view = StateView(MemoryKV())
    code = contract(
        body + "(call $set_action_return_value (i32.const 1000) (i32.const 200))",
        data=f'(data (i32.const 0) "{hexed(memory)}")',
    )
    deploy(view, runtime, "crypto", code)
    return run(runtime, view, "crypto", fuel=fuel).actions[0].return_value


def test_digests_are_hashlibs(runtime: ContractRuntime) -> None:
    """sha1, sha256, sha512 and ripemd160 write the digests hashlib (and the checked pure
    RIPEMD-160) give, and each assert_* accepts its own digest."""
    data = b"antelope" * 20
    n = len(data)
    out = go(
        runtime,
        f"""(call $sha1 (i32.const 0) (i32.const {n}) (i32.const 1000))
        (call $sha256 (i32.const 0) (i32.const {n}) (i32.const 1020))
        (call $sha512 (i32.const 0) (i32.const {n}) (i32.const 1052))
        (call $ripemd160 (i32.const 0) (i32.const {n}) (i32.const 1116))
        (call $assert_sha1 (i32.const 0) (i32.const {n}) (i32.const 1000))
        (call $assert_sha256 (i32.const 0) (i32.const {n}) (i32.const 1020))
        (call $assert_sha512 (i32.const 0) (i32.const {n}) (i32.const 1052))
        (call $assert_ripemd160 (i32.const 0) (i32.const {n}) (i32.const 1116))""",
        data,
    )
    assert out[:20] == hashlib.sha1(data).digest()
    assert out[20:52] == hashlib.sha256(data).digest()
    assert out[52:116] == hashlib.sha512(data).digest()
    assert out[116:136] == ripemd160(data) == ripemd160_python(data)


def test_recover_key_writes_the_packed_key(runtime: ContractRuntime) -> None:
    """recover_key returns 34 and writes type byte 0 and the compressed key; a short buffer
    gets what fits; assert_recover_key accepts the signer's key."""
    memory = DIGEST + PACKED_SIG + PACKED_KEY  # at 0, 32, 98
    out = go(
        runtime,
        """(i32.store (i32.const 1100) (call $recover_key (i32.const 0) (i32.const 32)
              (i32.const 66) (i32.const 1000) (i32.const 34)))
           (drop (call $recover_key (i32.const 0) (i32.const 32) (i32.const 66)
              (i32.const 1050) (i32.const 5)))
           (call $assert_recover_key (i32.const 0) (i32.const 32) (i32.const 66)
              (i32.const 98) (i32.const 34))""",
        memory,
    )
    assert out[:34] == PACKED_KEY
    assert int.from_bytes(out[100:104], "little") == 34
    assert out[50:55] == PACKED_KEY[:5] and out[55:60] == bytes(5)


def test_recovery_costs_its_fuel(runtime: ContractRuntime) -> None:
    """A recovery is charged RECOVER_FUEL before it runs: without it, the action is out of
    fuel."""
    body = """(drop (call $recover_key (i32.const 0) (i32.const 32) (i32.const 66)
        (i32.const 1000) (i32.const 34)))"""
    with pytest.raises(OutOfFuel):
        go(runtime, body, DIGEST + PACKED_SIG, fuel=RECOVER_FUEL)


def test_recovery_costs_no_more_than_its_fuel(runtime: ContractRuntime) -> None:
    """A recovery with RECOVER_FUEL and a few host calls' worth beside runs: it is charged
    RECOVER_FUEL, not RECOVER_FUEL counted as bytes."""
    body = """(drop (call $recover_key (i32.const 0) (i32.const 32) (i32.const 66)
        (i32.const 1000) (i32.const 34)))"""
    go(runtime, body, DIGEST + PACKED_SIG, fuel=2 * RECOVER_FUEL)


HIGH_S = bytearray(PACKED_SIG)
HIGH_S[34:66] = (
    0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141
    - int.from_bytes(PACKED_SIG[34:66], "big")
).to_bytes(32, "big")


@pytest.mark.parametrize(
    ("body", "memory", "error"),
    [
        (
            "(call $assert_sha256 (i32.const 0) (i32.const 5) (i32.const 100))",
            b"hello",
            "assert_sha256: the data does not hash to the given digest",
        ),
        (
            "(call $sha512 (i32.const 65500) (i32.const 100) (i32.const 0))",
            b"",
            "out of bounds memory access",
        ),
        (
            "(call $sha1 (i32.const 0) (i32.const 4) (i32.const 65530))",
            b"",
            "out of bounds memory access",
        ),
        (
            "(drop (call $recover_key (i32.const 0) (i32.const 32) (i32.const 65)"
            " (i32.const 1000) (i32.const 34)))",
            DIGEST + PACKED_SIG,
            "recover_key: a K1 signature packs to 66 bytes, not 65",
        ),
        (
            "(drop (call $recover_key (i32.const 0) (i32.const 32) (i32.const 66)"
            " (i32.const 1000) (i32.const 34)))",
            DIGEST + b"\x01" + PACKED_SIG[1:],
            "signature type 1: only K1",
        ),
        (
            "(drop (call $recover_key (i32.const 0) (i32.const 32) (i32.const 66)"
            " (i32.const 1000) (i32.const 34)))",
            DIGEST + b"\x00\x1b" + PACKED_SIG[2:],
            "header 27 is no compressed K1 recovery id",
        ),
        (
            "(drop (call $recover_key (i32.const 0) (i32.const 32) (i32.const 66)"
            " (i32.const 1000) (i32.const 34)))",
            DIGEST + bytes(HIGH_S),
            "not in canonical low-s form",
        ),
        (
            "(call $assert_recover_key (i32.const 0) (i32.const 32) (i32.const 66)"
            " (i32.const 98) (i32.const 34))",
            DIGEST + PACKED_SIG + b"\x00" + bytes(PrivateKey(b"\x04" * 32).public_key),
            "assert_recover_key: the signature was not made by the given key",
        ),
        (
            "(call $assert_recover_key (i32.const 0) (i32.const 32) (i32.const 66)"
            " (i32.const 98) (i32.const 33))",
            DIGEST + PACKED_SIG + PACKED_KEY,
            "a K1 public key packs to 34 bytes, not 33",
        ),
    ],
    ids=[
        "wrong-digest",
        "data-past-memory",
        "out-past-memory",
        "short-signature",
        "r1-signature",
        "uncompressed-header",
        "high-s",
        "other-key",
        "short-key",
    ],
)
def test_hostile_crypto_calls_abort(
    runtime: ContractRuntime, body: str, memory: bytes, error: str
) -> None:
    """A wrong digest, a pointer past memory, a signature of another length, type, header
    or a malleated one, and a key that did not sign abort the action with the reason."""
    with pytest.raises(ContractError, match=error):
        go(runtime, body, memory)
