"""Write contracts/sdk/assembly/env.ts, the SDK's declarations of the host API, from the
node's one table of it (``chain.vm.validate.HOST_API``), so that the SDK cannot drift from
what the runtime links.

    .venv/bin/python scripts/host_api.py           # rewrite env.ts
    .venv/bin/python scripts/host_api.py --check   # exit 1 if it is out of date
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from chain.vm.hostapi import env_ts
from chain.vm.validate import HOST_API

ENV_TS = Path(__file__).resolve().parent.parent / "contracts" / "sdk" / "assembly" / "env.ts"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/host_api.py", description=__doc__)
    parser.add_argument("--check", action="store_true", help="exit 1 if env.ts is out of date")
    args = parser.parse_args(argv)
    text = env_ts(HOST_API.values())
    if args.check:
        if ENV_TS.read_text(encoding="utf-8") != text:
            print(f"{ENV_TS} is out of date: run scripts/host_api.py", file=sys.stderr)
            return 1
        return 0
    ENV_TS.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
