"""Messages of the real ``bor-node`` commands for what an operator commonly gets wrong: a
missing file, an address in use, and the lines ``genesis new`` hands a producer's operator."""

from __future__ import annotations

import socket
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from genesis.model import load_genesis

BIN = Path(sys.executable).parent


def _cli(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "bor-node"), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
    )


def test_verify_of_a_missing_snapshot_names_the_file(tmp_path: Path) -> None:
    """``snapshot verify`` of a file that is not there says so in one line, not Python's
    ``[Errno 2]``."""
    done = _cli("snapshot", "verify", "nope.bin", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr == "bor-node: nope.bin: no such file\n"


def test_genesis_new_writes_each_producers_key_file_and_its_config_line(
    tmp_path: Path,
) -> None:
    """``genesis new`` writes every producer's key to DIR/<producer>.key (0600) and prints
    the signature-provider line that reads it, with the producer's public key."""
    out = tmp_path / "net"
    done = _cli("genesis", "new", "--producers", "2", "--out", out)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    for producer in load_genesis(out / "genesis.json").initial_producers:
        key_file = out / f"{producer.name}.key"
        assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
        assert key_file.read_text().startswith("PVT_K1_")
        wanted = f"=KEYFILE:{key_file}"
        line = next(x for x in lines if x.endswith(wanted))
        assert line.startswith("signature-provider = PUB_K1_")


@pytest.fixture
def taken() -> Iterator[int]:
    """A loopback port some other process listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


def _free() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize(
    ("option", "what"),
    [
        ("--http-server-address", "serve the RPC"),
        ("--admin-http-server-address", "serve the admin RPC"),
        ("--p2p-listen-endpoint", "accept peers"),
    ],
)
def test_an_address_in_use_names_the_option_that_moves_it(
    taken: int, tmp_path: Path, option: str, what: str
) -> None:
    """A listener whose address is taken is one line naming the address and the option to
    choose another, not the OS's bind error."""
    genesis = tmp_path / "g"
    assert _cli("genesis", "new", "--out", genesis).returncode == 0
    addresses = {
        name: f"127.0.0.1:{_free()}"
        for name in (
            "--http-server-address",
            "--admin-http-server-address",
            "--p2p-listen-endpoint",
        )
    }
    addresses[option] = f"127.0.0.1:{taken}"
    flags = [x for pair in addresses.items() for x in pair]
    data = tmp_path / "data"
    done = _cli("run", "--data-dir", data, "--genesis-json", genesis / "genesis.json", *flags)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1] == (
        f"bor-node: cannot {what} on 127.0.0.1:{taken}: the address is in use (another"
        f" node?); choose another with {option}"
    )


def test_a_mempool_share_above_the_whole_is_one_line_naming_both_options(
    tmp_path: Path,
) -> None:
    """``run`` with max-mempool-account-bytes above max-mempool-bytes stops before it opens
    anything, in one line naming both options, with no traceback."""
    done = _cli(
        "run", "--data-dir", tmp_path / "data",
        "--max-mempool-bytes", str(2 << 20), "--max-mempool-account-bytes", str(4 << 20),
    )  # fmt: skip
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "max-mempool-account-bytes" in lines[0] and "max-mempool-bytes" in lines[0]
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "data").exists()


@pytest.mark.parametrize(
    "flags",
    [
        ["--p2p-base-port", "-5"],
        ["--admin-base-port", "-1"],
        ["--producers", "3", "--p2p-base-port", "65534"],
    ],
)
def test_a_devnet_base_port_out_of_range_is_one_line_before_anything_is_made(
    tmp_path: Path, flags: list[str]
) -> None:
    """``devnet`` with a base port whose nodes' ports leave 1..65535 names the option in one
    line and creates nothing: no data dir, no devnet.lock."""
    done = _cli("devnet", *flags, cwd=tmp_path)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert done.stderr.startswith(f"bor-node: {flags[-2]}: ")
    assert done.stderr.count("\n") == 1, done.stderr
    assert list(tmp_path.iterdir()) == []


def test_devnet_bases_that_overlap_are_one_line_before_anything_is_made(tmp_path: Path) -> None:
    """``devnet`` with a p2p base one above the RPC base, for two nodes, names the shared port
    and both listeners in one line, exits 2 and creates nothing."""
    done = _cli(
        "devnet", "--producers", "2", "--http-server-address", "127.0.0.1:19000",
        "--p2p-base-port", "19001", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr == (
        "bor-node: port 19001 would be both node1's p2p and node2's RPC: set"
        " --http-server-address, --p2p-base-port and --admin-base-port at least 2 apart\n"
    )
    assert list(tmp_path.iterdir()) == []


def test_a_devnet_refused_after_its_claim_leaves_no_lock(taken: int, tmp_path: Path) -> None:
    """``devnet`` stopped by a port in use, found once its data dir is claimed, leaves
    neither devnet.lock nor the data dir it made."""
    done = _cli(
        "devnet", "--producers", "1", "--p2p-base-port", str(taken),
        "--http-server-address", f"127.0.0.1:{_free()}", "--admin-base-port", str(_free()),
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 2
    assert f"port {taken} (node1's p2p) is in use" in done.stderr
    assert list(tmp_path.iterdir()) == []
