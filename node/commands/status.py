"""``bor-node status``: which RPC address to ask, what the node there says, and how that reads
for a person (one line) or a script (one JSON object).

The address comes from ``--url``, else ``--http-server-address``, else the data dir's
node.json (what its running node bound), else its config.ini (the node's own setting), else
the option's default; every answer says which, and a node whose chain is not the data dir's
is refused, so that a status never passes off another node's figures as this data dir's.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from genesis.model import load_genesis
from node.config.file import read_ini
from node.config.model import OPTIONS
from node.errors import NodeError
from node.node_file import NODE_FILE, http_url, read_node_file

ANSWER_TIMEOUT_S = 5.0  # a node that takes longer to answer get_info is as good as down


@dataclass(frozen=True, slots=True)
class Target:
    """A node's RPC URL and where the address came from."""

    url: str
    source: str


def target(data_dir: Path, config: Path | None, address: str | None, url: str | None) -> Target:
    """The RPC to ask: ``url``, else ``address`` (host:port), else the running node's
    node.json (unless ``config`` is named), else config.ini's http-server-address, else its
    default."""
    if url is not None:
        return Target(url.rstrip("/"), "--url")
    option = next(o for o in OPTIONS if o.name == "http-server-address")
    if address is not None:
        return Target(_url(option.read(address)), "--http-server-address")
    running = read_node_file(data_dir)
    if running is not None and config is None:
        return Target(running.rpc, str(data_dir / NODE_FILE))
    ini = config or data_dir / "config.ini"
    if config is not None and not ini.exists():
        raise NodeError(f"{ini} does not exist")
    given = read_ini(ini).get(option.name) if ini.exists() else None
    if given:
        return Target(_url(option.read(given[-1])), str(ini))
    return Target(_url(option.read(option.default)), f"the default: {ini} names no address")


def _url(endpoint: tuple[str, int]) -> str:
    return http_url(*endpoint)


def get_info(url: str) -> dict[str, Any]:
    """The node's get_info; a NodeError that says plainly why there is none."""
    try:
        with urllib.request.urlopen(url + "/v1/chain/get_info", timeout=ANSWER_TIMEOUT_S) as r:
            info = json.loads(r.read())
    except urllib.error.HTTPError as err:
        raise NodeError(f"{url} answered HTTP {err.code}: is it a bor-node RPC?") from err
    except (urllib.error.URLError, OSError) as err:
        if isinstance(err, TimeoutError) or isinstance(getattr(err, "reason", None), TimeoutError):
            raise NodeError(f"no answer from {url} within {ANSWER_TIMEOUT_S:g} s") from err
        raise NodeError(f"no node answers at {url}: is it running?") from err
    except ValueError as err:  # not JSON
        raise NodeError(f"{url} did not answer JSON: is it a bor-node RPC?") from err
    if not isinstance(info, dict) or "head_block_num" not in info:
        raise NodeError(f"{url} did not answer a get_info: is it a bor-node RPC?")
    return info


def check_chain(at: Target, info: dict[str, Any], data_dir: Path) -> None:
    """Refuse the answer of a node of another chain than the genesis kept in ``data_dir``
    (a node on the default address is often another data dir's)."""
    kept = data_dir / "genesis.json"
    if not kept.exists():
        return
    held = load_genesis(kept).chain_id.hex()
    served = str(info.get("chain_id") or "")
    if served != held:
        named = at.source in ("--url", "--http-server-address")
        hint = "another data dir's node?" if named else "pass the node's --http-server-address"
        raise NodeError(
            f"{at.url} serves chain {served[:16]}…, {data_dir} holds chain {held[:16]}…: {hint}"
        )


def summary(at: Target, info: dict[str, Any]) -> dict[str, Any]:
    """What ``status --json`` prints for one node."""
    return {
        "url": at.url,
        "address_from": at.source,
        "chain_id": info.get("chain_id"),
        "head_block_num": info["head_block_num"],
        "head_block_id": info.get("head_block_id"),
        "head_block_time": info.get("head_block_time"),
        "head_block_producer": info.get("head_block_producer"),
        "last_irreversible_block_num": info.get("last_irreversible_block_num"),
        "peers": info.get("peer_count", 0),
        "mempool_size": info.get("mempool_size"),
        "sync": {
            "stage": info.get("sync_stage", "-"),
            "target": info.get("sync_target"),
            "blocks_per_s": info.get("sync_blocks_per_s"),
            "txs_per_s": info.get("sync_txs_per_s"),
            "eta_s": info.get("sync_eta_s"),
        },
    }


def line(s: dict[str, Any]) -> str:
    """One node's status for a person: head, LIB, sync (with its progress while catching
    up), peers."""
    sync = s["sync"]
    stage = sync["stage"]
    if stage not in ("in_sync", "-") and sync["target"]:
        eta = "" if sync["eta_s"] is None else f", ETA {_duration(sync['eta_s'])}"
        txs = "" if not sync["txs_per_s"] else f" ({sync['txs_per_s']:,} tx/s)"
        stage += f" to {sync['target']:,} at {sync['blocks_per_s']:,} blocks/s{txs}{eta}"
    chain = s["chain_id"] or ""
    return (
        f"{s['url']} ({s['address_from']}): head {s['head_block_num']:,} "
        f"({s['head_block_producer']}, {s['head_block_time']}), "
        f"LIB {s['last_irreversible_block_num']:,}, sync {stage}, peers {s['peers']}, "
        f"mempool {s['mempool_size']}, chain {chain[:16]}…"
    )


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    minutes = round(seconds / 60)
    return f"{minutes} min" if minutes < 120 else f"{minutes // 60} h {minutes % 60} min"
