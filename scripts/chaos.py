"""Randomized faults on a namespaced network under transaction load, invariants checked
throughout (in the manner of CometBFT's e2e perturbations).

    sudo .venv/bin/python scripts/chaos.py --minutes 5 [--nodes 4] [--seed N] [--data-dir DIR]
        [--finality dpos|votes]

N producer nodes, one per host (``scripts.netns``), take transfers in commit mode from a few
client threads while faults come and go at random: kill -9 then restart, SIGSTOP then SIGCONT,
a clean restart, one host's link down then up, a partition into two random groups then
healed, and a stranger on one host that dials a node and lies about its head (claims 10^9,
serves nothing; a new identity at each redial: ``scripts/lying_peer.py``). Each fault lasts
5-25 s; at most two are active at once.

Checked throughout: no node's LIB ever goes down, and no two nodes hold different blocks
irreversible at one height. At the end every fault is undone and the nodes must converge
(fully meshed, one chain, LIB past the highest seen during the run) within two minutes, and
every transaction acknowledged as included must be in the final chain. The last line of
output is JSON: minutes, perturbations, invariant_violations, acknowledged_txs, lost_txs,
converged. Exit status 0 if all held, 1 if not. Needs root.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from chain.core.execution.actions import Transfer
from chain.core.execution.transaction import SignedTransaction, Transaction, tapos_of
from chain.core.primitives.crypto import PrivateKey
from chain.core.primitives.types import AccountName, BlockId
from node.commands.devnet import prepare
from scripts.netns import P2P_PORT, RPC_PORT, Host, HostNet, plan_nodes, unavailable

ROOT = Path(__file__).resolve().parent.parent
PARAMS = {"blocks_per_turn": 4}  # LIB within seconds under dpos; the rules are the same
FAULT_SECONDS = (5.0, 25.0)
GAP_SECONDS = (2.0, 8.0)  # between one fault starting and the next
CONVERGE_SECONDS = 120.0
CLIENTS = 3


def rpc(url: str, path: str, body: dict[str, Any] | None = None, timeout: float = 3) -> Any:
    request = urllib.request.Request(
        url + path, json.dumps(body or {}).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.loads(response.read())


@dataclass
class ChaosNode:
    """One node process on its host: started through ``ip netns exec`` (the pid is the node's)."""

    index: int
    host: Host
    data_dir: Path
    proc: subprocess.Popen[bytes] | None = None
    paused: bool = False

    @property
    def url(self) -> str:
        return f"http://{self.host.control}:{RPC_PORT}"

    def start(self) -> None:
        cmd = [*self.host.exec_prefix, sys.executable, "-m", "node.cli", "run"]
        cmd += ["--data-dir", str(self.data_dir), "--log-format", "json", "--rdma", "off"]
        cmd += ["--http-server-address", f"{self.host.control}:{RPC_PORT}"]
        with (self.data_dir / "node.log").open("ab") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=log, start_new_session=True)
        self.paused = False

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def send(self, sig: int) -> None:
        if self.running and self.proc is not None:
            self.proc.send_signal(sig)

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.paused:
            self.send(signal.SIGCONT)
        self.send(sig)
        if self.proc is not None:
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.paused = False

    def info(self) -> dict[str, Any] | None:
        try:
            return dict(rpc(self.url, "/v1/chain/get_info"))
        except (OSError, ValueError):
            return None


@dataclass
class Invariants:
    """LIB never decreases on a node; one block id per irreversible height across nodes."""

    nodes: list[ChaosNode]
    irreversible: dict[int, str] = field(default_factory=dict)
    last_lib: dict[int, int] = field(default_factory=dict)
    violations: list[str] = field(default_factory=list)
    highest_lib: int = 0

    def sample(self) -> None:
        for node in self.nodes:
            info = node.info() if node.running and not node.paused else None
            if info is None:
                continue
            lib, lib_id = info["last_irreversible_block_num"], info["last_irreversible_block_id"]
            if lib < self.last_lib.get(node.index, 0):
                self.violations.append(f"node{node.index}: LIB {self.last_lib[node.index]}->{lib}")
            self.last_lib[node.index] = lib
            self.highest_lib = max(self.highest_lib, lib)
            seen = self.irreversible.setdefault(lib, lib_id)
            if lib and seen != lib_id:
                self.violations.append(f"node{node.index}: two blocks irreversible at {lib}")


