// Inline actions: queued by this action, run after it returns, in the same transaction, one
// level deeper. An action is Antelope's: account, name, permission levels, data.
import { Asset } from "./asset";
import { Datastream, Serializable } from "./datastream";
import { n } from "./name";
import * as env from "./env";

/** An account's permission that authorizes an action; BoR accounts have one, `active`. */
export class PermissionLevel {
  constructor(
    public actor: u64,
    public permission: u64 = n("active"),
  ) {}
}

/**
 * An action to send inline: `account`'s action `name` with `data` (its ABI encoding),
 * authorized by `authorization`, each actor this contract or an account that authorized the
 * running action.
 *
 *     sendInline(Action.of(n("token"), n("transfer"), [new PermissionLevel(receiver())], args));
 */
export class Action {
  constructor(
    public account: u64,
    public name: u64,
    public authorization: PermissionLevel[],
    public data: Uint8Array,
  ) {}

  /** The action with `value` (a typed struct with its serializer) as its data. */
  static of<T extends Serializable>(
    account: u64,
    name: u64,
    authorization: PermissionLevel[],
    value: T,
  ): Action {
    return new Action(account, name, authorization, value.pack());
  }

  /** Antelope's packed action, as `send_inline` takes it. */
  pack(): Uint8Array {
    const ds = new Datastream();
    ds.writeU64(this.account).writeU64(this.name);
    ds.writeVarUint32(<u32>this.authorization.length);
    for (let i = 0; i < this.authorization.length; i++) {
      ds.writeU64(this.authorization[i].actor).writeU64(this.authorization[i].permission);
    }
    ds.writeBytes(this.data);
    return ds.toBytes();
  }
}

/** Queue `action`: it runs after this action returns, in the same transaction. */
export function sendInline(action: Action): void {
  const bytes = action.pack();
  env.send_inline(bytes.dataStart, bytes.length);
}

/** The data of eosio.token's transfer, which the chain's own token takes natively. */
export class TransferArgs extends Serializable {
  constructor(
    public from: u64 = 0,
    public to: u64 = 0,
    public quantity: Asset = new Asset(),
    public memo: string = "",
  ) {
    super();
  }
  write(ds: Datastream): void {
    ds.writeName(this.from).writeName(this.to).writeAsset(this.quantity).writeString(this.memo);
  }
  read(ds: Datastream): void {
    this.from = ds.readName();
    this.to = ds.readName();
    this.quantity = ds.readAsset();
    this.memo = ds.readString();
  }
}

/** The account an inline action names to move the chain's own token (BOR): no contract
 * runs there; the node makes the transfer as its native action. */
export const NATIVE_TOKEN: u64 = n("eosio.token");

/**
 * Pay `quantity` of the chain's token (e.g. "1.0000 BOR": its symbol and precision) from
 * `from` (this contract, or an account that authorized the running action) to `to`.
 */
export function sendNativeTransfer(from: u64, to: u64, quantity: Asset, memo: string): void {
  const args = new TransferArgs(from, to, quantity, memo);
  sendInline(Action.of(NATIVE_TOKEN, n("transfer"), [new PermissionLevel(from)], args));
}
