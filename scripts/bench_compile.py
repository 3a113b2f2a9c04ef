"""How long the slowest modules that ``setcode`` admits take to compile, and what each kind of
construct costs (the weights of ``chain.vm.structure``).

For each shape (many functions, loops nested as deep as allowed, nested ifs, blocks, calls,
indirect calls, br_tables, straight-line code of loads and stores, divisions, ...) it builds
the largest module of that shape that the structural limits and ``MAX_COMPILE_COST`` admit
(and the chain's ``max_code_bytes``), and times its compilation with the node's engine
configuration (median of ``--repeat``). ``--calibrate`` instead builds each shape at
``--kib`` KiB without the limits and prints microseconds per construct, the measurement the
weights come from; ``--winch`` also times wasmtime's baseline compiler on the same modules.

    python scripts/bench_compile.py [--repeat 5] [--winch]
    python scripts/bench_compile.py --calibrate [--kib 256]

The last line of output is a JSON object: per shape, the module's bytes, its compile cost and
the median compile milliseconds, and ``worst_ms``, the slowest of them.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import wasmtime

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from chain.core.primitives.errors import ContractError
from chain.core.primitives.params import ChainParams
from chain.vm import structure
from chain.vm.engine import make_config
from scripts.benchtools import cores

HEAD = """(module (memory (export "memory") 1) (table 16 funcref)
 (global $g (mut i32) (i32.const 0)) (type $v (func)) (func $leaf) (elem (i32.const 0) $leaf)
 (func (export "apply") (param i64 i64 i64) nop)"""


def _funcs(body: str, count: int, locals_: str = "(local i32 i64)") -> str:
    return f"{HEAD} {f'(func {locals_} {body})' * count})"


def _per_function(unit: str, per_func: int) -> Callable[[int], str]:
    """``n`` units spread over functions of ``per_func`` units each."""

    def make(n: int) -> str:
        full, rest = divmod(n, per_func)
        tail = f"(func (local i32 i64) {unit * rest})" if rest else ""
        return _funcs(unit * per_func, full)[:-1] + tail + ")"

    return make


def _nested(open_: str, close: str, depth: int) -> Callable[[int], str]:
    def make(n: int) -> str:
        full, rest = divmod(n, depth)
        one = open_ * depth + "nop" + close * depth
        tail = f"(func (local i32 i64) {open_ * rest}nop{close * rest})" if rest else ""
        return _funcs(one, full)[:-1] + tail + ")"

    return make


def _live(unit: str, control: int, nest: bool = False) -> Callable[[int], str]:
    """``n`` units, each setting one of ``MAX_LOCALS`` i64 locals from two others, so that all
    are live across the function, in functions of as many as the per-function limit admits
    (``control``: the blocks and branches one unit holds); nested as deep as allowed if
    ``nest`` (``unit`` then leaves its blocks open)."""
    locals_ = structure.MAX_LOCALS - 2
    per_func = structure.MAX_FUNCTION_CONTROL // control if control else 512

    def one(i: int) -> str:
        a, b, c = (i % locals_ + 2, (i * 7) % locals_ + 2, (i * 13) % locals_ + 2)
        return unit.format(set=f"(local.set {a} (i64.add (local.get {b}) (local.get {c})))")

    def body(first: int, count: int) -> str:
        if not nest:
            return "".join(one(i) for i in range(first, first + count))
        text = ""
        for start in range(first, first + count, structure.MAX_NESTING):
            depth = min(structure.MAX_NESTING, first + count - start)
            text += "".join(one(i) for i in range(start, start + depth)) + "))" * depth
        return text

    def make(n: int) -> str:
        decl = "(local i32 i64 " + "i64 " * locals_ + ")"
        funcs = "".join(
            f"(func {decl} {body(first, min(per_func, n - first))})"
            for first in range(0, n, per_func)
        )
        return f"{HEAD} {funcs})"

    return make


DEPTH = structure.MAX_NESTING
IF = "(if (local.get 0) (then "
SHAPES: dict[str, Callable[[int], str]] = {
    "functions": lambda n: _funcs("nop", n),
    "loops_nested": _nested("(loop ", ")", DEPTH),
    "loops_flat": _per_function("(loop (br_if 0 (local.get 0)))", 64),
    "ifs_nested": _nested("(i32.const 1) (if (then ", ") (else nop))", DEPTH),
    "blocks_nested_br": _nested("(block (br_if 0 (local.get 0)) ", ")", DEPTH),
    "calls": _per_function("(call $leaf)", 256),
    "call_indirect": _per_function("(call_indirect (type $v) (i32.const 0))", 256),
    "br_table": _per_function(
        "(block (br_table " + "0 " * (structure.MAX_BR_TABLE - 1) + "(local.get 0)))", 1
    ),
    "loads_stores": _per_function(
        "(i64.store offset=8 (local.get 0) (i64.load offset=16 (local.get 0)))", 256
    ),
    "divisions": _per_function(
        "(local.set 1 (i64.div_s (local.get 1) (i64.rem_u (local.get 1) (local.get 1))))", 256
    ),
    "globals": _per_function("(global.set $g (i32.add (global.get $g) (local.get 0)))", 256),
    "floats": _per_function(
        "(drop (f64.sqrt (f64.div (f64.convert_i64_s (local.get 1)) (f64.const 3))))", 256
    ),
    "memory_ops": _per_function(
        "(memory.copy (local.get 0) (i32.const 8) (i32.const 64))"
        "(drop (memory.grow (i32.const 0)))",
        256,
    ),
    "ifs_live": _live("(if (local.get 0) (then {set}))", 1),
    "loops_live": _live("(loop {set} (br_if 0 (local.get 0)))", 2),
    "ifs_nested_live": _live("(if (local.get 0) (then {set}", 1, nest=True),
    "calls_live": _live("(call $leaf) {set}", 0),
    "selects": _per_function(
        "(local.set 0 (select (local.get 0) (i32.const 7) (i32.eqz (local.get 0))))", 256
    ),
}


def _build(shape: str, n: int) -> bytes:
    return bytes(wasmtime.wat2wasm(SHAPES[shape](n)))


def _admitted(code: bytes, max_code_bytes: int) -> bool:
    if len(code) > max_code_bytes:
        return False
    try:
        structure.check_structure(code)
    except ContractError:
        return False
    return True


def largest_admitted(shape: str, max_code_bytes: int) -> bytes:
    """The module of ``shape`` with the most units that the limits admit."""
    return _build(shape, largest_units(shape, max_code_bytes))


def largest_units(shape: str, max_code_bytes: int) -> int:
    """The most units of ``shape`` that the limits admit in one module (binary search)."""
    low, high = 1, 1
    while _admitted(_build(shape, high), max_code_bytes):
        low, high = high, high * 2
    while high - low > 1:
        mid = (low + high) // 2
        if _admitted(_build(shape, mid), max_code_bytes):
            low = mid
        else:
            high = mid
    return low


def sized(shape: str, kib: int) -> bytes:
    """The module of ``shape`` nearest ``kib`` KiB, whatever the limits say."""
    n = 1
    while len(_build(shape, n * 2)) <= kib * 1024:
        n *= 2
    step = n // 2
    while step:
        if len(_build(shape, n + step)) <= kib * 1024:
            n += step
        step //= 2
    return _build(shape, n)


def engine(winch: bool) -> wasmtime.Engine:
    config = make_config()
    if winch:
        # wasmtime-py's Config.strategy knows only auto and cranelift; 2 is Winch in the C API.
        wasmtime._ffi.wasmtime_config_strategy_set(config.ptr(), 2)
    return wasmtime.Engine(config)


def compile_ms(eng: wasmtime.Engine, code: bytes, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        wasmtime.Module(eng, code)
        times.append((time.perf_counter() - started) * 1000)
    return round(statistics.median(times), 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--winch", action="store_true", help="also time the Winch compiler")
    parser.add_argument("--calibrate", action="store_true", help="cost per construct")
    parser.add_argument("--kib", type=int, default=256, help="module size to calibrate at")
    args = parser.parse_args()
    if args.repeat < 1 or args.kib < 1:
        parser.error("--repeat and --kib must be at least 1")
    print(f"cores: {cores()}")
    cranelift = engine(False)
    winch = engine(True) if args.winch else None
    max_code_bytes = ChainParams().max_code_bytes
    results: dict[str, dict[str, float | int]] = {}
    for shape in SHAPES:
        code = sized(shape, args.kib) if args.calibrate else largest_admitted(shape, max_code_bytes)
        s = structure.read_structure(code)
        row: dict[str, float | int] = {
            "bytes": len(code),
            "cost": s.compile_cost,
            "ms": compile_ms(cranelift, code, args.repeat),
        }
        if winch is not None:
            row["winch_ms"] = compile_ms(winch, code, args.repeat)
        if args.calibrate:
            units = {
                "functions": s.functions,
                "loops": s.loops,
                "blocks": s.blocks,
                "calls": s.calls,
                "br_targets": s.branch_targets,
            }
            row.update(units)
            row["us_per_kib"] = round(float(row["ms"]) * 1000 / (s.code_bytes / 1024), 1)
        results[shape] = row
        print(shape, row, flush=True)
    worst = max(float(r["ms"]) for r in results.values())
    print(f"slowest: {worst} ms (limit {structure.MAX_COMPILE_COST} cost units)")
    print(json.dumps({"shapes": results, "worst_ms": worst, "calibrate": args.calibrate}))


if __name__ == "__main__":
    main()
