"""A stranger that dials a node and lies about its head, again and again, for a while.

    python -m scripts.lying_peer HOST:PORT --chain-id HEX [--seconds 30] [--same-identity]

Each session claims head and LIB 10^9 (``scripts.peers.LyingPeer``), answers keepalives and
serves nothing; when the node sends it away it dials again a second later, by default as a
new identity (fresh node id and key: bans are per node id, so this is the harder case).
scripts/chaos.py runs it on a namespaced host as one of its faults. The last line is JSON:
sessions, connected (handshakes accepted), refusals by reason, sync requests received.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from p2p.errors import P2PError
from scripts.peers import LyingPeer

REDIAL_SECONDS = 1.0
SESSION_LIMIT_SECONDS = 60.0  # a node keeping a liar longer than this is itself a finding


async def lie(liar: LyingPeer, seconds: float, renew: bool) -> dict[str, object]:
    end = time.monotonic() + seconds
    sessions = connected = 0
    reasons: Counter[str] = Counter()
    while time.monotonic() < end:
        sessions += 1
        liar.sent_away = None
        liar.connected.clear()
        try:
            async with asyncio.timeout(min(SESSION_LIMIT_SECONDS, end - time.monotonic() + 1)):
                await liar.session()
        except TimeoutError:
            reasons["still connected at the end"] += 1
        except (P2PError, OSError) as err:
            reasons[type(err).__name__] += 1
        connected += liar.connected.is_set()
        if liar.sent_away is not None:
            reasons[liar.sent_away.reason.name] += 1
        if renew:
            liar.renew()
        await asyncio.sleep(REDIAL_SECONDS)
    return {
        "sessions": sessions,
        "connected": connected,
        "refusals": dict(reasons),
        "sync_requests": liar.sync_requests,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="lying_peer", description=__doc__.split("\n")[0])
    parser.add_argument("address", help="the node's p2p endpoint, HOST:PORT")
    parser.add_argument("--chain-id", required=True, help="hex, as get_info gives it")
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--same-identity", action="store_true", help="keep one node id and key")
    args = parser.parse_args(argv)
    host, _, port = args.address.rpartition(":")
    liar = LyingPeer(bytes.fromhex(args.chain_id), (host, int(port)))
    result = asyncio.run(lie(liar, args.seconds, renew=not args.same_identity))
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
