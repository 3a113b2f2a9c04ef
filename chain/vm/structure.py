"""A module's structure, read from its bytes, and the limits it must keep to be deployed.

wasmtime compiles a module in time that grows with what is in it (functions, control
structures, calls) and faster than linearly with how deeply its blocks nest: a 256 KiB
module of nested ``if``s took 9 s. ``setcode`` therefore refuses, before anything is
compiled, a module past any limit below, and a module whose weighted count of what costs
compilation time (``compile_cost``) is past ``MAX_COMPILE_COST``. Both are decided from the
bytes alone, the same way on every node; ``scripts/bench_compile.py`` builds the slowest
modules the limits admit and times them (docs/benchmarks.md has the figures).

The reader expects bytes that ``wasmtime.Module.validate`` accepted with our engine's
features (no SIMD, threads, exceptions, tail calls, GC, memory64 or multi-memory); anything
else it does not know is refused, not guessed at.
"""

from __future__ import annotations

from dataclasses import dataclass

from chain.core.primitives.errors import ContractError

# --- limits (EOS VM checks the same kinds; ours are set by measurement) ----------------------
MAX_FUNCTIONS = 2048  # functions defined by the module (its code section)
MAX_FUNCTION_BYTES = 64 * 1024  # one function's body
MAX_LOCALS = 256  # locals of one function, parameters not counted
# Blocks, loops, ifs, elses and branches in one function: Cranelift's time per control
# structure grows with how many share the function (and with its locals): 3.4 us each at 64
# per function, 10-11 us at 512 with 256 locals, 25 us at 2,048.
MAX_FUNCTION_CONTROL = 512
MAX_NESTING = 128  # blocks, loops and ifs open at once in one function
MAX_BR_TABLE = 1024  # targets of one br_table
MAX_GLOBALS = 1024
MAX_TYPES = 2048
MAX_IMPORTS = 256
MAX_EXPORTS = 1024
MAX_SEGMENTS = 8192  # data segments, and element segments (AssemblyScript makes one a string)

# Weights of what compilation spends its time on, in units of 100 ns of a 2-core x86-64 VM
# (wasmtime 50, Cranelift, fuel on), each measured on modules made of little else and rounded
# up (``scripts/bench_compile.py --calibrate``): a function 15 us, a control structure or
# branch 11 us (at the per-function limits above; 3-5 us in small functions), a call 1.7 us,
# an indirect call 14 us, a division 4 us (its traps are branches), a load or store 1.2 us, a
# library call (memory.grow, bulk memory, tables) 9 us, and 60 us per KiB for the rest.
W_FUNCTION = 160
W_LOOP = 110
W_BLOCK = 110  # block, if, else
W_BRANCH = 110  # br, br_if, br_table
W_BRANCH_TARGET = 1  # each target of a br_table (measured at 0.03 us)
W_CALL = 20
W_CALL_INDIRECT = 150
W_CHECKED = 45  # integer division and remainder, float-to-integer truncation
W_MEMORY = 13  # loads, stores, table.get and table.set
W_LIBCALL = 100
W_KIB = 600  # per KiB of code
# About 70 ms of compilation on that machine, at most; the example token costs 45,000.
MAX_COMPILE_COST = 700_000


@dataclass(frozen=True, slots=True)
class Structure:
    """What a module holds, as far as the limits and the compile cost care."""

    functions: int
    code_bytes: int
    loops: int
    blocks: int  # block, if and else
    branches: int  # br, br_if, br_table
    branch_targets: int  # of every br_table
    calls: int
    indirect_calls: int
    checked: int  # divisions, remainders, truncations
    memory: int  # loads and stores
    libcalls: int
    max_nesting: int
    max_locals: int
    max_function_control: int
    max_function_bytes: int
    max_br_table: int
    globals: int
    types: int
    imports: int
    exports: int
    segments: int
    has_start: bool

    @property
    def compile_cost(self) -> int:
        return (
            W_FUNCTION * self.functions
            + W_LOOP * self.loops
            + W_BLOCK * self.blocks
            + W_BRANCH * self.branches
            + W_BRANCH_TARGET * self.branch_targets
            + W_CALL * self.calls
            + W_CALL_INDIRECT * self.indirect_calls
            + W_CHECKED * self.checked
            + W_MEMORY * self.memory
            + W_LIBCALL * self.libcalls
            + W_KIB * self.code_bytes // 1024
        )


