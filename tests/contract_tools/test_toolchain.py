"""Where an installed bor-contract finds its compiler: the shipped SDK copied into the user's
cache and its pinned npm packages installed there once; offline, one line says so."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from contract_tools.build import SDK_DIR
from contract_tools.toolchain import SHIPPED, ToolchainError, cached_sdk, find_sdk, sdk_digest


def shipped_copy(tmp_path: Path) -> Path:
    """The SDK as the installed package holds it: the shipped files, no node_modules."""
    shipped = tmp_path / "shipped" / "sdk"
    shipped.mkdir(parents=True)
    for top in SHIPPED:
        src = SDK_DIR / top
        if src.is_dir():
            shutil.copytree(src, shipped / top)
        else:
            shutil.copy2(src, shipped / top)
    return shipped


def test_a_checkout_compiles_with_its_own_sdk() -> None:
    """With npm's packages beside the shipped SDK (a bootstrapped checkout) that is the SDK."""
    if not (SDK_DIR / "node_modules").exists():
        pytest.skip("this checkout is not bootstrapped")
    assert find_sdk() == SDK_DIR


def test_the_cache_entry_is_named_by_the_shipped_files(tmp_path: Path) -> None:
    """The cache entry's name is a digest of the shipped files: any change makes a new one."""
    shipped = shipped_copy(tmp_path)
    before = sdk_digest(shipped)
    (shipped / "assembly" / "name.ts").write_text("// changed\n")
    assert sdk_digest(shipped) != before


def test_offline_the_first_build_fails_with_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the npm registry (and nothing in npm's cache), installing the compiler fails
    with one line naming the cache directory and why, and leaves no half-made entry."""
    if shutil.which("npm") is None:
        pytest.skip("npm not installed")
    shipped = shipped_copy(tmp_path)
    monkeypatch.setenv("npm_config_cache", str(tmp_path / "empty-npm-cache"))
    monkeypatch.setenv("npm_config_offline", "true")
    root = tmp_path / "cache"
    with pytest.raises(ToolchainError) as err:
        cached_sdk(shipped, root)
    reason = err.value.reason
    assert "\n" not in reason and "npm ci needs the npm registry once" in reason
    assert str(root / sdk_digest(shipped) / "sdk") in reason
    assert list((root / sdk_digest(shipped)).iterdir()) == []
