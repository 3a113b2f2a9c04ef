"""What one contract action costs: a token transfer run by ``ContractRuntime``, timed whole
and split into its parts, against a native transfer's cost from ``bench_apply.py``.

The contract is a WAT module doing what eosio.token's ``transfer`` does, host call for host
call: read the action data, ``require_auth`` the sender, ``is_account`` the recipient, find,
read and update the sender's balance row, find and read/update (or store) the recipient's,
and emit a ``transfer`` event. When the SDK's token has been built
(``bor-contract build contracts/examples/token``), its transfer is timed too.

Each action runs in a child view of one block view over ``chain.testing.MemoryKV``, as the
transition runs a transaction, between many accounts, so reads hit the block's cache the way
a block's first and later transactions do.

    python scripts/profile_vm.py [--actions 3000] [--profile]

The last line of output is a JSON object of the figures (microseconds per action).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import wasmtime

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from chain.core.execution import ram
from chain.core.execution.contracts import ActionTrace, ContractCall, TxTrace, name_to_u64
from chain.core.execution.state import Account, StateView
from chain.core.primitives import schema
from chain.core.primitives.encoding import pack
from chain.core.primitives.params import ChainParams
from chain.core.primitives.types import AccountName, PublicKey
from chain.testing import MemoryKV
from chain.vm import ContractRuntime, host, raw
from chain.vm.validate import HOST_SIGNATURES

TOKEN_DIR = Path(__file__).resolve().parent.parent / "contracts" / "examples" / "token"
SYMBOL = (ord("T") | ord("O") << 8 | ord("K") << 16) << 8 | 4  # "4,TOK"
PARAMS = ChainParams()


def _imports() -> str:
    out = []
    for name, (params, results) in HOST_SIGNATURES.items():
        p = f" (param {' '.join(map(str, params))})" if params else ""
        r = f" (result {' '.join(map(str, results))})" if results else ""
        out.append(f'(import "env" "{name}" (func ${name}{p}{r}))')
    return "\n".join(out)


def wat_token() -> bytes:
    """eosio.token's transfer in WAT: nine host calls on the path where both rows exist."""
    accounts, transfer = name_to_u64("accounts"), name_to_u64("transfer")
    return bytes(
        wasmtime.wat2wasm(
            f"""(module {_imports()}
  (memory (export "memory") 1)
  (data (i32.const 128) "recipient does not existno balance rowoverdrawn balance")
  (func $fail (param $ptr i32) (param $len i32)
    (call $eosio_assert (i32.const 0) (local.get $ptr) (local.get $len)))
  (func (export "apply") (param $receiver i64) (param $code i64) (param $action i64)
    (local $size i32) (local $itr i32) (local $from i64) (local $to i64) (local $amount i64)
    (local $sym i64)
    (local.set $size (call $read_action_data (i32.const 0) (i32.const 64)))
    (local.set $from (i64.load (i32.const 0)))
    (local.set $to (i64.load (i32.const 8)))
    (local.set $amount (i64.load (i32.const 16)))
    (local.set $sym (i64.shr_u (i64.load (i32.const 24)) (i64.const 8)))
    (call $require_auth (local.get $from))
    (if (i32.eqz (call $is_account (local.get $to)))
      (then (call $fail (i32.const 128) (i32.const 24))))
    (local.set $itr (call $db_find_i64 (local.get $receiver) (local.get $from)
      (i64.const {accounts}) (local.get $sym)))
    (if (i32.lt_s (local.get $itr) (i32.const 0))
      (then (call $fail (i32.const 152) (i32.const 14))))
    (drop (call $db_get_i64 (local.get $itr) (i32.const 64) (i32.const 16)))
    (if (i64.lt_s (i64.load (i32.const 64)) (local.get $amount))
      (then (call $fail (i32.const 166) (i32.const 17))))
    (i64.store (i32.const 64) (i64.sub (i64.load (i32.const 64)) (local.get $amount)))
    (call $db_update_i64 (local.get $itr) (i64.const 0) (i32.const 64) (i32.const 16))
    (local.set $itr (call $db_find_i64 (local.get $receiver) (local.get $to)
      (i64.const {accounts}) (local.get $sym)))
    (if (i32.lt_s (local.get $itr) (i32.const 0))
      (then
        (i64.store (i32.const 80) (local.get $amount))
        (i64.store (i32.const 88) (i64.load (i32.const 24)))
        (drop (call $db_store_i64 (local.get $to) (i64.const {accounts}) (local.get $from)
          (local.get $sym) (i32.const 80) (i32.const 16))))
      (else
        (drop (call $db_get_i64 (local.get $itr) (i32.const 80) (i32.const 16)))
        (i64.store (i32.const 80) (i64.add (i64.load (i32.const 80)) (local.get $amount)))
        (call $db_update_i64 (local.get $itr) (i64.const 0) (i32.const 80) (i32.const 16))))
    (call $emit_event (i64.const {transfer}) (i32.const 0) (local.get $size))))"""
        )
    )