def check_structure(code: bytes) -> Structure:
    """The module's structure, or ContractError naming the first limit it is past."""
    s = read_structure(code)
    _limit("functions", s.functions, MAX_FUNCTIONS)
    _limit("bytes in one function", s.max_function_bytes, MAX_FUNCTION_BYTES)
    _limit("locals in one function", s.max_locals, MAX_LOCALS)
    _limit("nested blocks", s.max_nesting, MAX_NESTING)
    _limit("blocks and branches in one function", s.max_function_control, MAX_FUNCTION_CONTROL)
    _limit("br_table targets", s.max_br_table, MAX_BR_TABLE)
    _limit("globals", s.globals, MAX_GLOBALS)
    _limit("types", s.types, MAX_TYPES)
    _limit("imports", s.imports, MAX_IMPORTS)
    _limit("exports", s.exports, MAX_EXPORTS)
    _limit("data or element segments", s.segments, MAX_SEGMENTS)
    if s.compile_cost > MAX_COMPILE_COST:
        raise ContractError(
            f"module too costly to compile: cost {s.compile_cost} past {MAX_COMPILE_COST} "
            f"({s.functions} functions, {s.code_bytes} code bytes, {s.loops} loops, "
            f"{s.blocks} blocks, {s.branches} branches, {s.calls + s.indirect_calls} calls)"
        )
    return s


def _limit(what: str, count: int, limit: int) -> None:
    if count > limit:
        raise ContractError(f"module has {count} {what}, past the limit of {limit}")


class _Malformed(Exception):
    pass


# Immediates of each one-byte opcode, for the reader (absent: an opcode we do not accept).
_NONE, _U32, _U32X2, _MEMARG, _BYTE, _LEB, _F32, _F64, _BLOCK, _BR_TABLE, _SELECT_T = range(11)
_IMMEDIATES: dict[int, int] = {0x00: _NONE, 0x01: _NONE, 0x05: _NONE, 0x0B: _NONE, 0x0F: _NONE}
_IMMEDIATES.update({op: _BLOCK for op in (0x02, 0x03, 0x04)})
_IMMEDIATES.update({0x0C: _U32, 0x0D: _U32, 0x0E: _BR_TABLE, 0x10: _U32, 0x11: _U32X2})
_IMMEDIATES.update({0x1A: _NONE, 0x1B: _NONE, 0x1C: _SELECT_T})
_IMMEDIATES.update({op: _U32 for op in range(0x20, 0x27)})  # locals, globals, table.get/set
_IMMEDIATES.update({op: _MEMARG for op in range(0x28, 0x3F)})
_IMMEDIATES.update({0x3F: _BYTE, 0x40: _BYTE, 0x41: _LEB, 0x42: _LEB, 0x43: _F32, 0x44: _F64})
_IMMEDIATES.update({op: _NONE for op in range(0x45, 0xC5)})  # numeric, sign extension
_IMMEDIATES.update({0xD0: _BYTE, 0xD1: _NONE, 0xD2: _U32})
# 0xFC prefix: saturating truncation (0-7), bulk memory and table operations (8-17).
_PREFIXED: dict[int, tuple[int, ...]] = {op: () for op in range(8)}
_PREFIXED.update({8: (_U32, _BYTE), 9: (_U32,), 10: (_BYTE, _BYTE), 11: (_BYTE,)})
_PREFIXED.update({12: (_U32, _U32), 13: (_U32,), 14: (_U32, _U32)})
_PREFIXED.update({15: (_U32,), 16: (_U32,), 17: (_U32,)})

