// The action's context: who authorized it, checks that abort it, what it reports back.
import * as env from "./env";

/** Abort the action (and its transaction) with `message` unless `condition` holds. */
export function check(condition: bool, message: string): void {
  if (!condition) {
    const utf8 = String.UTF8.encode(message);
    env.eosio_assert(0, changetype<usize>(utf8), utf8.byteLength);
  }
}

/** Abort with a numeric error code (cheaper than a message; the node reports the code). */
export function checkCode(condition: bool, code: u64): void {
  if (!condition) env.eosio_assert_code(0, code);
}

/** Abort unless `account` authorized this action. */
export function requireAuth(account: u64): void {
  env.require_auth(account);
}

/** Whether `account` authorized this action. */
export function hasAuth(account: u64): bool {
  return env.has_auth(account) != 0;
}

/** Whether `account` exists on the chain. */
export function isAccount(account: u64): bool {
  return env.is_account(account) != 0;
}

/** Notify `account` of this action (Antelope's `require_recipient`): once this handler
 *  returns, `account`'s contract, if it has one, runs its `apply` with receiver = `account`
 *  and code = this contract; every account is notified once, the receiver never. */
export function requireRecipient(account: u64): void {
  env.require_recipient(account);
}

// The receiver, asked of the host once: it cannot change during an action, and every action
// runs in a fresh instance (0, the empty name, is no receiver).
let receiverOnce: u64 = 0;

/** The contract running this action (the notified account, in a notification handler). */
export function receiver(): u64 {
  if (receiverOnce == 0) receiverOnce = env.current_receiver();
  return receiverOnce;
}

/** The block's time in microseconds since the Unix epoch (the same on every node). */
export function currentTime(): i64 {
  return env.current_time();
}

/** The number of the block being applied (or read at, in a read-only call). */
export function blockNum(): u32 {
  return <u32>env.get_block_num();
}

/** Append text to the action's console (the node keeps 4 KiB per action). */
export function print(text: string): void {
  const utf8 = String.UTF8.encode(text);
  env.prints_l(changetype<usize>(utf8), utf8.byteLength);
}

/** The action's raw arguments (its ABI binary encoding). */
export function actionDataBytes(): Uint8Array {
  const size = env.action_data_size();
  const data = new Uint8Array(size);
  if (size > 0) env.read_action_data(data.dataStart, size);
  return data;
}

/** Set the action's return value (at most 8 KiB), returned by read-only calls and traces. */
export function setReturnValue(data: Uint8Array): void {
  env.set_action_return_value(data.dataStart, data.length);
}

/** Publish an event (data <= 4 KiB, at most 64 per action) into the trace and the stream. */
export function emitEvent(name: u64, data: Uint8Array): void {
  env.emit_event(name, data.dataStart, data.length);
}

/** SHA-256 of `data`. */
export function sha256(data: Uint8Array): Uint8Array {
  const out = new Uint8Array(32);
  env.sha256(data.dataStart, data.length, out.dataStart);
  return out;
}
