"""The structural limits read from a module's bytes, which bound how long it takes to compile."""

from __future__ import annotations

import pytest
import wasmtime
from hypothesis import given, settings
from hypothesis import strategies as st

from chain.core.primitives.errors import ContractError
from chain.core.primitives.params import ChainParams
from chain.vm import structure
from chain.vm.engine import engine
from chain.vm.validate import check_bytes
from tests.chain.vm.wat import contract


def module(funcs: str) -> bytes:
    return bytes(
        wasmtime.wat2wasm(
            f"""(module (memory (export "memory") 1)
            (func (export "apply") (param i64 i64 i64) nop) {funcs})"""
        )
    )


def nested(depth: int) -> str:
    return "(func " + "(block " * depth + "nop" + ")" * depth + ")"


def test_counts_what_a_module_holds() -> None:
    """Each kind of construct is counted where it is, in every function."""
    s = structure.read_structure(
        module(
            "(func (local i32 i64 i64) (loop (br_if 0 (local.get 0)))"
            " (if (local.get 0) (then nop) (else nop))"
            " (block (br_table 0 0 0 (local.get 0)))"
            " (drop (i32.div_s (local.get 0) (i32.const 3)))"
            " (i32.store (i32.const 0) (i32.load (i32.const 4)))"
            " (drop (memory.grow (i32.const 0)))"
            " (call 0 (i64.const 1) (i64.const 2) (i64.const 3)))"
        )
    )
    assert (s.functions, s.loops, s.blocks, s.branches) == (2, 1, 3, 2)
    assert (s.branch_targets, s.max_br_table, s.checked, s.memory) == (3, 3, 1, 2)
    assert (s.libcalls, s.calls, s.max_locals, s.max_nesting) == (1, 1, 3, 1)
    assert s.max_function_control == 6
    assert not s.has_start


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=40), min_size=1, max_size=6))
def test_nesting_is_the_deepest_of_any_function(depths: list[int]) -> None:
    """The nesting read is the deepest any function reaches, whatever the others do."""
    s = structure.read_structure(module("".join(nested(d) for d in depths)))
    assert s.max_nesting == max(depths)
    assert s.blocks == sum(depths)
    assert s.functions == len(depths) + 1


@pytest.mark.parametrize(
    ("funcs", "refusal"),
    [
        (nested(structure.MAX_NESTING + 1), "nested blocks"),
        ("(func (local " + "i32 " * (structure.MAX_LOCALS + 1) + "))", "locals in one function"),
        (
            "(func (local i32) (block (br_table "
            + "0 " * (structure.MAX_BR_TABLE + 1)
            + "(local.get 0))))",
            "br_table targets",
        ),
        (
            "(func (local i32)"
            + " (if (local.get 0) (then nop))" * (structure.MAX_FUNCTION_CONTROL + 1)
            + ")",
            "blocks and branches in one function",
        ),
        ("(func)" * structure.MAX_FUNCTIONS, "functions"),
    ],
)
def test_a_module_past_a_limit_is_refused_naming_it(funcs: str, refusal: str) -> None:
    """One construct past its limit refuses the module, saying which limit."""
    with pytest.raises(ContractError, match=refusal):
        structure.check_structure(module(funcs))


def test_a_module_too_costly_to_compile_is_refused() -> None:
    """Functions each within the limits still add up to a cost that refuses the module."""
    one = "(func (local i32)" + " (if (local.get 0) (then nop))" * 500 + ")"
    code = module(one * 20)
    assert structure.read_structure(code).max_function_control == 500
    with pytest.raises(ContractError, match="too costly to compile"):
        structure.check_structure(code)


def test_setcode_reads_the_limits_before_compiling() -> None:
    """check_bytes (setcode's checks before compilation) refuses a module past a limit and a
    start function, and passes a plain contract."""
    params = ChainParams()
    check_bytes(engine(), contract("nop"), params)
    with pytest.raises(ContractError, match="nested blocks"):
        check_bytes(engine(), module(nested(structure.MAX_NESTING + 1)), params)
    start = bytes(
        wasmtime.wat2wasm(
            '(module (memory (export "memory") 1) (func $s) (start $s)'
            ' (func (export "apply") (param i64 i64 i64)))'
        )
    )
    with pytest.raises(ContractError, match="start function"):
        check_bytes(engine(), start, params)


def test_bytes_it_cannot_read_are_refused() -> None:
    """A truncated or foreign module is a ContractError, never an exception of the reader."""
    code = contract("nop")
    for bad in (code[:-3], b"\x00asm\x02\x00\x00\x00", code[:8] + b"\x0a\xff\xff\xff\xff\x0f"):
        with pytest.raises(ContractError, match="structure cannot be read"):
            structure.read_structure(bad)
