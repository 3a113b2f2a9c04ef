"""Table keys and scopes are read as clients send them: numbers, digit strings, names and
token symbol codes, and anything else is refused naming the field."""

from __future__ import annotations

import pytest

from chain.core.execution.contracts import name_to_u64
from chain.core.primitives.errors import EncodingError
from node.api.contracts.reads import u64_of


def test_keys_read_as_numbers_digits_names_and_symbol_codes() -> None:
    """A symbol code is Antelope's symbol_code number (letters little-endian), the scope of a
    token's stat table; a name is its 64-bit name."""
    assert u64_of(7, "k") == u64_of("7", "k") == 7
    assert u64_of("alice", "k") == name_to_u64("alice")
    assert u64_of("TOK", "k") == ord("T") | ord("O") << 8 | ord("K") << 16


@pytest.mark.parametrize("bad", ["Tok", "TOOLONGX", "alice!", str(2**64)])
def test_other_keys_are_refused_naming_the_field(bad: str) -> None:
    """Mixed case, an 8-letter code, a bad name or a number past u64 is an EncodingError."""
    with pytest.raises(EncodingError, match="scope"):
        u64_of(bad, "scope")