# What each opcode counts as (``_Counts.of``); absent: only its bytes count.
_LOOP, _BLOCKS, _BRANCH, _CALL, _CALL_INDIRECT, _CHECKED, _MEMORY, _LIBCALL = range(8)
_CATEGORY: dict[int, int] = {0x03: _LOOP, 0x02: _BLOCKS, 0x04: _BLOCKS, 0x05: _BLOCKS}
_CATEGORY.update({0x0C: _BRANCH, 0x0D: _BRANCH, 0x0E: _BRANCH, 0x10: _CALL, 0x11: _CALL_INDIRECT})
_CATEGORY.update({op: _CHECKED for op in (0x6D, 0x6E, 0x6F, 0x70, 0x7F, 0x80, 0x81, 0x82)})
_CATEGORY.update({op: _CHECKED for op in (*range(0xA8, 0xAC), *range(0xAE, 0xB2))})
_CATEGORY.update({op: _MEMORY for op in (*range(0x28, 0x3F), 0x25, 0x26)})
_CATEGORY[0x40] = _LIBCALL  # memory.grow; every 0xFC bulk-memory or table operation too


class _Reader:
    __slots__ = ("code", "pos")

    def __init__(self, code: bytes, pos: int = 0) -> None:
        self.code = code
        self.pos = pos

    def byte(self) -> int:
        try:
            b = self.code[self.pos]
        except IndexError:
            raise _Malformed("unexpected end") from None
        self.pos += 1
        return b

    def uleb(self) -> int:
        code, pos = self.code, self.pos
        result = shift = 0
        while True:
            try:
                b = code[pos]
            except IndexError:
                raise _Malformed("unexpected end") from None
            pos += 1
            result |= (b & 0x7F) << shift
            if b < 0x80:
                self.pos = pos
                return result
            shift += 7
            if shift > 63:
                raise _Malformed("LEB128 too long")

    def skip_leb(self) -> None:
        code, pos = self.code, self.pos
        for _ in range(10):
            try:
                b = code[pos]
            except IndexError:
                raise _Malformed("unexpected end") from None
            pos += 1
            if b < 0x80:
                self.pos = pos
                return
        raise _Malformed("LEB128 too long")

    def skip(self, n: int) -> None:
        if self.pos + n > len(self.code):
            raise _Malformed("unexpected end")
        self.pos += n


@dataclass(slots=True)
class _Counts:
    of: list[int]  # by category
    branch_targets: int = 0
    max_nesting: int = 0
    max_br_table: int = 0


def read_structure(code: bytes) -> Structure:
    """Read ``code``'s sections; ContractError if a part of it is not what we accept."""
    try:
        return _read(code)
    except _Malformed as err:
        raise ContractError(f"module structure cannot be read: {err}") from None


