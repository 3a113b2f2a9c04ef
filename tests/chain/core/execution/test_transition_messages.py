"""What a refused transfer or stake tells a person: token amounts, not base units."""

from __future__ import annotations

import pytest

from chain.core.execution.actions import Stake, Transfer, Unstake
from chain.core.execution.state import Account, StateView
from chain.core.execution.transition import Context, apply_action, token_amount
from chain.core.primitives.crypto import PrivateKey
from chain.core.primitives.errors import InsufficientFunds
from chain.core.primitives.params import ChainParams
from chain.core.primitives.types import AccountName
from chain.testing import MemoryKV

CTX = Context(ChainParams(), 1_000_000)


@pytest.fixture
def view() -> StateView:
    v = StateView(MemoryKV())
    for i, name in enumerate(("alice", "bob")):
        key = PrivateKey(bytes([i + 1]) * 32).public_key
        v.put_account(Account(AccountName(name), key, balance=9_999_770_000))
    return v


def test_token_amount_shows_the_tokens_precision_and_symbol() -> None:
    """Base units read as the token's amount with its precision and symbol."""
    assert token_amount(9_999_770_000, ChainParams()) == "999977.0000 BOR"
    assert token_amount(5, ChainParams(token_precision=2, token_symbol="XY")) == "0.05 XY"
    assert token_amount(7, ChainParams(token_precision=0)) == "7 BOR"


@pytest.mark.parametrize(
    ("action", "message"),
    [
        (
            Transfer(AccountName("alice"), AccountName("bob"), 9_999_999_990_000),
            "alice has 999977.0000 BOR, needs 999999999.0000 BOR",
        ),
        (
            Stake(AccountName("alice"), 9_999_999_990_000),
            "alice has 999977.0000 BOR, needs 999999999.0000 BOR",
        ),
        (Unstake(AccountName("alice"), 10_000), "alice has 0.0000 BOR staked, asks 1.0000 BOR"),
    ],
)
def test_insufficient_funds_names_token_amounts(
    view: StateView, action: object, message: str
) -> None:
    """An overdrawn transfer, stake or unstake says the balance and the amount as tokens."""
    with pytest.raises(InsufficientFunds) as refused:
        apply_action(view, action, CTX)  # type: ignore[arg-type]
    assert str(refused.value) == message
