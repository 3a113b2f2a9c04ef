// Inline actions: queued by this action, run after it returns, in the same transaction.
import { Datastream } from "./datastream";
import * as env from "./env";

/**
 * Queue `action` of `contract` with `data` (its ABI encoding), authorized by `authorization`:
 * each actor must be this contract or have authorized the running action. Only contract
 * actions can be sent; native actions (transfers of the chain's token, setcode) cannot.
 */
export function sendInline(contract: u64, action: u64, authorization: u64[], data: Uint8Array): void {
  const ds = new Datastream();
  ds.writeU64(contract).writeU64(action).writeVarUint32(<u32>authorization.length);
  for (let i = 0; i < authorization.length; i++) ds.writeU64(authorization[i]);
  ds.writeBytes(data);
  const bytes = ds.toBytes();
  env.send_inline(bytes.dataStart, bytes.length);
}
