#!/usr/bin/env bash
# Command one: install everything and start a local dev chain (RPC on 127.0.0.1:8888).
# Extra arguments go to `bor-node devnet` (e.g. --fresh, --data-dir DIR).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/bootstrap.sh
exec .venv/bin/bor-node devnet "$@"
