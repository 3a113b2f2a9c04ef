"""A devnet of N producer nodes, each on a host of its own (a network namespace).

    sudo scripts/netns-testnet [--nodes 4] [--data-dir netns-testnet-data] [--fresh]
    sudo scripts/netns-testnet --down

Starts the hosts and one ``bor-node run`` in each, prints where everything is, and runs
until Ctrl-C, then stops the nodes and deletes the hosts. ``--down`` deletes a testnet left
behind (say, after a kill -9). Needs root. The namespaces are ``bortn-h1`` … and the bridge
namespace ``bortn-br``; see ``scripts.netns`` for the network (data and control bridges).
The chain (genesis, keys, block stores, logs) stays in the data dir for the next start.
"""

from __future__ import annotations

import argparse
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from node.commands.devnet import prepare
from scripts.netns import RPC_PORT, HostNet, NetnsError, plan_nodes, teardown, unavailable

TAG = "bortn"
# Turns of 4 blocks (2 s) rather than 12: a person sees LIB move, and faults heal, within
# seconds. The consensus rules are the same.
PARAMS = {"blocks_per_turn": 4}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="netns-testnet", description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=4, help="producer nodes, one per host")
    parser.add_argument("--data-dir", default="netns-testnet-data")
    parser.add_argument("--fresh", action="store_true", help="delete the data dir first")
    parser.add_argument("--down", action="store_true", help="delete a testnet left behind")
    args = parser.parse_args(argv)
    reason = unavailable()
    if reason is not None:
        print(f"netns-testnet: {reason}", file=sys.stderr)
        return 2
    if args.down:
        gone = teardown(TAG)
        print(f"deleted {', '.join(gone)}" if gone else "no testnet was up")
        return 0
    if not 1 <= args.nodes <= 21:
        print("netns-testnet: --nodes must be between 1 and 21", file=sys.stderr)
        return 2
    if teardown_needed():
        print(f"netns-testnet: a testnet is up ({TAG}-*); stop it or run --down", file=sys.stderr)
        return 2
    data = Path(args.data_dir).resolve()
    if args.fresh and data.exists():
        shutil.rmtree(data)
    try:
        with HostNet(args.nodes, tag=TAG) as net:
            return run(net, data)
    except NetnsError as err:
        print(f"netns-testnet: {err}", file=sys.stderr)
        return 1


def teardown_needed() -> bool:
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return any(line.startswith(f"{TAG}-") for line in listed.splitlines())


def run(net: HostNet, data: Path) -> int:
    """Start a node per host, print the map, wait for Ctrl-C (or a node to die), stop them."""
    plan = plan_nodes(net)
    prepare(data, plan, PARAMS)  # keeps an existing devnet of the same size
    stopping = False

    def stop(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    procs: list[subprocess.Popen[bytes]] = []
    for node, host in zip(plan, net.hosts, strict=True):
        with (data / node.name / "node.log").open("ab") as log:
            cmd = [*host.exec_prefix, sys.executable, "-m", "node.cli", "run"]
            cmd += ["--data-dir", str(data / node.name), "--log-format", "json"]
            # The control address is picked afresh at each start; the data addresses are fixed.
            cmd += ["--http-server-address", f"{host.control}:{RPC_PORT}"]
            procs.append(subprocess.Popen(cmd, stdout=log, stderr=log, start_new_session=True))
    print(describe(net, data), flush=True)
    code = 0
    while not stopping:
        for node, proc in zip(plan, procs, strict=True):
            if proc.poll() is not None:
                where = data / node.name / "node.log"
                print(f"netns-testnet: {node.name} exited ({proc.returncode}); see {where}")
                stopping, code = True, 1
        time.sleep(0.3)
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
    print("netns-testnet: nodes stopped, hosts deleted")
    return code


def describe(net: HostNet, data: Path) -> str:
    rows = [
        f"  node{h.index}  host {h.netns}  p2p {h.address}:9876 (h{h.index})"
        f"  RPC http://{h.control}:{RPC_PORT}"
        for h in net.hosts
    ]
    h1 = net.host(1)
    return "\n".join(
        [
            f"BoR testnet: {net.count} producers, one per network namespace; data in {data}",
            *rows,
            f"Logs: {data}/node*/node.log. Ctrl-C stops the nodes and deletes the hosts.",
            "Try, from another shell (as root):",
            f"  bor-node status --url http://{h1.control}:{RPC_PORT}",
            f"  ip netns exec {h1.netns} bash       # a shell on host 1",
            f"  ip -n {net.bridge} link set h1 down   # cut host 1 off ('up' reconnects it)",
            f"  ip -n {net.bridge} link add br1 type bridge && ip -n {net.bridge} link set br1 up",
            f"  ip -n {net.bridge} link set h1 master br1   # host 1 alone on br1: a partition",
            f"  ip -n {net.bridge} link set h1 master br0   # and healed",
            "A cut drops frames silently (no tc netem or iptables here: no delay, no loss).",
        ]
    )


if __name__ == "__main__":
    sys.exit(main())
