"""The Prometheus files in deploy/prometheus: promtool accepts the rules and the scrape
config, the rules' own unit tests pass (each alert fires for a node in trouble and not for a
healthy one), and every metric a rule reads is one a running node serves."""

from __future__ import annotations

import shlex

import yaml

from tests.deploy.promql import DEPLOY, ROOT, metrics_read, promtool
from tests.scripts.test_readme_commands import commands
from tests.support import live_node

PROMETHEUS = DEPLOY / "prometheus"
# What an operator is paged for (issue 45): each alert must exist by name.
ALERTS = {
    "BorLibStalled",
    "BorNoPeers",
    "BorFallingBehind",
    "BorHeadStale",
    "BorFileDescriptorsNearLimit",
    "BorMemoryGrowth",
    "BorDoubleSign",
}


def _rules() -> list[dict[str, object]]:
    doc = yaml.safe_load((PROMETHEUS / "alerts.yml").read_text())
    return [rule for group in doc["groups"] for rule in group["rules"]]


def test_promtool_accepts_the_rules_and_the_config() -> None:
    """``promtool check rules`` and ``check config`` pass (PromQL, durations, templates)."""
    for args in (("check", "rules", "alerts.yml"), ("check", "config", "prometheus.yml")):
        done = promtool(*args[:2], str(PROMETHEUS / args[2]))
        assert done.returncode == 0, done.stdout + done.stderr


def test_each_alert_fires_for_a_node_in_trouble_only() -> None:
    """``promtool test rules alerts.test.yml``: series of a healthy node and of a node in
    trouble, and the alerts (labels and the annotations an operator reads) each gives."""
    done = promtool("test", "rules", str(PROMETHEUS / "alerts.test.yml"))
    assert done.returncode == 0, done.stdout + done.stderr
    tested = yaml.safe_load((PROMETHEUS / "alerts.test.yml").read_text())
    fired = {
        case["alertname"]
        for test in tested["tests"]
        for case in test["alert_rule_test"]
        if case["exp_alerts"]
    }
    assert fired == ALERTS == {rule["alert"] for rule in _rules()}


def test_every_metric_a_rule_reads_is_served_by_a_node() -> None:
    """A renamed metric fails here, not by an alert that silently never fires."""
    served = live_node.metric_names(live_node.scrape().metrics)
    read = {name for rule in _rules() for name in metrics_read(str(rule["expr"]))}
    assert read and read <= served, read - served


def test_prometheus_scrapes_the_four_producers_of_the_compose_file() -> None:
    """prometheus.yml scrapes /metrics of the four nodes compose.yml runs, on their RPC port."""
    config = yaml.safe_load((PROMETHEUS / "prometheus.yml").read_text())
    compose = yaml.safe_load((DEPLOY / "container" / "compose.yml").read_text())
    (job,) = config["scrape_configs"]
    targets = {t for group in job["static_configs"] for t in group["targets"]}
    producers = {name for name in compose["services"] if name.startswith("producer")}
    assert targets == {f"{name}:8888" for name in producers} and len(targets) == 4
    assert job.get("metrics_path", "/metrics") == "/metrics"


def test_the_promtool_commands_the_readme_shows_pass() -> None:
    """Each ``promtool`` line of the README's and docs' sh blocks, run as written from the
    repository root, succeeds."""
    lines = [line for _, line in commands() if line.startswith("promtool ")]
    assert len(lines) >= 2
    for line in lines:
        args = shlex.split(line, comments=True)[1:]
        done = promtool(*[str(ROOT / a) if a.startswith("deploy/") else a for a in args])
        assert done.returncode == 0, f"{line}: {done.stdout}{done.stderr}"
