#!/usr/bin/env bash
# Command two: install everything and run the linters, the type checker and every test.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/bootstrap.sh --dev
echo "== ruff"
.venv/bin/ruff check .
.venv/bin/ruff format --check .
echo "== mypy --strict"
.venv/bin/mypy
echo "== pytest"
exec .venv/bin/python -m pytest "$@"
