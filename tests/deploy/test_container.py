"""The container files in deploy/container: the Containerfile builds on a BASE argument, as
a user other than root, from sources that exist, with the ports and a health check; the
compose file runs four producers (each its own key, ports, data and peers) and a Prometheus
on the repository's own config; and the shell each producer runs finds its key in what
``bor-node genesis new`` really prints."""

from __future__ import annotations

import contextlib
import io
import re
import shlex
import subprocess
from pathlib import Path
from typing import Any

import yaml

from node.cli import main
from tests.deploy.promql import DEPLOY

ROOT = DEPLOY.parent
CONTAINER = DEPLOY / "container"
PRODUCERS = ("producer1", "producer2", "producer3", "producer4")


def _compose() -> dict[str, Any]:
    return dict(yaml.safe_load((CONTAINER / "compose.yml").read_text()))


def _instructions() -> list[tuple[str, str]]:
    """The Containerfile's instructions (continuation lines joined), comments left out."""
    text = re.sub(r"\\\n", " ", (CONTAINER / "Containerfile").read_text())
    lines = [line.strip() for line in text.splitlines()]
    return [
        (line.split(None, 1)[0].upper(), line.split(None, 1)[1])
        for line in lines
        if line and not line.startswith("#")
    ]


def test_the_containerfile_builds_on_base_as_a_user_with_ports_and_a_health_check() -> None:
    """ARG BASE defaults to debian:bookworm-slim and both stages start FROM it; every COPY
    source exists in the repository; the image runs as bor, exposes the RPC and p2p ports
    and checks its health with bor-node status."""
    steps = _instructions()
    assert steps[0] == ("ARG", "BASE=debian:bookworm-slim")
    froms = [arg for op, arg in steps if op == "FROM"]
    assert froms == ["${BASE} AS build", "${BASE}"]
    for op, arg in steps:
        if op == "COPY" and not arg.startswith("--from"):
            for source in arg.split()[:-1]:
                assert (ROOT / source).exists(), source
    users = [arg for op, arg in steps if op == "USER"]
    assert users == ["bor"]
    assert ("EXPOSE", "8888 9876") in steps
    (health,) = [arg for op, arg in steps if op == "HEALTHCHECK"]
    assert '"bor-node", "status", "--url", "http://127.0.0.1:8888"' in health
    assert ("ENTRYPOINT", '["bor-node"]') in steps


def test_compose_runs_four_producers_and_prometheus_on_unique_ports() -> None:
    """Four producers, each producing for its own account, with its own data volume and host
    port, each dialling those before it (a full mesh); Prometheus mounts the repository's
    prometheus.yml and alerts.yml; the image is built from the Containerfile."""
    compose = _compose()
    services = compose["services"]
    assert set(services) == {"genesis", "prometheus", *PRODUCERS}
    assert services["genesis"]["build"]["dockerfile"] == "deploy/container/Containerfile"
    assert (CONTAINER / services["genesis"]["build"]["context"]).resolve() == ROOT
    host_ports = [p.split(":")[0] for s in services.values() for p in s.get("ports", [])]
    assert len(host_ports) == len(set(host_ports)) == 5
    accounts, data = set(), set()
    for i, name in enumerate(PRODUCERS):
        service = services[name]
        (command,) = service["command"]
        words = shlex.split(command.replace("$$", "$"))
        accounts.add(words[words.index("--producer-name") + 1])
        peers = {words[j + 1] for j, w in enumerate(words) if w == "--p2p-peer-address"}
        assert peers == {f"{p}:9876" for p in PRODUCERS[:i]}
        assert service["depends_on"]["genesis"]["condition"] == "service_completed_successfully"
        data |= {v.split(":")[0] for v in service["volumes"] if v.endswith(":/var/lib/bor")}
    assert accounts == {"producera", "producerb", "producerc", "producerd"}
    assert data == {"data1", "data2", "data3", "data4"} <= set(compose["volumes"])
    for volume in services["prometheus"]["volumes"]:
        assert (CONTAINER / volume.split(":")[0]).is_file(), volume


def test_each_producer_finds_its_key_line_in_what_genesis_new_prints(tmp_path: Path) -> None:
    """The genesis service keeps ``bor-node genesis new``'s output as keys.txt; each
    producer's ``$(sed ... | grep ...)`` run by sh on the real output gives that producer's
    ``PUB_K1_...=KEYFILE:<genesis dir>/<producer>.key``."""
    out = tmp_path / "genesis"
    keys = tmp_path / "keys.txt"
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert main(["genesis", "new", "--producers", "4", "--out", str(out)]) == 0
    keys.write_text(printed.getvalue())
    services = _compose()["services"]
    for name in PRODUCERS:
        (command,) = services[name]["command"]
        found = re.search(r'--signature-provider "\$\$\((.*?)\)"', command)
        assert found is not None
        script = found.group(1).replace("/genesis/keys.txt", str(keys))
        line = subprocess.run(
            ["sh", "-c", script], capture_output=True, text=True, check=True, timeout=10
        ).stdout.strip()
        words = shlex.split(command)
        account = words[words.index("--producer-name") + 1]
        line = line.replace(str(out), "/genesis")
        assert re.fullmatch(rf"PUB_K1_\w+=KEYFILE:/genesis/{account}\.key", line), line
