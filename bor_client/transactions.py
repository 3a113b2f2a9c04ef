"""Building and signing transactions: TaPoS and expiration from get_info, the authorizing
accounts' keys from the chain, amounts in the token's own text.

Pure but for its clock: the clients fetch what ``Builder`` says it lacks (the chain's info,
an account's key) and hand it over, so the sync and the async client sign identically. The
info is reused for ``tapos_ttl_s`` (a transaction may reference any recent block, and the
LIB it names stays one), and each account's key until a push is refused for its signature,
so a stream of pushes costs no read per transaction.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any

from bor_client.errors import BadAmount, RpcError
from bor_client.keys import Signer
from bor_client.results import Info
from chain.core.execution.actions import Action, Stake, Transfer, Unstake, VoteProducer
from chain.core.execution.transaction import SignedTransaction, Transaction, tapos_of
from chain.core.execution.transition import format_units
from chain.core.primitives.crypto import PrivateKey
from chain.core.primitives.types import MAX_AMOUNT, BlockId, account_name

# How long a signed transaction stays valid: long enough for a commit-mode push to wait for
# its block, short enough that a lost one does not linger (the wallet's value).
EXPIRATION_S = 60
TAPOS_TTL_S = 10.0
# The refusals after which what the builder remembers may be stale: a rotated key, or a
# reference block the node no longer knows.
_STALE_KEYS = frozenset({"bad_signature", "missing_authority"})
_STALE_INFO = frozenset({"tx_expired", "tapos_mismatch"})
# An amount is written as the README shows it and nothing else: no exponent ("1e5" would move
# 100,000 tokens), no digit separators, no sign, no "inf". Bounded before int(), whose cost
# grows with the digits.
_AMOUNT_RE = re.compile(r"([0-9]{1,30})(?:\.([0-9]{1,30}))?")

Amount = int | str


def parse_amount(text: str, precision: int, symbol: str) -> int:
    """'10', '10.5' or '10.5000 BOR' in base units; refuses any other form, more decimals than
    the token has, zero, and more than the chain's maximum amount."""
    forms = f"10, 10.5 (at most {precision} decimals) or '10.5000 {symbol}'"
    number, space, unit = text.partition(" ")
    match = _AMOUNT_RE.fullmatch(number)
    if match is None or (space and unit != symbol):
        raise BadAmount(f"amount {text!r}: write it as {forms}")
    whole, frac = match.group(1), match.group(2) or ""
    if len(frac) > precision:
        raise BadAmount(f"amount {text!r} has {len(frac)} decimals; the token has {precision}")
    units = int(whole + frac.ljust(precision, "0"))
    if units == 0:
        raise BadAmount(f"amount {text!r} must be more than zero")
    if units > MAX_AMOUNT:
        top = format_units(MAX_AMOUNT, precision, symbol)
        raise BadAmount(f"amount {text!r} is above the maximum, {top}")
    return units


def units(amount: Amount, info: Info) -> int:
    """``amount`` in base units: an int is base units already, text is the token's amount."""
    if isinstance(amount, str):
        return parse_amount(amount, info.token_precision, info.token_symbol)
    if isinstance(amount, bool) or not 0 < amount <= MAX_AMOUNT:
        raise BadAmount(f"amount {amount!r}: base units from 1 to {MAX_AMOUNT}")
    return amount


def transfer(sender: str, recipient: str, amount: int, memo: str = "") -> Transfer:
    return Transfer(account_name(sender), account_name(recipient), amount, memo)


def stake(account: str, amount: int) -> Stake:
    return Stake(account_name(account), amount)


def unstake(account: str, amount: int) -> Unstake:
    return Unstake(account_name(account), amount)


def vote(voter: str, producers: Iterable[str]) -> VoteProducer:
    """``voter``'s votes replaced by ``producers`` (sorted and unique, as the chain wants)."""
    return VoteProducer(account_name(voter), tuple(sorted({account_name(p) for p in producers})))


def body_of(stx: SignedTransaction) -> dict[str, Any]:
    """push_transaction's ``{packed_trx, signatures}`` for ``stx``."""
    return {"packed_trx": stx.packed.hex(), "signatures": [s.hex() for s in stx.signatures]}


class Builder:
    """Signs transactions with ``signer``'s keys, from what the client has read of the chain."""

    def __init__(
        self,
        signer: Signer,
        expiration_s: int = EXPIRATION_S,
        tapos_ttl_s: float = TAPOS_TTL_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.signer = signer
        self.expiration_s = expiration_s
        self.tapos_ttl_s = tapos_ttl_s
        self._clock = clock
        self._info: Info | None = None
        self._info_at = 0.0
        self._keys: dict[str, str] = {}  # account -> its key on chain

    @property
    def info(self) -> Info | None:
        """The last info read, however old (its token symbol and precision never change)."""
        return self._info

    def needs_info(self) -> bool:
        return self._info is None or self._clock() - self._info_at > self.tapos_ttl_s

    def set_info(self, info: Info) -> None:
        self._info, self._info_at = info, self._clock()

    def unknown_accounts(self, actions: Sequence[Action]) -> list[str]:
        """The authorizing accounts whose key on chain the builder must be told."""
        actors = dict.fromkeys(a for action in actions for a in action.actors())
        return [a for a in actors if self.signer.bound(a) is None and a not in self._keys]

    def set_account_key(self, account: str, public_text: str) -> None:
        self._keys[account] = public_text

    def sign(self, actions: Sequence[Action]) -> SignedTransaction:
        """``actions`` as one transaction, signed by every authorizing account's key."""
        info = self._info
        assert info is not None, "needs_info() first"
        keys: list[PrivateKey] = []
        for actor in dict.fromkeys(a for action in actions for a in action.actors()):
            bound = self.signer.bound(actor)
            keys.append(bound or self.signer.key_for(actor, self._keys[actor]))
        ref_num, ref_prefix = tapos_of(BlockId(bytes.fromhex(info.last_irreversible_block_id)))
        head_time = datetime.fromisoformat(info.head_block_time + "+00:00").timestamp()
        expiration = int(max(self._clock(), head_time)) + self.expiration_s
        tx = Transaction(expiration, ref_num, ref_prefix, tuple(actions))
        return SignedTransaction.sign(tx, bytes.fromhex(info.chain_id), keys)

    def refused(self, error: RpcError) -> None:
        """Forget what a refusal says may be stale, so that the next transaction reads it."""
        if error.name in _STALE_KEYS:
            self._keys.clear()
        if error.name in _STALE_INFO:
            self._info_at = 0.0
