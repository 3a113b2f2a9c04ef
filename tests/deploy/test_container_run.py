"""The image built and run: the Containerfile builds with podman on a local Debian image, the
compose file's genesis and four producer commands run in it as a network that finalizes
blocks, each node's health check passes as a user other than root, and a Prometheus server
on deploy/prometheus scrapes the four and evaluates every alert rule without an error. Skips,
saying why, without podman or a local base image (no registry is reachable here)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy.promql import DEPLOY
from tests.support.live_node import free_port
from tests.support.wait import wait_until

ROOT = DEPLOY.parent
IMAGE = "localhost/bor-node:test"
NETWORK = "bor-deploy-test"
SUBNET = "10.89.211"  # producer n at .1n: this podman has no DNS between containers
PRODUCERS = ("producer1", "producer2", "producer3", "producer4")
# The only limits podman's runc accepts here (``ulimit`` beyond them is refused).
LIMITS = ("--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024")


def _podman(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["podman", "--runtime", "runc", "--cgroup-manager=cgroupfs", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _post(port: int, path: str) -> dict[str, Any] | None:
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", b"{}")
    try:
        with urllib.request.urlopen(request, timeout=2) as answer:
            return dict(json.loads(answer.read()))
    except OSError:
        return None


@pytest.fixture(scope="module")
def image() -> str:
    """The image, built from the Containerfile on BOR_CONTAINER_BASE (about a minute with
    its base's layers cached, several without)."""
    if shutil.which("podman") is None:
        pytest.skip("podman is not installed: the image is not built or run here")
    base = os.environ.get("BOR_CONTAINER_BASE")
    if not base:
        pytest.skip(
            "BOR_CONTAINER_BASE (a local Debian image: debootstrap, then podman import) is not"
            " set: the image is not built (no registry is reachable here; a build takes minutes)"
        )
    containerfile = str(DEPLOY / "container" / "Containerfile")
    build = ("build", "--format", "docker", "--build-arg", f"BASE={base}", "-f", containerfile)
    built = _podman(*build, *LIMITS, "-t", IMAGE, str(ROOT), timeout=1200)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    return IMAGE


@pytest.fixture(scope="module")
def network(image: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, int]]:
    """compose.yml's genesis command, then its four producers' commands, each in a container
    on one network (host port of each producer's RPC by name); removed after."""
    services = yaml.safe_load((DEPLOY / "container" / "compose.yml").read_text())["services"]
    genesis = tmp_path_factory.mktemp("genesis")
    genesis.chmod(0o777)  # the image's user writes there
    made = _podman("run", "--rm", *LIMITS, "--entrypoint", "sh", "-v", f"{genesis}:/genesis",
                   image, "-ec", services["genesis"]["command"][0])  # fmt: skip
    assert made.returncode == 0, made.stderr
    _podman("network", "rm", "-f", NETWORK)
    created = _podman("network", "create", "--subnet", f"{SUBNET}.0/24", NETWORK)
    assert created.returncode == 0, created.stderr
    hosts = [a for i, n in enumerate(PRODUCERS, 1) for a in ("--add-host", f"{n}:{SUBNET}.1{i}")]
    ports = {name: free_port() for name in PRODUCERS}
    try:
        for i, name in enumerate(PRODUCERS, 1):
            command = services[name]["command"][0].replace("$$", "$")
            where = ("--network", NETWORK, "--ip", f"{SUBNET}.1{i}", *hosts)
            published = ("-p", f"127.0.0.1:{ports[name]}:8888", "-v", f"{genesis}:/genesis:ro")
            started = _podman("run", "-d", "--name", f"{NETWORK}-{name}", *LIMITS, *where,
                              *published, "--entrypoint", "sh", image, "-ec", command)  # fmt: skip
            assert started.returncode == 0, started.stderr
        yield ports
    finally:
        for name in PRODUCERS:
            logs = _podman("logs", "--tail", "5", f"{NETWORK}-{name}").stderr
            print(name, logs)
            _podman("rm", "-f", f"{NETWORK}-{name}")
        _podman("network", "rm", "-f", NETWORK)


def test_the_four_containers_finalize_blocks_healthy_and_not_as_root(
    network: dict[str, int],
) -> None:
    """Every producer's LIB passes block 3 on one chain (finality needs three of the four
    to vote across the containers); each passes its HEALTHCHECK, runs as a user other than
    root and names its chain in /metrics."""

    def finalized() -> bool:
        infos = [_post(port, "/v1/chain/get_info") for port in network.values()]
        return all(i is not None and i["last_irreversible_block_num"] >= 3 for i in infos)

    wait_until(finalized, 90, "the four producers in containers finalizing block 3")
    chains = set()
    for name, port in network.items():
        info = _post(port, "/v1/chain/get_info")
        assert info is not None
        chains.add(info["chain_id"])
        health = _podman("healthcheck", "run", f"{NETWORK}-{name}")
        assert health.returncode == 0, health.stdout + health.stderr
        assert _podman("exec", f"{NETWORK}-{name}", "id", "-u").stdout.strip() not in ("", "0")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
            assert f'chain_id="{info["chain_id"]}"' in answer.read().decode()
    assert len(chains) == 1


def test_prometheus_scrapes_the_four_and_evaluates_every_rule(
    network: dict[str, int], tmp_path: Path
) -> None:
    """Debian's prometheus server, on deploy/prometheus's config with each producer's
    address replaced by its published port, finds the four targets up and evaluates every
    alert rule on their real series without an error (skips without the server)."""
    server = shutil.which("prometheus")
    if server is None:
        pytest.skip("the prometheus server is not installed (Debian's prometheus package)")
    config = (DEPLOY / "prometheus" / "prometheus.yml").read_text()
    for name, port in network.items():
        config = config.replace(f"{name}:8888", f"127.0.0.1:{port}")
    (tmp_path / "prometheus.yml").write_text(config)
    shutil.copy(DEPLOY / "prometheus" / "alerts.yml", tmp_path / "alerts.yml")
    web = free_port()
    args = [
        server,
        f"--config.file={tmp_path / 'prometheus.yml'}",
        f"--storage.tsdb.path={tmp_path / 'data'}",
        f"--web.listen-address=127.0.0.1:{web}",
    ]
    log = (tmp_path / "prometheus.log").open("w")
    with log, subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT) as prometheus:
        try:

            def api(path: str) -> Any:
                url = f"http://127.0.0.1:{web}/api/v1/{path}"
                with urllib.request.urlopen(url, timeout=2) as answer:
                    return json.loads(answer.read())["data"]

            def scraped_and_evaluated() -> bool:
                targets = api("targets")["activeTargets"]
                rules = [r for g in api("rules")["groups"] for r in g["rules"]]
                up = [t for t in targets if t["health"] == "up"]
                evaluated = [r for r in rules if r.get("lastEvaluation", "").startswith("2")]
                return len(up) == 4 and len(evaluated) == len(rules) > 0

            wait_until(
                scraped_and_evaluated, 60, "prometheus scraping 4 nodes", ignoring=(OSError,)
            )
            rules = [r for g in api("rules")["groups"] for r in g["rules"]]
            assert {r["health"] for r in rules} == {"ok"}, [r.get("lastError") for r in rules]
            heads = api("query?query=bor_head_block_num")["result"]
            assert len(heads) == 4 and all(float(h["value"][1]) > 0 for h in heads)
        finally:
            prometheus.terminate()
            prometheus.wait(10)
