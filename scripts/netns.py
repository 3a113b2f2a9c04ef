"""Hosts as Linux network namespaces: a network whose links really go down.

Each host is a namespace with two links into one bridge namespace. ``eth0`` is on the data
bridge, the network the nodes talk over (10.88.0.<i>/24; these addresses exist only inside
the namespaces, so two runs never clash). ``ctl`` is on the control bridge, which the root
namespace joins too (10.89.<k>.0/24, ``k`` free in the root namespace): the test process or a
person reaches every node's RPC there, whatever happens to the data network. Control ports
are isolated from each other, so hosts cannot reach one another through it.

Faults are what ``ip link`` can do: a host's link down (its port on the data bridge), a
partition (each group of hosts moved onto a bridge of its own) and an address change. Frames
across a cut are dropped without a word, so TCP connections across it hang rather than close,
as on a real network: the nodes must notice by themselves. This kernel has no ``tc netem`` and
no ``iptables``: there is no delay, loss or slow link to simulate.

Hosts know each other by name: ``h<i>`` resolves to host i's data address inside every host
(``ip netns exec`` mounts ``/etc/netns/<netns>/hosts`` over ``/etc/hosts``; ``move`` rewrites
it in place), as a DNS name would after an operator moved a machine.

Every namespace is named ``<tag>-br`` or ``<tag>-h<i>``, the root namespace's control link
``<tag>c`` (interface names have at most 15 characters). The tag is ``bor<pid>`` unless given;
``sweep`` removes what runs whose process has died left behind, and nothing else.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
from collections.abc import Collection
from dataclasses import dataclass, replace
from pathlib import Path
from types import TracebackType

from genesis.devnet import producer_names
from node.commands.devnet import DevNode

DATA_PREFIX = "10.88.0"
CONTROL_NET = "10.89"
ROOT_HOST = 254  # the root namespace's address on the control bridge
MAX_HOSTS = 200
RPC_PORT = 8888  # every host has its own ports: the defaults of bor-node, on every host
P2P_PORT = 9876
ADMIN_PORT = 8889  # on each host's loopback, as bor-node's default: reached from inside the host
_STALE = re.compile(r"^bor(\d+)-(br|h\d+)$")
ETC_NETNS = Path("/etc/netns")  # ip netns exec's per-namespace /etc overrides


class NetnsError(Exception):
    """An ``ip`` command failed, or namespaces cannot be made here."""


@dataclass(frozen=True, slots=True)
class Host:
    """One namespaced host: its data address (peers) and control address (RPC)."""

    index: int
    netns: str
    address: str
    control: str

    @property
    def exec_prefix(self) -> list[str]:
        """Prefix a command with this to run it inside the host."""
        return ["ip", "netns", "exec", self.netns]


def unavailable() -> str | None:
    """Why namespaces cannot be made here (not root, no ``ip``), or None if they can."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None:
        return "no `ip` command (iproute2)"
    probe = f"bor{os.getpid()}-probe"
    done = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if done.returncode != 0:
        return f"`ip netns add` failed: {done.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


def ip(*args: str, netns: str | None = None) -> str:
    """Run ``ip`` (in ``netns`` if given); its output, or NetnsError with its stderr."""
    cmd = ["ip", *(["-n", netns] if netns else []), *args]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise NetnsError(f"{' '.join(cmd)}: {done.stderr.strip()}")
    return done.stdout


def kill_inside(netns: str) -> None:
    """SIGKILL every process left in ``netns`` (a node that outlived its test)."""
    done = subprocess.run(["ip", "netns", "pids", netns], capture_output=True, text=True)
    for pid in done.stdout.split():
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(pid), signal.SIGKILL)


def delete(netns: str) -> None:
    kill_inside(netns)
    subprocess.run(["ip", "netns", "del", netns], capture_output=True)
    shutil.rmtree(ETC_NETNS / netns, ignore_errors=True)


def teardown(tag: str) -> list[str]:
    """Delete every namespace named ``<tag>-…`` (killing what runs there) and the root's
    control link ``<tag>c``; the namespaces deleted."""
    names = sorted(n for n in _netns_names() if n.startswith(f"{tag}-"))
    for name in sorted(names, key=lambda n: n == f"{tag}-br"):  # hosts first, the bridge last
        delete(name)
    # Deleting the bridge namespace takes the link with it (its peer end is there); in case
    # that namespace was already gone:
    subprocess.run(["ip", "link", "del", f"{tag}c"], capture_output=True)
    return names


def _netns_names() -> set[str]:
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    names = {line.split()[0] for line in listed.splitlines() if line.strip()}
    if ETC_NETNS.is_dir():
        names |= {path.name for path in ETC_NETNS.iterdir()}
    return names


def sweep() -> list[str]:
    """Delete the namespaces of earlier runs whose process is gone; the names deleted."""
    gone = []
    for name in sorted(_netns_names()):
        match = _STALE.match(name)
        if match and not _alive(int(match.group(1))):
            delete(name)
            gone.append(name)
    return gone


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _free_control_net(tag: str) -> str:
    """A 10.89.<k> prefix no address of the root namespace is in (k from the pid, then on)."""
    used = ip("-4", "-o", "addr", "show")
    start = (sum(tag.encode()) + os.getpid()) % 250
    for step in range(250):
        prefix = f"{CONTROL_NET}.{(start + step) % 250}"
        if f" {prefix}." not in used:
            return prefix
    raise NetnsError(f"no free {CONTROL_NET}.x.0/24 in the root namespace")