def transfer_data(sender: str, recipient: str, amount: int, memo: bytes) -> bytes:
    """The ABI's ``transfer``: name, name, asset (i64 amount, symbol), string."""
    return (
        name_to_u64(sender).to_bytes(8, "little")
        + name_to_u64(recipient).to_bytes(8, "little")
        + amount.to_bytes(8, "little", signed=True)
        + SYMBOL.to_bytes(8, "little")
        + bytes([len(memo)])
        + memo
    )


def users(count: int) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    return ["user" + "".join(letters[(i // 26**k) % 26] for k in range(3)) for i in range(count)]


def token_state(runtime: ContractRuntime, code: bytes, names: list[str]) -> MemoryKV:
    """Committed state: the token deployed and created, every user an account with a
    balance row."""
    view = StateView(MemoryKV())
    digest = runtime.validate(code, PARAMS)
    view.put_raw(schema.code_key("token"), pack([digest, ""]))
    view.put_raw(schema.wasm_key("token"), code)
    token, accounts = name_to_u64("token"), name_to_u64("accounts")
    for name in ["token", *names]:
        view.put_account(Account(AccountName(name), PublicKey(bytes(32)), 10**9))
        row = schema.row_key(token, name_to_u64(name), accounts, SYMBOL >> 8)
        balance = (10**12).to_bytes(8, "little") + SYMBOL.to_bytes(8, "little")
        value = name_to_u64(name).to_bytes(8, "big") + balance
        view.put_raw(row, value)
        ram.charge(view, name, ram.row_bytes(row, value), PARAMS)
    # The token's ``stat`` row (supply, max supply, issuer), which the SDK token reads.
    sym_code = SYMBOL >> 8
    stat = schema.row_key(token, sym_code, name_to_u64("stat"), sym_code)
    supply = (10**15).to_bytes(8, "little") + SYMBOL.to_bytes(8, "little")
    value = token.to_bytes(8, "big") + supply + supply + token.to_bytes(8, "little")
    view.put_raw(stat, value)
    ram.charge(view, "token", ram.row_bytes(stat, value), PARAMS)
    return MemoryKV({k: v for k, v in view.changes() if v is not None})


def calls(names: list[str], count: int) -> list[ContractCall]:
    out = []
    for i in range(count):
        sender, recipient = names[i % len(names)], names[(i * 7 + 1) % len(names)]
        data = transfer_data(sender, recipient, 1 + i % 1000, str(i).encode())
        out.append(ContractCall(AccountName("token"), "transfer", (AccountName(sender),), data))
    return out


def time_actions(runtime: ContractRuntime, kv: MemoryKV, todo: list[ContractCall]) -> list[float]:
    """Seconds per action, each run in a child view of one block view and merged."""
    block = StateView(kv)
    out = []
    for call in todo:
        t0 = time.thread_time()
        tx = block.child()
        runtime.run(
            tx,
            call,
            TxTrace(),
            params=PARAMS,
            block_time_s=1_700_000_000,
            block_num=2,
            fuel_left=PARAMS.max_tx_fuel,
        )
        tx.merge_into_parent()
        out.append(time.thread_time() - t0)
    return out


def median_us(fn: Callable[[], Any], repeat: int = 2000) -> float:
    samples = []
    for _ in range(repeat):
        t0 = time.thread_time()
        fn()
        samples.append(time.thread_time() - t0)
    return 1e6 * statistics.median(samples)


def parts(runtime: ContractRuntime) -> dict[str, float]:
    """Median microseconds of the pieces of an action: an empty store, instantiating the
    module into it, and one host call (from a loop of them in an otherwise empty contract)."""
    rt: Any = runtime  # the parts are private: this script measures them on purpose
    empty = bytes(
        wasmtime.wat2wasm(
            '(module (import "env" "current_receiver" (func $r (result i64)))'
            ' (memory (export "memory") 1)'
            ' (func (export "apply") (param i64 i64 i64) (local $i i32)'
            "  (loop $l (drop (call $r)) (local.set $i (i32.add (local.get $i) (i32.const 1)))"
            "   (br_if $l (i32.lt_u (local.get $i) (i32.wrap_i64 (local.get 2)))))))"
        )
    )
    digest = runtime.validate(empty, PARAMS)
    pre = rt._cache.get(digest)

    def store() -> raw.Store:
        s = raw.Store(
            rt._ready().engine_ptr,
            memory_bytes=PARAMS.max_memory_pages * 65536,
            table_elements=10_000,
            fuel=10**9,
        )
        s.close()
        return s

    def instantiate() -> tuple[raw.Store, raw.Instance]:
        s = raw.Store(
            rt._ready().engine_ptr,
            memory_bytes=PARAMS.max_memory_pages * 65536,
            table_elements=10_000,
            fuel=10**9,
        )
        instance = raw.instantiate(pre, s.ctx)
        s.close()
        return s, instance

    def calls_of(n: int) -> Callable[[], None]:
        def go() -> None:
            s = raw.Store(
                rt._ready().engine_ptr,
                memory_bytes=PARAMS.max_memory_pages * 65536,
                table_elements=10_000,
                fuel=10**9,
            )
            instance = raw.instantiate(pre, s.ctx)
            view = StateView(MemoryKV())
            call = ContractCall(AccountName("token"), "go", (AccountName("token"),), b"")
            act = host.Action(
                view,
                call,
                ActionTrace(call, 0),
                PARAMS,
                block_time_s=0,
                block_num=0,
                readonly=False,
            )
            act.fuel = raw.Fuel(s.ctx)
            act.memory = instance.memory
            previous = host.set_current(act)
            try:
                raw.call_apply(s.ctx, instance.apply, 0, 0, n)
            finally:
                host.set_current(previous)
                s.close()

        return go

    t_store = median_us(store)
    t_inst = median_us(instantiate)
    t_0 = median_us(calls_of(0), 1000)
    t_100 = median_us(calls_of(100), 300)
    return {
        "store_us": t_store,
        "instantiate_us": t_inst - t_store,
        "apply_no_host_calls_us": t_0 - t_inst,
        "host_call_us": (t_100 - t_0) / 100,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--actions", type=int, default=3000)
    parser.add_argument("--accounts", type=int, default=2000)
    parser.add_argument("--profile", action="store_true", help="print a cProfile of the WAT run")
    args = parser.parse_args()

    runtime = ContractRuntime()
    names = users(args.accounts)
    todo = calls(names, args.actions)
    figures: dict[str, Any] = {}
    contracts = {"wat": wat_token()}
    built = TOKEN_DIR / "build" / "token.wasm"
    if built.exists():
        contracts["sdk"] = built.read_bytes()
    for label, code in contracts.items():
        kv = token_state(runtime, code, names)
        time_actions(runtime, kv, todo[:200])  # compile, warm caches
        samples = time_actions(runtime, kv, todo)
        median = 1e6 * statistics.median(samples)
        mean = 1e6 * statistics.fmean(samples)
        print(f"{label} token transfer: median {median:.1f} us, mean {mean:.1f} us per action")
        figures[f"{label}_transfer_median_us"] = round(median, 1)
        figures[f"{label}_transfer_mean_us"] = round(mean, 1)
    for part, value in parts(runtime).items():
        print(f"  {part}: {value:.1f}")
        figures[part] = round(value, 2)
    if args.profile:
        kv = token_state(runtime, contracts["wat"], names)
        profiler = cProfile.Profile()
        profiler.runcall(time_actions, runtime, kv, todo)
        pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