class Load:
    """Client threads pushing transfers in commit mode to random live nodes; what a node
    acknowledged as included is remembered, to be found in the final chain."""

    def __init__(self, nodes: list[ChaosNode], keys: dict[str, str], rng: random.Random) -> None:
        self.nodes = nodes
        self.keys = {u: PrivateKey.from_text(keys[u]) for u in ("alice", "bob", "carol")}
        self.acknowledged: dict[str, tuple[int, int]] = {}  # id: (block, acknowledging node)
        self._rng = random.Random(rng.random())
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, args=(i,)) for i in range(CLIENTS)]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join()

    def _run(self, client: int) -> None:
        users = list(self.keys)
        n = 0
        while not self._stop.is_set():
            n += 1
            live = [x for x in self.nodes if x.running and not x.paused]
            with self._lock:
                node = self._rng.choice(live) if live else None
            if node is None:
                time.sleep(0.5)
                continue
            sender, recipient = users[n % 3], users[(n + 1) % 3]
            try:
                info = rpc(node.url, "/v1/chain/get_info")
                # TaPoS on the LIB, as wallets do: a transaction referring to a reversible
                # block dies with it if that block's branch is abandoned (by design).
                ref = tapos_of(BlockId(bytes.fromhex(info["last_irreversible_block_id"])))
                action = Transfer(AccountName(sender), AccountName(recipient), 1, f"{client}-{n}")
                tx = Transaction(int(time.time()) + 300, ref[0], ref[1], (action,))
                stx = SignedTransaction.sign(
                    tx, bytes.fromhex(info["chain_id"]), [self.keys[sender]]
                )
                body: dict[str, Any] = {"mode": "commit", "timeout_ms": 5000}
                body |= {"packed_trx": stx.packed.hex(), "signatures": [stx.signatures[0].hex()]}
                pushed = rpc(node.url, "/v1/chain/push_transaction", body, timeout=8)
            except (OSError, ValueError):
                time.sleep(0.2)  # refused, timed out or the node is down: not acknowledged
                continue
            if pushed.get("status") == "included":
                with self._lock:
                    self.acknowledged[stx.id.hex()] = (int(pushed["block_num"]), node.index)


@dataclass
class Fault:
    what: str
    undo: Callable[[], None]
    until: float
    nodes: frozenset[int]


