"""The encrypted key file: keys survive a reopen, and a wrong password or a damaged file is
named as such."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bor_client.errors import WalletFileError, WrongPassword
from bor_client.keystore import Keystore
from chain.core.primitives.crypto import PrivateKey


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
