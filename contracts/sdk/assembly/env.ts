// The host API (module "env"), exactly as the node's runtime links it. GENERATED from the
// node's one declaration of it (chain/vm: each body's @API.function) by
//     python scripts/host_api.py
// Do not edit: a test fails when this file and the node's table differ. Contract code calls
// the wrappers in the other modules.

// --- action ---
// @ts-ignore: decorator
@external("env", "action_data_size") export declare function action_data_size(): i32;
// @ts-ignore: decorator
@external("env", "read_action_data") export declare function read_action_data(ptr: usize, len: i32): i32;
// @ts-ignore: decorator
@external("env", "set_action_return_value") export declare function set_action_return_value(ptr: usize, len: i32): void;
// @ts-ignore: decorator
@external("env", "emit_event") export declare function emit_event(name: u64, ptr: usize, len: i32): void;
// @ts-ignore: decorator
@external("env", "require_recipient") export declare function require_recipient(name: u64): void;

// --- authorization ---
// @ts-ignore: decorator
@external("env", "require_auth") export declare function require_auth(name: u64): void;
// @ts-ignore: decorator
@external("env", "has_auth") export declare function has_auth(name: u64): i32;
// @ts-ignore: decorator
@external("env", "is_account") export declare function is_account(name: u64): i32;

// --- console ---
// @ts-ignore: decorator
@external("env", "prints_l") export declare function prints_l(ptr: usize, len: i32): void;

// --- context ---
// @ts-ignore: decorator
@external("env", "current_receiver") export declare function current_receiver(): u64;
// @ts-ignore: decorator
@external("env", "current_time") export declare function current_time(): i64;
// @ts-ignore: decorator
@external("env", "get_block_num") export declare function get_block_num(): i32;

// --- system ---
// @ts-ignore: decorator
@external("env", "eosio_assert") export declare function eosio_assert(test: i32, msg: usize, len: i32): void;
// @ts-ignore: decorator
@external("env", "eosio_assert_code") export declare function eosio_assert_code(test: i32, code: u64): void;

// --- crypto ---
// @ts-ignore: decorator
@external("env", "sha1") export declare function sha1(data: usize, len: u32, hash: usize): void;
// @ts-ignore: decorator
@external("env", "sha256") export declare function sha256(data: usize, len: u32, hash: usize): void;
// @ts-ignore: decorator
@external("env", "sha512") export declare function sha512(data: usize, len: u32, hash: usize): void;
// @ts-ignore: decorator
@external("env", "ripemd160") export declare function ripemd160(data: usize, len: u32, hash: usize): void;
// @ts-ignore: decorator
@external("env", "assert_sha1") export declare function assert_sha1(data: usize, len: u32, hash: usize): void;
// @ts-ignore: decorator
@external("env", "assert_sha256") export declare function assert_sha256(data: usize, len: u32, hash: usize): void;
// @ts-ignore: decorator
@external("env", "assert_sha512") export declare function assert_sha512(data: usize, len: u32, hash: usize): void;
// @ts-ignore: decorator
@external("env", "assert_ripemd160") export declare function assert_ripemd160(data: usize, len: u32, hash: usize): void;
// @ts-ignore: decorator
@external("env", "recover_key") export declare function recover_key(digest: usize, sig: usize, siglen: u32, pub: usize, publen: u32): i32;
// @ts-ignore: decorator
@external("env", "assert_recover_key") export declare function assert_recover_key(digest: usize, sig: usize, siglen: u32, pub: usize, publen: u32): void;

// --- transaction ---
// @ts-ignore: decorator
@external("env", "send_inline") export declare function send_inline(ptr: usize, len: i32): void;