class Chaos:
    def __init__(
        self, net: HostNet, nodes: list[ChaosNode], rng: random.Random, chain_id: str
    ) -> None:
        self.net = net
        self.nodes = nodes
        self.rng = rng
        self.chain_id = chain_id
        self.active: list[Fault] = []
        self.count = 0
        self.partitioned = False

    def step(self, now: float) -> None:
        """Undo faults whose time is up; start one if fewer than two are active."""
        for fault in [f for f in self.active if f.until <= now]:
            fault.undo()
            self.active.remove(fault)
            log(f"undone: {fault.what}")
        if len(self.active) >= 2:
            return
        busy = set().union(*(f.nodes for f in self.active))
        free = [n for n in self.nodes if n.index not in busy]
        kinds = ["kill", "pause", "restart", "link", "lie"] if free else []
        if not self.partitioned and not busy:
            kinds.append("partition")
        if not kinds:
            return
        kind = self.rng.choice(kinds)
        until = now + self.rng.uniform(*FAULT_SECONDS)
        self.count += 1
        if kind == "partition":
            hosts = [n.index for n in self.nodes]
            self.rng.shuffle(hosts)
            cut = self.rng.randint(1, len(hosts) - 1)
            groups = (sorted(hosts[:cut]), sorted(hosts[cut:]))
            self.net.partition(*groups)
            self.partitioned = True
            self._add(f"partition {groups[0]}/{groups[1]}", self._heal, until, set())
            return
        node = self.rng.choice(free)
        if kind == "kill":
            node.stop(signal.SIGKILL)
            self._add(f"kill -9 node{node.index}", node.start, until, {node.index})
        elif kind == "pause":
            node.send(signal.SIGSTOP)
            node.paused = True
            self._add(f"SIGSTOP node{node.index}", lambda: self._resume(node), until, {node.index})
        elif kind == "restart":
            node.stop()
            node.start()
            self._add(f"restart node{node.index}", lambda: None, now, {node.index})
        elif kind == "lie":
            self._lie(node, self.rng.choice(self.nodes).host, until - now)
        else:
            self.net.set_link(node.index, up=False)
            undo = lambda: self.net.set_link(node.index, up=True)  # noqa: E731
            self._add(f"link down node{node.index}", undo, until, {node.index})

    def undo_all(self) -> None:
        for fault in self.active:
            fault.undo()
        self.active.clear()
        self.net.heal()
        for node in self.nodes:
            if not node.running:
                node.start()

    def _add(self, what: str, undo: Callable[[], None], until: float, nodes: set[int]) -> None:
        log(f"fault: {what} for {max(0.0, until - time.monotonic()):.0f} s")
        self.active.append(Fault(what, undo, until, frozenset(nodes)))

    def _lie(self, target: ChaosNode, where: Host, seconds: float) -> None:
        """A liar on host ``where`` dialling ``target`` for ``seconds``; its summary is logged
        when it is undone."""
        cmd = [*where.exec_prefix, sys.executable, "-m", "scripts.lying_peer"]
        cmd += [f"{target.host.address}:{P2P_PORT}", "--chain-id", self.chain_id]
        cmd += ["--seconds", f"{seconds:.1f}"]
        liar = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)

        def undo() -> None:
            try:
                out, _ = liar.communicate(timeout=15)
            except subprocess.TimeoutExpired:
                liar.kill()
                out, _ = liar.communicate()
            last = out.decode(errors="replace").strip().splitlines()[-1:] or ["(no output)"]
            log(f"liar on h{where.index} against node{target.index}: {last[0]}")

        where_to = f"node{target.index} from h{where.index}"
        self._add(
            f"a liar about its head dials {where_to}", undo, time.monotonic() + seconds, set()
        )

    def _heal(self) -> None:
        self.net.heal()
        self.partitioned = False

    @staticmethod
    def _resume(node: ChaosNode) -> None:
        node.send(signal.SIGCONT)
        node.paused = False


