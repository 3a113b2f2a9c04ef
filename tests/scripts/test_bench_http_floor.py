"""bench_http_floor: its frames carry each request's id and body through the hop unchanged,
and a short run of both servers answers every push and ends with its JSON line."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

from scripts.bench_http_floor import FRAME, ITEM, _frame, _items

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bench_http_floor.py"


def test_a_frame_holds_each_request_id_and_body() -> None:
    """Three requests, one with an empty body, come out of a batch as they went in."""
    sent = [(7, b"first"), (8, b""), (2**32 - 1, b"x" * 300)]
    frame = _frame([ITEM.pack(rid, len(body)) + body for rid, body in sent])
    (size,) = FRAME.unpack_from(frame)
    assert size == len(frame) - FRAME.size
    assert _items(frame[FRAME.size :]) == sent


def test_a_short_run_measures_both_servers() -> None:
    """Half a second against each server: every push answered (the script asserts none is
    refused), and the JSON line has both rates, both servers' CPU and the hop's difference."""
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--seconds", "0.5", "--rounds", "1", "--clients", "4"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    figures = json.loads(done.stdout.splitlines()[-1])
    assert figures["plain_per_s"] > 0 and figures["hop_per_s"] > 0
    assert figures["plain_server_cpu_us"] > 0 and figures["hop_server_cpu_us"] > 0
    assert figures["client_cpu_us"] > 0 and math.isfinite(figures["hop_added_cpu_us"])
