"""What following the header chain costs: serving signed headers and judging them.

A node state-syncing without a trusted block follows the header chain from genesis
(``chain.core.header_chain``); its peers cut each header out of the stored block
(``header_of_encoded_block``) to serve it. This reads every block of a history made by
``scripts/make_history.py`` (its ``blocks`` store), cuts the headers out as a server does,
and follows them from genesis as a fresh node does, timing both in CPU seconds.

    python scripts/bench_headers.py HISTORY_DIR [--repeat 3]

The last line of output is a JSON object of the figures (medians of the repeats).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from chain.controller import Chain
from chain.core.consensus.block import decode_signed_header, header_of_encoded_block
from chain.core.header_chain import HeaderChain
from chain.storage.store import BlockStore
from genesis.model import load_genesis
from scripts.benchtools import cores


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("history", type=Path, help="a make_history.py output directory")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    machine = cores()
    print(machine)
    genesis = load_genesis(args.history / "genesis.json")
    initial = genesis.to_initial_state()
    chain = Chain(BlockStore(str(args.history / "blocks")), initial)
    store = chain.store
    raw = []
    for num in range(1, chain.head.num + 1):
        block_id = store.block_id_at(num)
        data = None if block_id is None else store.block_bytes(block_id)
        assert data is not None, f"block {num} missing"
        raw.append(data)
    store.close()
    serve, follow = [], []
    lib = 0
    headers: list[bytes] = []
    for _ in range(args.repeat):
        t0 = time.process_time()
        headers = [header_of_encoded_block(b) for b in raw]
        t1 = time.process_time()
        chain_followed = HeaderChain(initial.header_state(), initial.params, initial.chain_id)
        chain_followed.extend([decode_signed_header(h) for h in headers], int(time.time() * 1000))
        t2 = time.process_time()
        serve.append((t1 - t0) / len(raw) * 1000)
        follow.append((t2 - t1) / len(raw) * 1000)
        lib = chain_followed.lib
    out = {
        "blocks": len(raw),
        "header_bytes": round(sum(len(h) for h in headers) / len(headers)),
        "serve_ms_per_block": round(statistics.median(serve), 4),
        "follow_ms_per_header": round(statistics.median(follow), 4),
        "followed_lib": lib,
        "cores_available": machine.available,
    }
    print(
        f"{len(raw):,} blocks: serving {out['serve_ms_per_block']} ms of CPU per block (its "
        f"header cut out), following {out['follow_ms_per_header']} ms per header; "
        f"LIB followed {lib:,}"
    )
    print(json.dumps(out))


if __name__ == "__main__":
    main()
