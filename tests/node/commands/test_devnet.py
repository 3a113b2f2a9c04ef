"""``node.commands.devnet``: key files instead of keys in config.ini, one devnet per data dir, and
ports checked before anything starts."""

from __future__ import annotations

import argparse
import json
import os
import socket
import stat
from pathlib import Path

import pytest

from genesis.devnet import write_dev_genesis
from node.commands import devnet
from node.config.file import load_config
from node.errors import NodeError


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_prepare_keeps_private_keys_in_0600_files_only(tmp_path: Path) -> None:
    """The devnet's config.ini names each producer's key file (mode 0600) instead of holding
    the key, and the node reads that key from it."""
    nodes = devnet.plan(2, ("127.0.0.1", 18888), 19876)
    devnet.prepare(tmp_path, nodes)
    keys = json.loads((tmp_path / "keys.json").read_text())
    assert _mode(tmp_path / "keys.json") == 0o600
    for node in nodes:
        node_dir = tmp_path / node.name
        ini = (node_dir / "config.ini").read_text()
        assert "PVT_K1_" not in ini
        assert f"=KEYFILE:{(node_dir / 'signing.key').resolve()}" in ini
        assert _mode(node_dir / "signing.key") == 0o600
        config = load_config(argparse.Namespace(config=None, data_dir=str(node_dir)))
        [key] = config.producer.signing_keys.values()
        assert key.to_text() == keys[node.producer]


def test_keys_json_is_made_0600_even_over_an_open_file(tmp_path: Path) -> None:
    """``write_dev_genesis`` leaves keys.json 0600 even where a keys.json readable by others
    was there before (a new file's mode alone would keep the old one)."""
    (tmp_path / "keys.json").write_text("{}")
    (tmp_path / "keys.json").chmod(0o644)
    _, keys = write_dev_genesis(tmp_path, 1)
    assert _mode(keys) == 0o600


def test_a_second_devnet_on_a_data_dir_is_refused(tmp_path: Path) -> None:
    """While one devnet holds its data dir, claiming it again fails naming the holder's pid;
    once released it can be claimed."""
    held = r"a devnet already runs in .* \(pid \d+\)"
    with devnet.claim(tmp_path), pytest.raises(NodeError, match=held), devnet.claim(tmp_path):
        pass
    with devnet.claim(tmp_path):
        assert (tmp_path / devnet.LOCK).read_text() == f"{os.getpid()}\n"


def test_the_lock_goes_however_the_devnet_ends(tmp_path: Path) -> None:
    """An error inside the claim leaves no lock file, and no data dir that the claim made
    and nothing else filled; a data dir that was there stays."""
    made = tmp_path / "new"
    with pytest.raises(NodeError), devnet.claim(made):
        raise NodeError("port in use")
    assert not made.exists()
    with pytest.raises(NodeError), devnet.claim(tmp_path):
        raise NodeError("port in use")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("producers", "p2p", "admin", "option"),
    [
        (1, -5, None, "--p2p-base-port"),
        (1, 0, None, "--p2p-base-port"),
        (3, 65534, None, "--p2p-base-port"),
        (1, 19876, -1, "--admin-base-port"),
        (2, 19876, 65535, "--admin-base-port"),
    ],
)
def test_a_base_port_whose_nodes_leave_1_to_65535_is_refused(
    producers: int, p2p: int, admin: int | None, option: str
) -> None:
    """A base port below 1, or one whose last node's port is above 65535, is refused by option
    name when the devnet is planned, before anything is created."""
    with pytest.raises(NodeError, match=f"^{option}: .* ports are 1 to 65535"):
        devnet.plan(producers, ("127.0.0.1", 18888), p2p, admin)


@pytest.mark.parametrize(
    ("producers", "rpc", "p2p", "admin", "clash"),
    [
        (2, 18888, 18889, 18892, "port 18889 would be both node1's p2p and node2's RPC"),
        (3, 18888, 19876, 19878, "port 19878 would be both node1's admin RPC and node3's p2p"),
        (1, 18888, 18888, None, "port 18888 would be both node1's RPC and node1's p2p"),
        (2, 18888, 19876, None, None),  # the admin ports follow the RPC ports
        (2, 18888, 18890, 18892, None),  # bases exactly 2 apart
    ],
)
def test_bases_closer_than_the_nodes_are_many_are_refused(
    producers: int, rpc: int, p2p: int, admin: int | None, clash: str | None
) -> None:
    """Two listeners of the devnet on one port are refused when it is planned, naming both;
    bases as far apart as there are nodes pass."""
    if clash is None:
        nodes = devnet.plan(producers, ("127.0.0.1", rpc), p2p, admin)
        assert len(nodes) == producers
        return
    with pytest.raises(NodeError, match=f"^{clash}: set --http-server-address, .* at least"):
        devnet.plan(producers, ("127.0.0.1", rpc), p2p, admin)


def test_clear_keeps_only_the_lock(tmp_path: Path) -> None:
    """``--fresh`` deletes the devnet but not the lock this process holds on its dir."""
    with devnet.claim(tmp_path):
        devnet.prepare(tmp_path, devnet.plan(1, ("127.0.0.1", 18888), 19876))
        devnet.clear(tmp_path)
        assert [p.name for p in tmp_path.iterdir()] == [devnet.LOCK]


def test_a_port_in_use_is_named_before_anything_starts(tmp_path: Path) -> None:
    """A port some other process listens on is refused by name and role; free ports pass."""
    rpc, p2p, admin = _free_port(), _free_port(), _free_port()
    nodes = devnet.plan(1, ("127.0.0.1", rpc), p2p, admin)
    devnet.check_ports(nodes)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", p2p))
        taken.listen()
        with pytest.raises(NodeError, match=rf"port {p2p} \(node1's p2p\) is in use"):
            devnet.check_ports(nodes)