class HostNet:
    """``count`` hosts on one bridge; ``up`` makes them, ``down`` removes every trace."""

    def __init__(self, count: int, tag: str | None = None) -> None:
        if not 1 <= count <= MAX_HOSTS:
            raise NetnsError(f"1 to {MAX_HOSTS} hosts, not {count}")
        self.count = count
        self.tag = tag or f"bor{os.getpid()}"
        self.bridge = f"{self.tag}-br"
        self.root_link = f"{self.tag}c"
        if len(self.root_link) > 15:
            raise NetnsError(f"tag {self.tag!r} is too long for an interface name")
        self.hosts: list[Host] = []
        self._bridges = ["br0"]  # data bridges in use; a partition adds one per extra group

    def __enter__(self) -> HostNet:
        return self.up()

    def __exit__(
        self, kind: type[BaseException] | None, err: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.down()

    def host(self, index: int) -> Host:
        return self.hosts[index - 1]

    @property
    def root_address(self) -> str:
        """The root namespace's address on the control bridge."""
        return self.hosts[0].control.rsplit(".", 1)[0] + f".{ROOT_HOST}"

    def up(self) -> HostNet:
        """Make the bridge namespace, the hosts and the root's control link (all or nothing)."""
        sweep()
        try:
            self._make()
        except BaseException:
            self.down()
            raise
        return self

    def _make(self) -> None:
        br = self.bridge
        control = _free_control_net(self.tag)
        ip("netns", "add", br)
        for name in ("br0", "ctl"):
            ip("link", "add", name, "type", "bridge", netns=br)
            ip("link", "set", name, "up", netns=br)
        ip("link", "add", self.root_link, "type", "veth", "peer", "name", "root", "netns", br)
        ip("link", "set", "root", "master", "ctl", "up", netns=br)
        ip("addr", "add", f"{control}.{ROOT_HOST}/24", "dev", self.root_link)
        ip("link", "set", self.root_link, "up")
        for i in range(1, self.count + 1):
            host = Host(i, f"{self.tag}-h{i}", f"{DATA_PREFIX}.{i}", f"{control}.{i}")
            ip("netns", "add", host.netns)
            ip("link", "set", "lo", "up", netns=host.netns)
            for inner, outer, bridge in (("eth0", f"h{i}", "br0"), ("ctl", f"c{i}", "ctl")):
                ip(
                    "link",
                    "add",
                    inner,
                    "netns",
                    host.netns,
                    "type",
                    "veth",
                    "peer",
                    "name",
                    outer,
                    "netns",
                    br,
                )
                ip("link", "set", outer, "master", bridge, "up", netns=br)
                ip("link", "set", inner, "up", netns=host.netns)
            subprocess.run(
                ["bridge", "-n", br, "link", "set", "dev", f"c{i}", "isolated", "on"],
                capture_output=True,
            )
            ip("addr", "add", f"{host.address}/24", "dev", "eth0", netns=host.netns)
            ip("addr", "add", f"{host.control}/24", "dev", "ctl", netns=host.netns)
            self.hosts.append(host)
        self._write_names()

    def down(self) -> None:
        """Kill what runs in the hosts and delete every namespace and link of this net."""
        teardown(self.tag)
        self.hosts = []

    # --- faults ---------------------------------------------------------------------------

    def set_link(self, index: int, up: bool) -> None:
        """Take host ``index``'s data link down (frames to and from it vanish) or up."""
        ip("link", "set", f"h{index}", "up" if up else "down", netns=self.bridge)

    def partition(self, *groups: Collection[int]) -> None:
        """Split the data network: each group on a bridge of its own (hosts in no group stay
        with the first). Connections across the cut hang; nothing tells either side."""
        for n, group in enumerate(groups):
            bridge = self._bridge(n)
            for index in group:
                ip("link", "set", f"h{index}", "master", bridge, netns=self.bridge)

    def heal(self) -> None:
        """Every host back on one bridge, every link up."""
        for index in range(1, self.count + 1):
            ip("link", "set", f"h{index}", "master", "br0", "up", netns=self.bridge)

    def move(self, index: int, address: str) -> Host:
        """Give host ``index`` a new data address (the old one is gone at once)."""
        host = self.host(index)
        ip("addr", "flush", "dev", "eth0", netns=host.netns)
        ip("addr", "add", f"{address}/24", "dev", "eth0", netns=host.netns)
        self.hosts[index - 1] = moved = replace(host, address=address)
        self._write_names()
        return moved

    def _write_names(self) -> None:
        """Every host's /etc/hosts: its peers' names. Written in place, never replaced: a
        running process sees its /etc/hosts through a bind mount of this very file."""
        lines = ["127.0.0.1 localhost", *(f"{h.address} h{h.index}" for h in self.hosts)]
        for host in self.hosts:
            path = ETC_NETNS / host.netns / "hosts"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("\n".join(lines) + "\n")

    def _bridge(self, n: int) -> str:
        while len(self._bridges) <= n:
            name = f"br{len(self._bridges)}"
            ip("link", "add", name, "type", "bridge", netns=self.bridge)
            ip("link", "set", name, "up", netns=self.bridge)
            self._bridges.append(name)
        return self._bridges[n]


def plan_nodes(net: HostNet, by_name: bool = False) -> list[DevNode]:
    """A producer node per host (``node.commands.devnet.prepare`` writes their configs): RPC on the
    host's control address, p2p on its data address, or on its name with ``by_name`` (the
    name is resolved at every dial and at listening); node i dials nodes 1 … i-1."""
    names = producer_names(net.count)
    return [
        DevNode(
            f"node{h.index}",
            names[h.index - 1],
            (h.control, RPC_PORT),
            (f"h{h.index}" if by_name else h.address, P2P_PORT),
            ("127.0.0.1", ADMIN_PORT),
        )
        for h in net.hosts
    ]
