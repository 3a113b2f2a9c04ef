"""``bor-contract``: build a contract, or start a new one from the template.

    bor-contract build contracts/examples/token
    bor-contract init mycontract

Errors are one line on stderr and a non-zero exit status, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from contract_tools.build import BuildError, build
from contract_tools.template import InitError, init, next_steps


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bor-contract", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="compile DIR/<name>.ts to DIR/build/<name>.wasm (+ ABI)")
    b.add_argument("directory", type=Path)
    i = sub.add_parser("init", help="write a new contract (source, test) into DIR")
    i.add_argument("directory", type=Path)
    args = parser.parse_args(argv)
    try:
        if args.command == "build":
            built = build(args.directory)
            print(f"{built.wasm} ({built.size} bytes, code hash {built.code_hash.hex()})")
            print(built.abi)
        else:
            for path in init(args.directory):
                print(f"wrote {path}")
            print(next_steps(args.directory))
    except (BuildError, InitError) as err:
        print(f"bor-contract: {err.reason}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
