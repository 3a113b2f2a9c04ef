"""A small contract for tests of the RPC, the wallet and the stream, written in WAT so that it
needs no toolchain: ``put`` stores its data as a row (primary key ``id``, indexed by
``owner`` in ``kv.o``), emits it as the event ``stored`` and prints ``stored``; ``get``
returns the row of ``id`` (and aborts with "no such row")."""

from __future__ import annotations

import json

import wasmtime

from chain.core.execution.contracts import name_to_u64


def _i64(name: str) -> int:
    """A name as the signed i64 constant WAT wants."""
    value = name_to_u64(name)
    return value - (1 << 64) if value >= 1 << 63 else value


WAT = f"""
(module
  (import "env" "read_action_data" (func $read (param i32 i32) (result i32)))
  (import "env" "db_store_i64"
    (func $store (param i64 i64 i64 i64 i32 i32) (result i32)))
  (import "env" "db_find_i64" (func $find (param i64 i64 i64 i64) (result i32)))
  (import "env" "db_get_i64" (func $get (param i32 i32 i32) (result i32)))
  (import "env" "db_idx64_store" (func $idx (param i64 i64 i64 i64 i32) (result i32)))
  (import "env" "emit_event" (func $emit (param i64 i32 i32)))
  (import "env" "prints_l" (func $print (param i32 i32)))
  (import "env" "set_action_return_value" (func $ret (param i32 i32)))
  (import "env" "eosio_assert" (func $assert (param i32 i32 i32)))
  (memory (export "memory") 1)
  (data (i32.const 16) "stored")
  (data (i32.const 32) "no such row")
  (data (i32.const 48) "unknown action")
  (func (export "apply") (param $recv i64) (param $code i64) (param $action i64)
    (local $n i32) (local $itr i32)
    (local.set $n (call $read (i32.const 1024) (i32.const 1024)))
    (if (i64.eq (local.get $action) (i64.const {_i64("put")}))
      (then
        (drop (call $store (local.get $recv) (i64.const {_i64("kv")}) (local.get $recv)
          (i64.load (i32.const 1024)) (i32.const 1024) (local.get $n)))
        (drop (call $idx (local.get $recv) (i64.const {_i64("kv.o")}) (local.get $recv)
          (i64.load (i32.const 1024)) (i32.const 1032)))
        (call $emit (i64.const {_i64("stored")}) (i32.const 1024) (local.get $n))
        (call $print (i32.const 16) (i32.const 6))
        (return)))
    (if (i64.eq (local.get $action) (i64.const {_i64("get")}))
      (then
        (local.set $itr (call $find (local.get $recv) (local.get $recv)
          (i64.const {_i64("kv")}) (i64.load (i32.const 1024))))
        (call $assert (i32.ge_s (local.get $itr) (i32.const 0)) (i32.const 32) (i32.const 11))
        (local.set $n (call $get (local.get $itr) (i32.const 2048) (i32.const 1024)))
        (call $ret (i32.const 2048) (local.get $n))
        (return)))
    (call $assert (i32.const 0) (i32.const 48) (i32.const 14))))
"""

ABI = json.dumps(
    {
        "version": "bor::abi/1",
        "structs": [
            {
                "name": "entry",
                "fields": [
                    {"name": "id", "type": "u64"},
                    {"name": "owner", "type": "name"},
                    {"name": "amount", "type": "u64"},
                ],
            },
            {"name": "get", "fields": [{"name": "id", "type": "u64"}]},
        ],
        "actions": [{"name": "put", "type": "entry"}, {"name": "get", "type": "get"}],
        "tables": [
            {
                "name": "kv",
                "type": "entry",
                "index_type": "i64",
                "secondary": [{"name": "byowner", "table": "kv.o", "type": "u64"}],
            }
        ],
        "events": [{"name": "stored", "type": "entry"}],
        "action_results": [{"name": "get", "result_type": "entry"}],
    }
)


def wasm() -> bytes:
    return bytes(wasmtime.wat2wasm(WAT))
