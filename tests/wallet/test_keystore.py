"""The encrypted key file and the wallet's amount handling."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chain.core.primitives.crypto import PrivateKey
from wallet.cli import main, parse_amount
from wallet.errors import WalletError, WalletFileError, WrongPassword
from wallet.keystore import Keystore


def test_keys_survive_reopen_and_file_is_private(tmp_path: Path) -> None:
    """Saved keys and labels come back on reopening with the password; the file is 0600 and holds no
    key in clear."""
    path = tmp_path / "w.wallet"
    store = Keystore.create(path, "pw")
    key = PrivateKey.generate()
    pub = store.add(key, "alice")
    store.save()
    assert path.stat().st_mode & 0o777 == 0o600
    assert key.to_text() not in path.read_text()
    again = Keystore.open(path, "pw")
    assert again.private_key(pub) is not None
    assert again.keys[pub][0] == "alice"


def test_wrong_password_and_damage(tmp_path: Path) -> None:
    """A wrong password or damaged ciphertext raises WrongPassword; a malformed or missing file, or
    creating over one, raises WalletFileError."""
    path = tmp_path / "w.wallet"
    Keystore.create(path, "pw")
    with pytest.raises(WrongPassword):
        Keystore.open(path, "wrong")
    doc = json.loads(path.read_text())
    first = int(doc["ciphertext"][:2], 16) ^ 0xFF  # flip every bit of the first byte
    doc["ciphertext"] = f"{first:02x}" + doc["ciphertext"][2:]
    path.write_text(json.dumps(doc))
    with pytest.raises(WrongPassword):
        Keystore.open(path, "pw")
    path.write_text("{}")
    with pytest.raises(WalletFileError):
        Keystore.open(path, "pw")
    with pytest.raises(WalletFileError):
        Keystore.create(path, "pw")
    with pytest.raises(WalletFileError):
        Keystore.open(tmp_path / "none.wallet", "pw")


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
    """Zero, negative, over-precise, other-symbol or non-numeric amounts raise WalletError."""
    with pytest.raises(WalletError):
        parse_amount(text, 4, "BOR")