// --- database: primary ---
// @ts-ignore: decorator
@external("env", "db_store_i64") export declare function db_store_i64(scope: u64, table: u64, payer: u64, id: u64, ptr: usize, len: i32): i32;
// @ts-ignore: decorator
@external("env", "db_find_i64") export declare function db_find_i64(code: u64, scope: u64, table: u64, id: u64): i32;
// @ts-ignore: decorator
@external("env", "db_get_i64") export declare function db_get_i64(itr: i32, ptr: usize, len: i32): i32;
// @ts-ignore: decorator
@external("env", "db_update_i64") export declare function db_update_i64(itr: i32, payer: u64, ptr: usize, len: i32): void;
// @ts-ignore: decorator
@external("env", "db_remove_i64") export declare function db_remove_i64(itr: i32): void;
// @ts-ignore: decorator
@external("env", "db_next_i64") export declare function db_next_i64(itr: i32, primary: usize): i32;
// @ts-ignore: decorator
@external("env", "db_previous_i64") export declare function db_previous_i64(itr: i32, primary: usize): i32;
// @ts-ignore: decorator
@external("env", "db_lowerbound_i64") export declare function db_lowerbound_i64(code: u64, scope: u64, table: u64, id: u64): i32;
// @ts-ignore: decorator
@external("env", "db_upperbound_i64") export declare function db_upperbound_i64(code: u64, scope: u64, table: u64, id: u64): i32;
// @ts-ignore: decorator
@external("env", "db_end_i64") export declare function db_end_i64(code: u64, scope: u64, table: u64): i32;

// --- database: idx64 ---
// @ts-ignore: decorator
@external("env", "db_idx64_store") export declare function db_idx64_store(scope: u64, table: u64, payer: u64, id: u64, secondary: usize): i32;
// @ts-ignore: decorator
@external("env", "db_idx64_update") export declare function db_idx64_update(itr: i32, payer: u64, secondary: usize): void;
// @ts-ignore: decorator
@external("env", "db_idx64_remove") export declare function db_idx64_remove(itr: i32): void;
// @ts-ignore: decorator
@external("env", "db_idx64_find_secondary") export declare function db_idx64_find_secondary(code: u64, scope: u64, table: u64, secondary: usize, primary: usize): i32;
// @ts-ignore: decorator
@external("env", "db_idx64_find_primary") export declare function db_idx64_find_primary(code: u64, scope: u64, table: u64, secondary: usize, primary: u64): i32;
// @ts-ignore: decorator
@external("env", "db_idx64_lowerbound") export declare function db_idx64_lowerbound(code: u64, scope: u64, table: u64, secondary: usize, primary: usize): i32;
// @ts-ignore: decorator
@external("env", "db_idx64_upperbound") export declare function db_idx64_upperbound(code: u64, scope: u64, table: u64, secondary: usize, primary: usize): i32;
// @ts-ignore: decorator
@external("env", "db_idx64_next") export declare function db_idx64_next(itr: i32, primary: usize): i32;
// @ts-ignore: decorator
@external("env", "db_idx64_previous") export declare function db_idx64_previous(itr: i32, primary: usize): i32;
// @ts-ignore: decorator
@external("env", "db_idx64_end") export declare function db_idx64_end(code: u64, scope: u64, table: u64): i32;

// --- database: idx128 ---
// @ts-ignore: decorator
@external("env", "db_idx128_store") export declare function db_idx128_store(scope: u64, table: u64, payer: u64, id: u64, secondary: usize): i32;
// @ts-ignore: decorator
@external("env", "db_idx128_update") export declare function db_idx128_update(itr: i32, payer: u64, secondary: usize): void;
// @ts-ignore: decorator
@external("env", "db_idx128_remove") export declare function db_idx128_remove(itr: i32): void;
// @ts-ignore: decorator
@external("env", "db_idx128_find_secondary") export declare function db_idx128_find_secondary(code: u64, scope: u64, table: u64, secondary: usize, primary: usize): i32;
// @ts-ignore: decorator
@external("env", "db_idx128_find_primary") export declare function db_idx128_find_primary(code: u64, scope: u64, table: u64, secondary: usize, primary: u64): i32;
// @ts-ignore: decorator
@external("env", "db_idx128_lowerbound") export declare function db_idx128_lowerbound(code: u64, scope: u64, table: u64, secondary: usize, primary: usize): i32;
// @ts-ignore: decorator
@external("env", "db_idx128_upperbound") export declare function db_idx128_upperbound(code: u64, scope: u64, table: u64, secondary: usize, primary: usize): i32;
// @ts-ignore: decorator
@external("env", "db_idx128_next") export declare function db_idx128_next(itr: i32, primary: usize): i32;
// @ts-ignore: decorator
@external("env", "db_idx128_previous") export declare function db_idx128_previous(itr: i32, primary: usize): i32;
// @ts-ignore: decorator
@external("env", "db_idx128_end") export declare function db_idx128_end(code: u64, scope: u64, table: u64): i32;

