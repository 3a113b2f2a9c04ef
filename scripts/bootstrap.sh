#!/usr/bin/env bash
# Installs what BoR needs into ./.venv: a Python >= 3.11 (from apt when the machine lacks
# one), then the project and, with --dev, its test tools. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

want_dev=0
[ "${1:-}" = "--dev" ] && want_dev=1

find_python() {
    for candidate in python3 python3.13 python3.12 python3.11; do
        if command -v "$candidate" >/dev/null 2>&1 &&
            "$candidate" -c 'import sys, venv, ensurepip; sys.exit(sys.version_info < (3, 11))' \
                >/dev/null 2>&1; then
            command -v "$candidate"
            return 0
        fi
    done
    return 1
}

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else
        echo "bootstrap: need root to run: $*" >&2; exit 1
    fi
}

if ! PYTHON=$(find_python); then
    echo "bootstrap: installing Python 3.11+ with venv from apt" >&2
    as_root apt-get update -qq
    # Debian 12 and Ubuntu 24.04 ship 3.11+ as python3; Ubuntu 22.04 has python3.11.
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
        python3 python3-venv python3-pip python3-dev build-essential >/dev/null
    if ! PYTHON=$(find_python); then
        as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
            python3.11 python3.11-venv python3.11-dev >/dev/null
        PYTHON=$(find_python) || { echo "bootstrap: no Python >= 3.11 available" >&2; exit 1; }
    fi
fi

if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
if [ "$want_dev" -eq 1 ]; then
    .venv/bin/python -m pip install -q -e '.[dev]'
    # The explorer's browser test drives Debian's chromium with Playwright (whose own
    # browser download needs the internet). Where apt has no such package the test skips
    # (and fails under CI, which must run it).
    if [ ! -x /usr/bin/chromium ]; then
        echo "bootstrap: installing chromium from apt (the explorer's browser test)" >&2
        as_root apt-get update -qq
        as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null ||
            echo "bootstrap: no chromium from apt; the explorer's browser test will skip" >&2
    fi
else
    .venv/bin/python -m pip install -q -e .
fi

# promtool, which checks the alert rules and the dashboard's queries (tests/deploy): taken
# out of Debian's prometheus package into .venv/bin, so that no Prometheus server is
# installed or started here. Only where promtool is missing.
if [ "$want_dev" -eq 1 ] && ! command -v promtool >/dev/null 2>&1 && [ ! -x .venv/bin/promtool ]; then
    echo "bootstrap: extracting promtool from apt's prometheus package" >&2
    as_root apt-get update -qq
    deb_dir=$(mktemp -d) && chmod a+rwx "$deb_dir"  # apt downloads as _apt
    (cd "$deb_dir" && apt-get download -qq prometheus && dpkg-deb -x prometheus_*.deb root)
    cp "$deb_dir/root/usr/bin/promtool" .venv/bin/promtool
    rm -rf "$deb_dir"
fi

# The contract toolchain (bor-contract build): node and npm from apt when missing, then the
# AssemblyScript compiler pinned in contracts/sdk/package-lock.json.
if ! command -v npm >/dev/null 2>&1 || ! command -v node >/dev/null 2>&1; then
    echo "bootstrap: installing node and npm from apt" >&2
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
fi
(cd contracts/sdk && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
