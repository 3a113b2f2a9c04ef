"""End-to-end encryption through real brokers: docs/bps.md's encryption lines run as written;
the NATS stream then holds only ciphertext, bob reads the plaintext, a member with the right
to consume but no wrap gets the sealed bytes, the sealed message verifies against its anchor,
a rotation wraps a new version for the readers of the day, and a sealed message changed in
the store neither opens nor verifies."""

from __future__ import annotations

import asyncio
import re
import shlex
import stat
import subprocess
import sys
from pathlib import Path

import nats
import pytest

from bps.client import BpsClient
from bps.cluster import Secrets
from bps.crypto import sealed_version
from bps.errors import CannotOpen, Tampered
from chain.core.primitives.crypto import PrivateKey
from tests.integration.bps.conftest import World
from tests.integration.bps.test_integrity import rewrite, verified

ROOT = Path(__file__).resolve().parents[3]
PLAN = b"the plan"


def doc_commands() -> list[str]:
    text = (ROOT / "docs/bps.md").read_text()
    section = text[text.index("## Encryption") :]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block is not None
    return [line.split("  #")[0].strip() for line in block.group(1).splitlines() if line.strip()]


def bor_bps(world: World, line: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """A documented ``bor-bps`` line, pointed at the test's node and devnet keys."""
    args = shlex.split(line)
    assert args[0] == "bor-bps"
    keys = str(world.node.data_dir / "keys.json")
    command = [sys.executable, "-m", "bps.cli", "--node", world.node.url, "--keys", keys]
    return subprocess.run(
        [*command, *args[1:]], cwd=cwd, capture_output=True, text=True, timeout=60
    )


async def stored(world: World, stream: str, seq: int) -> bytes:
    """The message as the brokers hold it, read with the deployment's own NATS password."""
    keys = Secrets.load(world.deployment.secrets_file)
    nc = await nats.connect(
        world.deployment.brokers[0].server.url, user=keys.user, password=keys.password
    )
    try:
        return bytes((await nc.jetstream().get_msg(stream, seq)).data or b"")
    finally:
        await nc.close()


def client(world: World, account: str, enc_key: PrivateKey) -> BpsClient:
    return BpsClient(world.node.url, account, PrivateKey.from_text(world.keys[account]), enc_key)


def test_brokers_store_ciphertext_readers_with_a_wrap_read_plaintext(
    world: World, tmp_path: Path
) -> None:
    """bob and carol may consume acme/orders; only bob and the owner hold a wrap of version 1,
    so carol's client hands back what the broker stores until alice rotates to version 2; a
    sealed message changed in the store then neither opens nor verifies."""
    world.push("alice", "grant", {"tenant": "acme", "principal": "bob", "pattern": "orders",
                                  "rights": 3, "expires": 0})  # fmt: skip
    world.push("alice", "addmember", {"tenant": "acme", "account": "carol", "enckey": ""})
    world.push("alice", "grant", {"tenant": "acme", "principal": "carol", "pattern": "orders",
                                  "rights": 2, "expires": 0})  # fmt: skip
    done = [bor_bps(world, line, tmp_path) for line in doc_commands()]
    for line, result in zip(doc_commands(), done, strict=True):
        assert result.returncode == 0, (line, result.stderr)
    assert stat.S_IMODE((tmp_path / "bob.key").stat().st_mode) == 0o600
    assert "registered in acme" in done[0].stdout and "kept off the chain" in done[1].stdout
    assert '"version": 1, "wrapped_for": ["alice", "bob"]' in done[2].stdout
    assert done[3].stdout.split() == ["1"]
    assert done[4].stdout.splitlines() == ["1\tthe plan"]

    topic_id = world.run("alice", lambda c: c.topic("acme", "orders")).id
    held = asyncio.run(stored(world, f"BPS_{topic_id}_1", 1))
    assert sealed_version(held) == 1 and PLAN not in held

    carol_key = PrivateKey.generate()
    bob_key = PrivateKey.from_text((tmp_path / "bob.key").read_text().strip())
    alice_key = PrivateKey.from_text((tmp_path / "alice.key").read_text().strip())

    async def read(account: str, key: PrivateKey) -> tuple[bytes, bytes]:
        async with client(world, account, key) as c:
            if account == "carol":
                assert await c.set_enckey("acme")  # after the rotation: no wrap for carol
            (message,) = await c.fetch("acme", "orders", 1, 1, 1, 0)
            return message.payload, message.stored

    assert asyncio.run(read("alice", alice_key)) == (PLAN, held)
    assert asyncio.run(read("carol", carol_key)) == (held, held)
    found = verified(world, "bob", "acme", "orders", 1, 1)
    assert (found["first"], found["last"]) == (1, 1)

    async def rotate_and_produce() -> list[int]:
        async with client(world, "alice", alice_key) as alice:
            assert await alice.rotate_topic_key("acme", "orders") == (2, ["alice", "bob", "carol"])
        async with client(world, "bob", bob_key) as bob:
            return await bob.produce("acme", "orders", [b"plan b"], partition=1, encrypt=True)

    assert asyncio.run(rotate_and_produce()) == [2]
    assert sealed_version(asyncio.run(stored(world, f"BPS_{topic_id}_1", 2))) == 2

    async def carol_reads() -> list[bytes]:
        async with client(world, "carol", carol_key) as carol:
            return [m.payload for m in await carol.fetch("acme", "orders", 1, 1, 10, 0)]

    assert asyncio.run(carol_reads()) == [held, b"plan b"]
    verified(world, "bob", "acme", "orders", 1, 2)  # anchored before the store changes
    second = asyncio.run(stored(world, f"BPS_{topic_id}_1", 2))
    flipped = second[:-1] + bytes([second[-1] ^ 1])
    asyncio.run(rewrite(world, f"BPS_{topic_id}_1", f"bps.{topic_id}.1", [held, flipped]))
    with pytest.raises(CannotOpen):
        asyncio.run(carol_reads())
    with pytest.raises(Tampered, match="offset 2 does not match anchor"):
        world.run("bob", lambda c: c.verify("acme", "orders", 1, 2))


def test_encryption_failures_are_one_line(world: World, tmp_path: Path) -> None:
    """An existing key file is never overwritten, a bad key file, producing sealed without a
    key or without a wrap, and a non-owner's rotation each fail in one line, exit 1."""
    (tmp_path / "taken.key").write_text("kept\n")
    (tmp_path / "carol.key").write_text(PrivateKey.generate().to_text())
    cases = {
        "bor-bps --account bob enckey acme --out taken.key": "taken.key exists",
        "bor-bps --account bob consume acme orders --enc-key-file taken.key": "taken.key: ",
        "bor-bps --account carol produce globex secrets x --encrypt": "needs an encryption key",
        "bor-bps --account carol produce globex secrets x --encrypt --enc-key-file carol.key":
            "no key of globex/secrets is wrapped for carol",
        "bor-bps --account bob topickey acme orders --enc-key-file carol.key":
            "only acme's owner alice wraps",
    }  # fmt: skip
    for line, why in cases.items():
        result = bor_bps(world, line, tmp_path)
        assert result.returncode == 1, (line, result.stdout)
        assert len(result.stderr.splitlines()) == 1 and why in result.stderr, (line, result.stderr)
    assert (tmp_path / "taken.key").read_text() == "kept\n"
