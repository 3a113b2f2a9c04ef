"""The encrypted key file (bor-wallet's, and the SDK's ``Signer.from_wallet``).

The private keys are one JSON document encrypted with AES-256-GCM under a key derived from
the password with scrypt (``cryptography``). GCM authenticates, so a wrong password is told
apart from a damaged file only by the tag check failing: both say the password is wrong.
The file is written with mode 0600 through a temporary file and an atomic rename, so a crash
never leaves half a wallet.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.scrypt import Scrypt

from bor_client.errors import WalletFileError, WrongPassword
from chain.core.primitives.crypto import PrivateKey, public_key_to_text
from chain.core.primitives.errors import InvalidKey

# scrypt cost: N=2^15, r=8 is ~32 MiB and ~0.1 s per unlock, the interactive-login level
# the scrypt paper recommends; stored in the file so it can be raised later.
SCRYPT_N = 2**15
SCRYPT_R = 8
SCRYPT_P = 1
FORMAT = "bor-wallet-v1"


def _derive(password: str, salt: bytes, n: int, r: int, p: int) -> bytes:
    return Scrypt(salt=salt, length=32, n=n, r=r, p=p).derive(password.encode())


@dataclass
class Keystore:
    path: Path
    password: str
    keys: dict[str, tuple[str, str]] = field(default_factory=dict)  # pub text -> (label, pvt)

    @classmethod
    def create(cls, path: Path, password: str) -> Keystore:
        if path.exists():
            raise WalletFileError(f"wallet {path} already exists")
        if not password:
            raise WalletFileError("the wallet password must not be empty")
        store = cls(path, password)
        store.save()
        return store

    @classmethod
    def open(cls, path: Path, password: str) -> Keystore:
        try:
            doc = json.loads(path.read_text())
        except FileNotFoundError as err:
            raise WalletFileError(f"no wallet at {path} (run: bor-wallet create)") from err
        except (OSError, json.JSONDecodeError) as err:
            raise WalletFileError(f"cannot read wallet {path}: {err}") from err
        try:
            if doc["format"] != FORMAT:
                raise WalletFileError(f"{path} is not a {FORMAT} file")
            kdf = doc["kdf"]
            key = _derive(password, bytes.fromhex(kdf["salt"]), kdf["n"], kdf["r"], kdf["p"])
            nonce, ciphertext = bytes.fromhex(doc["nonce"]), bytes.fromhex(doc["ciphertext"])
        except (KeyError, TypeError, ValueError) as err:
            raise WalletFileError(f"wallet {path} is damaged") from err
        try:
            plain = AESGCM(key).decrypt(nonce, ciphertext, FORMAT.encode())
        except InvalidTag as err:
            raise WrongPassword(f"wrong password for wallet {path}") from err
        entries = json.loads(plain)["keys"]
        return cls(path, password, {k: (v[0], v[1]) for k, v in entries.items()})

    def save(self) -> None:
        salt, nonce = os.urandom(16), os.urandom(12)
        key = _derive(self.password, salt, SCRYPT_N, SCRYPT_R, SCRYPT_P)
        plain = json.dumps({"keys": {k: list(v) for k, v in self.keys.items()}}).encode()
        doc = {
            "format": FORMAT,
            "kdf": {
                "name": "scrypt",
                "salt": salt.hex(),
                "n": SCRYPT_N,
                "r": SCRYPT_R,
                "p": SCRYPT_P,
            },
            "cipher": "aes-256-gcm",
            "nonce": nonce.hex(),
            "ciphertext": AESGCM(key).encrypt(nonce, plain, FORMAT.encode()).hex(),
        }
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = self.path.with_name(self.path.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(doc, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)

    def add(self, key: PrivateKey, label: str) -> str:
        pub = public_key_to_text(key.public_key)
        self.keys[pub] = (label, key.to_text())
        return pub

    def private_key(self, pub_text: str) -> PrivateKey | None:
        entry = self.keys.get(pub_text)
        if entry is None:
            return None
        try:
            return PrivateKey.from_text(entry[1])
        except InvalidKey as err:
            raise WalletFileError(f"wallet holds a damaged key for {pub_text}") from err
