"""The keys a client signs with: from memory (``PrivateKey`` or ``PVT_K1_`` text) or from a
bor-wallet file opened with its password.

A transaction needs the key of each account that authorizes it; the chain knows which key
that is (``get_account``'s ``key``), so the signer is asked by public key. A key may also be
bound to an account directly, which saves the client that read.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from bor_client.errors import KeyMissing
from bor_client.keystore import Keystore
from chain.core.primitives.crypto import PrivateKey, public_key_from_text, public_key_to_text
from chain.core.primitives.errors import ChainError

KeyLike = PrivateKey | str


def private_key(key: KeyLike) -> PrivateKey:
    """``key`` as a PrivateKey (text is BoR's or Antelope's ``PVT_K1_`` form)."""
    return key if isinstance(key, PrivateKey) else PrivateKey.from_text(key.strip())


def canonical_public(text: str) -> str:
    """A public key's text in BoR's form (the node's ``key``), whatever form it came in."""
    return public_key_to_text(public_key_from_text(text))


class Signer:
    """Private keys by public key text, and optionally by account."""

    def __init__(
        self, keys: Iterable[KeyLike] = (), accounts: Mapping[str, KeyLike] | None = None
    ) -> None:
        self._by_public: dict[str, PrivateKey] = {}
        self._by_account: dict[str, PrivateKey] = {}
        for key in keys:
            self.add(key)
        for account, key in (accounts or {}).items():
            self._by_account[account] = self.add(key)

    @classmethod
    def from_wallet(cls, path: str | Path, password: str) -> Signer:
        """Every key of a bor-wallet file (WrongPassword, WalletFileError if it will not open)."""
        return cls.from_keystore(Keystore.open(Path(path), password))

    @classmethod
    def from_keystore(cls, store: Keystore) -> Signer:
        """Every key of an opened bor-wallet file."""
        keys = [store.private_key(pub) for pub in store.keys]
        return cls(k for k in keys if k is not None)

    def add(self, key: KeyLike) -> PrivateKey:
        found = private_key(key)
        self._by_public[public_key_to_text(found.public_key)] = found
        return found

    def bound(self, account: str) -> PrivateKey | None:
        """The key bound to ``account`` by the caller, if any."""
        return self._by_account.get(account)

    def for_public(self, public_text: str) -> PrivateKey | None:
        """The private key of ``public_text`` (any text form of the key), if held."""
        try:
            return self._by_public.get(canonical_public(public_text))
        except ChainError:  # not a key at all: no key of ours is it
            return None

    def key_for(self, account: str, public_text: str) -> PrivateKey:
        """The key that signs for ``account``, whose key on chain is ``public_text``."""
        key = self.for_public(public_text)
        if key is None:
            raise KeyMissing(f"no key for {account} ({public_text})")
        return key

    def __len__(self) -> int:
        return len(self._by_public)
