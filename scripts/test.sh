#!/usr/bin/env bash
# Command two: install everything and run the linters, the type checker and every test.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/bootstrap.sh --dev
echo "== ruff"
.venv/bin/ruff check .
.venv/bin/ruff format --check .
echo "== import contracts (node -> p2p -> chain, node -> genesis -> chain, wallet -> chain)"
.venv/bin/lint-imports
echo "== mypy --strict"
.venv/bin/mypy
echo "== pytest"
exec .venv/bin/python -m pytest "$@"
