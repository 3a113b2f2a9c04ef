"""The Grafana dashboard deploy/grafana/bor.json: every metric a panel reads is one a
running node serves (so the dashboard cannot drift from the code), every query parses as
PromQL, and the panels cover what an operator watches and fit Grafana's 24-column grid."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from tests.deploy.promql import DEPLOY, metrics_read, promtool
from tests.support import live_node

# What issue 45 asks the dashboard to show, by a metric each topic cannot do without.
TOPICS = {
    "head and LIB": "bor_last_irreversible_block_num",
    "block time": "bor_head_block_time_seconds",
    "transactions per second": "bor_block_transactions_total",
    "mempool": "bor_mempool_transactions",
    "peers": "bor_p2p_peers",
    "bans": "bor_state_sync_peers_banned_total",
    "sync progress": "bor_sync_target_block_num",
    "stream subscribers": "bor_stream_subscribers",
    "RPC rates": "bor_rpc_requests_total",
    "RPC latency": "bor_rpc_request_seconds_bucket",
    "RPC refusals": "bor_rpc_reads_refused_total",
    "memory": "process_resident_memory_bytes",
    "CPU": "process_cpu_seconds_total",
    "file descriptors": "process_max_fds",
    "threads": "process_threads",
    "GC": "python_gc_collections_total",
    "build": "bor_build_info",
}


def _dashboard() -> dict[str, Any]:
    return dict(json.loads((DEPLOY / "grafana" / "bor.json").read_text()))


def _exprs() -> list[str]:
    return [t["expr"] for p in _dashboard()["panels"] for t in p.get("targets", [])]


def test_every_metric_a_panel_reads_is_served_by_a_node() -> None:
    """The names in each panel's queries are all in a real node's /metrics, and the panels
    read each topic's metric."""
    served = live_node.metric_names(live_node.scrape().metrics)
    read: set[str] = set()
    for expr in _exprs():
        names = metrics_read(expr)
        assert names, f"a query reads no metric: {expr}"
        read |= names
    assert read <= served, read - served
    missing = {topic for topic, metric in TOPICS.items() if metric not in read}
    assert missing == set()


def test_every_query_parses_as_promql(tmp_path: Path) -> None:
    """Each query, its $instance variable given a value, is a valid recording rule for
    ``promtool check rules`` (a typo in PromQL fails here, not as an empty panel)."""
    rules = [
        {"record": f"bor:panel_{i}", "expr": expr.replace("$instance", ".*")}
        for i, expr in enumerate(_exprs())
    ]
    doc = {"groups": [{"name": "dashboard", "rules": rules}]}
    path = tmp_path / "dashboard-rules.yml"
    path.write_text(yaml.safe_dump(doc))
    done = promtool("check", "rules", str(path))
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_panels_fit_the_grid_and_pick_their_datasource_and_nodes() -> None:
    """Unique panel ids, each panel inside the 24 columns and none overlapping another, and
    every query on the ${datasource} variable filtered by the $instance one."""
    dashboard = _dashboard()
    panels = dashboard["panels"]
    assert len({p["id"] for p in panels}) == len(panels)
    cells: set[tuple[int, int]] = set()
    for p in panels:
        g = p["gridPos"]
        assert g["x"] >= 0 and g["x"] + g["w"] <= 24
        mine = {(g["x"] + dx, g["y"] + dy) for dx in range(g["w"]) for dy in range(g["h"])}
        assert not mine & cells, f"{p['title']} overlaps another panel"
        cells |= mine
        for target in p.get("targets", []):
            assert target["datasource"]["uid"] == "${datasource}"
            assert 'instance=~"$instance"' in target["expr"]
    names = {v["name"] for v in dashboard["templating"]["list"]}
    assert names == {"datasource", "instance"}
