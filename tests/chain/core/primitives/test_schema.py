"""Store keys: numbers big-endian so they sort, and a number that does not fit its key is a
typed EncodingError (an RPC caller once turned -1 and 2**64 into an OverflowError)."""

from __future__ import annotations

import pytest

from chain.core.primitives import schema
from chain.core.primitives.errors import EncodingError


def test_block_number_keys_sort_by_number() -> None:
    """Keys of increasing block numbers sort in the same order."""
    nums = [0, 1, 255, 256, 2**32, 2**64 - 1]
    keys = [schema.block_num_key(n) for n in nums]
    assert keys == sorted(keys) and len(set(keys)) == len(keys)


@pytest.mark.parametrize("num", [-1, 2**64, 10**5000], ids=["-1", "2**64", "10**5000"])
def test_a_number_outside_its_key_is_an_encoding_error(num: int) -> None:
    """Negative numbers and numbers of more than 8 bytes raise EncodingError, not
    OverflowError (and never format a 5,000-digit number)."""
    with pytest.raises(EncodingError):
        schema.block_num_key(num)
