// What the generated `apply` (the SDK's transform, transform/contract.js) tells the contract
// about the action it runs, beyond `receiver()`.
import { Name } from "./name";

/** A checksum256 field or parameter: 32 bytes (ABI `checksum256`, hex in JSON). */
export type Checksum256 = Uint8Array;

let FIRST_RECEIVER: u64 = 0;

/**
 * The account the running action was sent to: `receiver()` for an action of this contract,
 * the contract that notified it in an `@on_notify` handler (Antelope's get_first_receiver).
 */
export function firstReceiver(): Name {
  return FIRST_RECEIVER;
}

/** Called by the generated `apply` first; not for contracts. */
export function __bor_enter(code: u64): void {
  FIRST_RECEIVER = code;
}
