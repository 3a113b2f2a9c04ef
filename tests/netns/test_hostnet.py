"""``scripts.netns``: hosts that reach each other over the data bridge and nothing else, links
and partitions that cut them, address changes, and teardown that leaves no trace."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from functools import partial

import pytest

from scripts.netns import ETC_NETNS, Host, HostNet, ip, sweep
from tests.netns.conftest import needs_netns
from tests.support.wait import wait_until

PORT = 7000
# Accepts connections forever; a probe that connects within its timeout has reached the host.
SERVER = (
    "import socket\n"
    f"s = socket.create_server(('0.0.0.0', {PORT}))\n"
    "while True:\n"
    "    s.accept()[0].close()\n"
)
PROBE = "import socket, sys; socket.create_connection((sys.argv[1], {port}), timeout=1)"


@pytest.fixture
def servers(hostnet: HostNet) -> Iterator[HostNet]:
    """A listener on every host of the four (killed with the namespaces)."""
    procs = [
        subprocess.Popen([*h.exec_prefix, sys.executable, "-c", SERVER]) for h in hostnet.hosts
    ]
    for h in hostnet.hosts:
        wait_until(
            partial(reaches_from_root, h.control), 15, f"{h.control} to listen", interval=0.1
        )
    yield hostnet
    for proc in procs:
        proc.kill()
        proc.wait()


def reaches(src: Host, address: str) -> bool:
    probe = PROBE.format(port=PORT)
    done = subprocess.run(
        [*src.exec_prefix, sys.executable, "-c", probe, address], capture_output=True
    )
    return done.returncode == 0


def comes_back(src: Host, address: str) -> bool:
    """Whether ``src`` reaches ``address`` within 5 s: after a cut, ARP has to resolve anew
    (an entry that failed during the cut is retried once a second)."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        if reaches(src, address):
            return True
    return False


def reaches_from_root(address: str) -> bool:
    try:
        socket.create_connection((address, PORT), timeout=0.2).close()
    except OSError:
        return False
    return True


def test_hosts_reach_each_other_on_data_addresses_only(servers: HostNet) -> None:
    """Host 1 reaches host 2's data address, not its control address (control ports are
    isolated); the root namespace reaches every control address."""
    h1, h2 = servers.host(1), servers.host(2)
    assert reaches(h1, h2.address)
    assert not reaches(h1, h2.control)
    assert all(reaches_from_root(h.control) for h in servers.hosts)


def test_a_partition_cuts_between_groups_only_and_heal_joins_them(servers: HostNet) -> None:
    """Partitioned [1, 2] / [3, 4], hosts reach their own group only, while the root still
    reaches them all; healed, everyone reaches everyone again within seconds."""
    h = servers.hosts
    servers.partition([1, 2], [3, 4])
    assert reaches(h[0], h[1].address) and reaches(h[2], h[3].address)
    assert not reaches(h[0], h[2].address) and not reaches(h[3], h[1].address)
    assert all(reaches_from_root(x.control) for x in h)
    servers.heal()
    assert comes_back(h[0], h[2].address) and comes_back(h[3], h[1].address)


def test_a_link_down_isolates_one_host_until_it_is_up(servers: HostNet) -> None:
    """Host 3's link down: nobody reaches it nor it anybody; up again, it is back."""
    h = servers.hosts
    servers.set_link(3, up=False)
    assert not reaches(h[0], h[2].address) and not reaches(h[2], h[1].address)
    assert reaches(h[0], h[1].address)
    servers.set_link(3, up=True)
    assert comes_back(h[0], h[2].address)


def test_a_moved_host_answers_at_its_new_address_only(servers: HostNet) -> None:
    """After ``move`` the host has the new data address and has lost the old one."""
    old = servers.host(2).address
    moved = servers.move(2, "10.88.0.77")
    assert moved.address == "10.88.0.77" == servers.host(2).address
    assert reaches(servers.host(1), "10.88.0.77")
    assert not reaches(servers.host(1), old)


def test_names_follow_a_move_even_for_a_running_process(servers: HostNet) -> None:
    """``h2`` resolves to host 2's data address in every host; after a move a process that
    was already running resolves it to the new one (its /etc/hosts is rewritten in place)."""
    lookup = (
        "import socket, sys\nfor _ in sys.stdin:\n    print(socket.gethostbyname('h2'), flush=True)"
    )
    resolver = subprocess.Popen(
        [*servers.host(1).exec_prefix, sys.executable, "-c", lookup],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert resolver.stdin is not None and resolver.stdout is not None
    try:
        resolver.stdin.write("?\n")
        resolver.stdin.flush()
        assert resolver.stdout.readline().strip() == servers.host(2).address
        servers.move(2, "10.88.0.78")
        resolver.stdin.write("?\n")
        resolver.stdin.flush()
        assert resolver.stdout.readline().strip() == "10.88.0.78"
        assert reaches(servers.host(3), "h2")
    finally:
        resolver.kill()
        resolver.wait()


@needs_netns
def test_teardown_removes_every_namespace_and_the_root_link() -> None:
    """``down`` (or leaving the ``with``) deletes the namespaces and the root's control link,
    and kills what ran inside."""
    with HostNet(2, tag=f"bor{os.getpid()}t") as net:
        names = [h.netns for h in net.hosts] + [net.bridge]
        sleeper = subprocess.Popen([*net.host(1).exec_prefix, "sleep", "60"])
    assert sleeper.wait(timeout=5) == -9
    listed = ip("netns", "list")
    assert not any(name in listed.split() for name in names)
    assert not any((ETC_NETNS / name).exists() for name in names)
    assert net.root_link not in ip("-o", "link", "show")


@needs_netns
def test_sweep_deletes_namespaces_of_dead_runs_only() -> None:
    """A namespace named for a process that is gone is swept; one of a live process is not."""
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale, live = f"bor{dead.pid}-h1", f"bor{os.getpid()}-h9"
    try:
        ip("netns", "add", stale)
        ip("netns", "add", live)
        assert stale in sweep()
        listed = ip("netns", "list").split()
        assert stale not in listed and live in listed
    finally:
        for name in (stale, live):
            subprocess.run(["ip", "netns", "del", name], capture_output=True)
