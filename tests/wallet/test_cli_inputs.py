"""The CLI's inputs: a wrong password is one line, and amounts parse as the README writes
them and nothing else."""

from __future__ import annotations

from pathlib import Path

import pytest

from bor_client.errors import BadAmount
from bor_client.keystore import Keystore
from wallet.cli import main, parse_amount


def test_cli_wrong_password_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The CLI reports a wrong password in a single line on stderr and exits with 1."""
    path = tmp_path / "w.wallet"
    Keystore.create(path, "right")
    monkeypatch.setenv("BOR_WALLET_PASSWORD", "wrong")
    assert main(["--wallet", str(path), "list"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "wrong password" in err


@pytest.mark.parametrize(
    ("text", "units"), [("10", 100000), ("0.0001", 1), ("1.5 BOR", 15000), ("2.5000", 25000)]
)
def test_amounts(text: str, units: int) -> None:
    """Amounts with up to four decimals, with or without the symbol, parse to whole units."""
    assert parse_amount(text, 4, "BOR") == units


@pytest.mark.parametrize("text", ["0", "-1", "0.00001", "1 EOS", "ten", "1e-9"])
def test_bad_amounts(text: str) -> None:
    """Zero, negative, over-precise, other-symbol or non-numeric amounts raise BadAmount."""
    with pytest.raises(BadAmount):
        parse_amount(text, 4, "BOR")
