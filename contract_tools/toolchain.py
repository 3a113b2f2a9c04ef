"""Where ``bor-contract build`` finds the SDK and its compiler.

The SDK (AssemblyScript sources, the transforms, ``package.json`` and the lock that pins
the compiler) ships inside this package as ``contract_tools/sdk``; in a checkout that is a
link to ``contracts/sdk``, which ``scripts/bootstrap.sh`` gives its ``node_modules``. An
installed package has no ``node_modules`` (npm's, not Python's, to install): the first build
copies the shipped SDK into the user's cache, ``$BOR_CONTRACT_CACHE`` or
``${XDG_CACHE_HOME:-~/.cache}/bor-contract/<digest>/sdk``, and runs ``npm ci`` there from the
shipped lock, so the compiler is the pinned one and a later build needs no network. The
digest is of the shipped files: an upgraded SDK gets a cache entry of its own.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

SHIPPED_SDK = Path(__file__).resolve().parent / "sdk"
SHIPPED = ("package.json", "package-lock.json", "index.ts", "assembly", "transform")
# npm ci fetches assemblyscript and binaryen (about 20 MB) once; the bound only stops a
# wedged install from hanging the build.
NPM_CI_TIMEOUT_S = 600


class ToolchainError(Exception):
    """The compiler could not be found or installed; ``reason`` is one line for the user."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def find_sdk(shipped: Path = SHIPPED_SDK) -> Path:
    """The SDK directory to compile with: the shipped one when npm's packages are beside it
    (a bootstrapped checkout), else the user's cached copy, installed on first use."""
    if (shipped / "node_modules").exists():
        return shipped
    return cached_sdk(shipped, cache_root())


def cache_root() -> Path:
    explicit = os.environ.get("BOR_CONTRACT_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "bor-contract"


def sdk_digest(shipped: Path) -> str:
    """A digest of the shipped SDK's files (names and bytes), in a fixed order."""
    h = hashlib.sha256()
    for top in SHIPPED:
        path = shipped / top
        files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        for f in files:
            h.update(str(f.relative_to(shipped)).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def cached_sdk(shipped: Path, root: Path) -> Path:
    """``root/<digest>/sdk`` (named so for ``import ... from "sdk"``): the shipped SDK with
    its pinned npm packages, made once."""
    target = root / sdk_digest(shipped) / "sdk"
    if (target / "node_modules" / "assemblyscript").is_dir():
        return target
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        raise ToolchainError(
            "npm toolchain missing (no node/npm on PATH): install Node.js 18 or later with npm"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="sdk-", dir=target.parent))  # renamed when whole
    try:
        for top in SHIPPED:
            src = shipped / top
            if src.is_dir():
                shutil.copytree(src, work / top)
            else:
                shutil.copy2(src, work / top)
        npm_ci(npm, work, target)
        try:
            work.rename(target)
        except OSError:  # another build made it meanwhile
            if not (target / "node_modules" / "assemblyscript").is_dir():
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return target


def npm_ci(npm: str, directory: Path, target: Path) -> None:
    cmd = [npm, "ci", "--no-audit", "--no-fund", "--prefer-offline", "--loglevel=error"]
    try:
        done = subprocess.run(
            cmd, cwd=directory, capture_output=True, text=True, timeout=NPM_CI_TIMEOUT_S,
            check=False,
        )  # fmt: skip
    except subprocess.TimeoutExpired as err:
        raise ToolchainError(f"npm ci did not finish in {NPM_CI_TIMEOUT_S} s") from err
    if done.returncode != 0:
        lines = [ln.strip() for ln in (done.stderr + done.stdout).splitlines() if ln.strip()]
        why = lines[-1] if lines else f"exit {done.returncode}"
        raise ToolchainError(
            f"cannot install the pinned AssemblyScript into {target} (npm ci needs the npm "
            f"registry once; offline?): {why}"
        )