// --- database: idx256 ---
// @ts-ignore: decorator
@external("env", "db_idx256_store") export declare function db_idx256_store(scope: u64, table: u64, payer: u64, id: u64, secondary: usize, len: u32): i32;
// @ts-ignore: decorator
@external("env", "db_idx256_update") export declare function db_idx256_update(itr: i32, payer: u64, secondary: usize, len: u32): void;
// @ts-ignore: decorator
@external("env", "db_idx256_remove") export declare function db_idx256_remove(itr: i32): void;
// @ts-ignore: decorator
@external("env", "db_idx256_find_secondary") export declare function db_idx256_find_secondary(code: u64, scope: u64, table: u64, secondary: usize, len: u32, primary: usize): i32;
// @ts-ignore: decorator
@external("env", "db_idx256_find_primary") export declare function db_idx256_find_primary(code: u64, scope: u64, table: u64, secondary: usize, len: u32, primary: u64): i32;
// @ts-ignore: decorator
@external("env", "db_idx256_lowerbound") export declare function db_idx256_lowerbound(code: u64, scope: u64, table: u64, secondary: usize, len: u32, primary: usize): i32;
// @ts-ignore: decorator
@external("env", "db_idx256_upperbound") export declare function db_idx256_upperbound(code: u64, scope: u64, table: u64, secondary: usize, len: u32, primary: usize): i32;
// @ts-ignore: decorator
@external("env", "db_idx256_next") export declare function db_idx256_next(itr: i32, primary: usize): i32;
// @ts-ignore: decorator
@external("env", "db_idx256_previous") export declare function db_idx256_previous(itr: i32, primary: usize): i32;
// @ts-ignore: decorator
@external("env", "db_idx256_end") export declare function db_idx256_end(code: u64, scope: u64, table: u64): i32;

// --- database: idx_double ---
// @ts-ignore: decorator
@external("env", "db_idx_double_store") export declare function db_idx_double_store(scope: u64, table: u64, payer: u64, id: u64, secondary: usize): i32;
// @ts-ignore: decorator
@external("env", "db_idx_double_update") export declare function db_idx_double_update(itr: i32, payer: u64, secondary: usize): void;
// @ts-ignore: decorator
@external("env", "db_idx_double_remove") export declare function db_idx_double_remove(itr: i32): void;
// @ts-ignore: decorator
@external("env", "db_idx_double_find_secondary") export declare function db_idx_double_find_secondary(code: u64, scope: u64, table: u64, secondary: usize, primary: usize): i32;
// @ts-ignore: decorator
@external("env", "db_idx_double_find_primary") export declare function db_idx_double_find_primary(code: u64, scope: u64, table: u64, secondary: usize, primary: u64): i32;
// @ts-ignore: decorator
@external("env", "db_idx_double_lowerbound") export declare function db_idx_double_lowerbound(code: u64, scope: u64, table: u64, secondary: usize, primary: usize): i32;
// @ts-ignore: decorator
@external("env", "db_idx_double_upperbound") export declare function db_idx_double_upperbound(code: u64, scope: u64, table: u64, secondary: usize, primary: usize): i32;
// @ts-ignore: decorator
@external("env", "db_idx_double_next") export declare function db_idx_double_next(itr: i32, primary: usize): i32;
// @ts-ignore: decorator
@external("env", "db_idx_double_previous") export declare function db_idx_double_previous(itr: i32, primary: usize): i32;
// @ts-ignore: decorator
@external("env", "db_idx_double_end") export declare function db_idx_double_end(code: u64, scope: u64, table: u64): i32;