def log(message: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {message}", flush=True)


def converged(nodes: list[ChaosNode], lib_above: int) -> bool:
    infos = [n.info() for n in nodes]
    if any(i is None for i in infos):
        return False
    libs = [i["last_irreversible_block_num"] for i in infos if i is not None]
    if not all(i["peer_count"] == len(nodes) - 1 for i in infos if i is not None):
        return False
    lib = min(libs)
    if lib <= lib_above:
        return False
    try:
        ids = {rpc(n.url, "/v1/chain/get_block", {"block_num_or_id": lib})["id"] for n in nodes}
    except OSError:
        return False
    return len(ids) == 1


def lost(nodes: list[ChaosNode], acknowledged: dict[str, tuple[int, int]]) -> list[str]:
    """Acknowledged transactions that the final chain (as node 1 holds it) does not have. One
    still pending in a mempool gets a few seconds to be included first."""

    def status(node: ChaosNode, tx_id: str) -> str:
        try:
            found = rpc(node.url, "/v1/chain/get_transaction", {"id": tx_id}, timeout=10)
        except urllib.error.HTTPError as err:
            return f"http {err.code}"
        except OSError:
            return "unreachable"
        return "included" if "block_num" in found else str(found.get("status"))

    missing = [t for t in acknowledged if status(nodes[0], t) != "included"]
    for _ in range(10):
        if not missing:
            break
        time.sleep(2)
        missing = [t for t in missing if status(nodes[0], t) != "included"]
    for tx_id in missing:
        num, index = acknowledged[tx_id]
        where = ", ".join(f"node{n.index}: {status(n, tx_id)}" for n in nodes)
        log(f"lost tx {tx_id[:16]}: node{index} acknowledged it in block {num}; now {where}")
    return missing


def run(args: argparse.Namespace, data: Path) -> dict[str, Any]:
    rng = random.Random(args.seed)
    with HostNet(args.nodes) as net:
        plan = plan_nodes(net)
        prepare(data, plan, {**PARAMS, "finality": args.finality})
        nodes = [ChaosNode(h.index, h, data / p.name) for p, h in zip(plan, net.hosts, strict=True)]
        for node in nodes:
            node.start()
        invariants = Invariants(nodes)
        deadline = time.monotonic() + 60
        while not converged(nodes, lib_above=2):
            if time.monotonic() > deadline:
                raise SystemExit("chaos: the network did not form (see the node logs)")
            time.sleep(1)
        load = Load(nodes, json.loads((data / "keys.json").read_text()), rng)
        chain_id = str(rpc(nodes[0].url, "/v1/chain/get_info")["chain_id"])
        chaos = Chaos(net, nodes, rng, chain_id)
        load.start()
        end = time.monotonic() + args.minutes * 60
        next_fault = time.monotonic() + rng.uniform(*GAP_SECONDS)
        try:
            while time.monotonic() < end:
                invariants.sample()
                if time.monotonic() >= next_fault:
                    chaos.step(time.monotonic())
                    next_fault = time.monotonic() + rng.uniform(*GAP_SECONDS)
                time.sleep(0.5)
            chaos.undo_all()
            log("every fault undone; waiting for the nodes to converge")
            deadline = time.monotonic() + CONVERGE_SECONDS
            target, ok = invariants.highest_lib, False
            while time.monotonic() < deadline and not ok:
                invariants.sample()
                ok = converged(nodes, target)
                time.sleep(1)
        finally:
            load.stop()
        missing = lost(nodes, load.acknowledged)
        for node in nodes:
            node.stop()
    for violation in invariants.violations:
        log(f"VIOLATION {violation}")
    return {
        "minutes": args.minutes,
        "perturbations": chaos.count,
        "invariant_violations": len(invariants.violations),
        "acknowledged_txs": len(load.acknowledged),
        "lost_txs": len(missing),
        "converged": ok,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="chaos", description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=5)
    parser.add_argument("--nodes", type=int, default=4)
    parser.add_argument("--seed", type=int, default=None, help="default: random (printed)")
    parser.add_argument("--data-dir", help="keep the nodes' data and logs here (default: temp)")
    parser.add_argument(
        "--finality", choices=("dpos", "votes"), default="dpos", help="the chain's rule"
    )
    args = parser.parse_args(argv)
    reason = unavailable()
    if reason is not None:
        print(f"chaos: {reason}", file=sys.stderr)
        return 2
    if args.seed is None:
        args.seed = random.randrange(1 << 32)
    log(f"seed {args.seed}, {args.nodes} nodes, {args.minutes} min, finality {args.finality}")
    data = Path(args.data_dir or tempfile.mkdtemp(prefix="bor-chaos-"))
    if (data / "devnet.json").exists():
        shutil.rmtree(data)  # an earlier run's: every run starts a new chain
    elif data.exists() and any(data.iterdir()):
        print(f"chaos: {data} is not empty", file=sys.stderr)
        return 2
    result = run(args, data)
    if args.data_dir is None and result["converged"] and not result["invariant_violations"]:
        shutil.rmtree(data, ignore_errors=True)
    else:
        log(f"node data and logs in {data}")
    print(json.dumps(result), flush=True)
    held = result["converged"] and not result["invariant_violations"] and not result["lost_txs"]
    return 0 if held else 1


if __name__ == "__main__":
    sys.exit(main())
