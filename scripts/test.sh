#!/usr/bin/env bash
# Command two: install everything and run the linters, the type checker and every test.
set -euo pipefail
cd "$(dirname "$0")/.."
# CI (.ci/run) has installed already, and builds the RDMA VMs' roots meanwhile.
[ -n "${BOR_INSTALLED:-}" ] || ./scripts/bootstrap.sh --dev
echo "== ruff"
.venv/bin/ruff check .
.venv/bin/ruff format --check .
echo "== import contracts (node -> p2p -> chain, node -> genesis -> chain, wallet -> chain)"
.venv/bin/lint-imports
echo "== mypy --strict"
.venv/bin/mypy
# CI must run the differential tests (tests/chain/core/execution/test_engine.py), which skip
# where the compiled core did not build; and the chain's core once on the reference alone.
if [ -n "${CI:-}" ]; then
    .venv/bin/python -c 'from chain.core.execution import engine; assert engine.available(), "the compiled core did not build"'
fi
echo "== pytest tests/chain/core, the Python reference alone (BOR_NATIVE=0)"
BOR_NATIVE=0 .venv/bin/python -m pytest -q -p no:cacheprovider tests/chain/core
echo "== pytest"
# The slowest tests' times come last, to see where the suite's minutes go.
exec .venv/bin/python -m pytest --durations=25 "$@"
