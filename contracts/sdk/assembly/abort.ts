// AssemblyScript's abort, as contracts get it; `bor-contract build` compiles this file into
// every contract (not exported: the module's only exports stay `apply` and `memory`).
import { check } from "./system";

/**
 * The abort handler: `bor-contract build` routes AssemblyScript's `abort` here (failed
 * `assert`, out-of-range index, allocation too large), so such failures reach the node as an
 * assertion with a message instead of a bare `unreachable` trap.
 */
// @ts-ignore: decorator
@global function __bor_abort(message: string | null, fileName: string | null, line: u32, column: u32): void {
  let text = message !== null ? message : "abort";
  if (fileName !== null) text += " (" + fileName + ":" + line.toString() + ")";
  check(false, text);
  unreachable();
}