def _read(code: bytes) -> Structure:
    if code[:8] != b"\x00asm\x01\x00\x00\x00":
        raise _Malformed("not a WebAssembly 1.0 module")
    r = _Reader(code, 8)
    counts = _Counts([0] * 8)
    functions = code_bytes = max_locals = max_function_bytes = max_control = 0
    globals_ = types = imports = exports = segments = 0
    has_start = False
    while r.pos < len(code):
        section = r.byte()
        size = r.uleb()
        end = r.pos + size
        if end > len(code):
            raise _Malformed("section past the end of the module")
        if section == 1:
            types = _Reader(code, r.pos).uleb()
        elif section == 2:
            imports = _Reader(code, r.pos).uleb()
        elif section == 6:
            globals_ = _Reader(code, r.pos).uleb()
        elif section == 7:
            exports = _Reader(code, r.pos).uleb()
        elif section == 8:
            has_start = True
        elif section in (9, 11):
            segments = max(segments, _Reader(code, r.pos).uleb())
        elif section == 10:
            body = _Reader(code, r.pos)
            functions = body.uleb()
            code_bytes = size
            if functions > MAX_FUNCTIONS:
                break  # refused anyway; do not walk what will not be compiled
            for _ in range(functions):
                length = body.uleb()
                start = body.pos
                if start + length > end:
                    raise _Malformed("function body past its section")
                max_function_bytes = max(max_function_bytes, length)
                before = counts.of[_LOOP] + counts.of[_BLOCKS] + counts.of[_BRANCH]
                max_locals = max(max_locals, _function(code, start, start + length, counts))
                control = counts.of[_LOOP] + counts.of[_BLOCKS] + counts.of[_BRANCH] - before
                max_control = max(max_control, control)
                body.pos = start + length
        r.pos = end
    of = counts.of
    return Structure(
        functions=functions,
        code_bytes=code_bytes,
        loops=of[_LOOP],
        blocks=of[_BLOCKS],
        branches=of[_BRANCH],
        branch_targets=counts.branch_targets,
        calls=of[_CALL],
        indirect_calls=of[_CALL_INDIRECT],
        checked=of[_CHECKED],
        memory=of[_MEMORY],
        libcalls=of[_LIBCALL],
        max_nesting=counts.max_nesting,
        max_locals=max_locals,
        max_function_control=max_control,
        max_function_bytes=max_function_bytes,
        max_br_table=counts.max_br_table,
        globals=globals_,
        types=types,
        imports=imports,
        exports=exports,
        segments=segments,
        has_start=has_start,
    )


def _function(code: bytes, start: int, end: int, counts: _Counts) -> int:
    """Walk one function body, counting into ``counts``; returns its number of locals."""
    r = _Reader(code, start)
    local_count = 0
    for _ in range(r.uleb()):
        local_count += r.uleb()
        r.skip(1)
        if local_count > MAX_LOCALS:
            return local_count  # refused anyway; do not walk a body we will not compile
    depth = 1  # the function's own block, closed by its last ``end``
    immediates, category, of = _IMMEDIATES, _CATEGORY, counts.of
    while r.pos < end:
        op = code[r.pos]
        r.pos += 1
        kind = immediates.get(op)
        if kind is None:
            if op != 0xFC:
                raise _Malformed(f"opcode 0x{op:02x} is not accepted")
            sub = r.uleb()
            prefixed = _PREFIXED.get(sub)
            if prefixed is None:
                raise _Malformed(f"opcode 0xfc {sub} is not accepted")
            of[_CHECKED if sub < 8 else _LIBCALL] += 1
            for each in prefixed:
                if each == _BYTE:
                    r.skip(1)
                else:
                    r.skip_leb()
            continue
        counted = category.get(op)
        if counted is not None:
            of[counted] += 1
        if kind == _NONE:
            if op == 0x0B:
                depth -= 1
        elif kind == _BLOCK:
            if r.pos < end and code[r.pos] in (0x40, 0x7F, 0x7E, 0x7D, 0x7C, 0x70, 0x6F):
                r.pos += 1
            else:
                r.skip_leb()  # a type index (multi-value), signed 33 bits
            depth += 1
            if depth - 1 > counts.max_nesting:
                counts.max_nesting = depth - 1
                if depth - 1 > MAX_NESTING:
                    return local_count  # refused anyway
        elif kind in (_U32, _LEB):
            r.skip_leb()
        elif kind in (_MEMARG, _U32X2):
            r.skip_leb()
            r.skip_leb()
        elif kind == _BYTE:
            r.skip(1)
        elif kind == _F32:
            r.skip(4)
        elif kind == _F64:
            r.skip(8)
        elif kind == _BR_TABLE:
            targets = r.uleb() + 1
            counts.branch_targets += targets
            if targets > counts.max_br_table:
                counts.max_br_table = targets
                if targets > MAX_BR_TABLE:
                    return local_count  # refused anyway
            for _ in range(targets):
                r.skip_leb()
        elif kind == _SELECT_T:
            r.skip(r.uleb())
    if depth != 0 or r.pos != end:
        raise _Malformed("function body does not end where its size says")
    return local_count
