// A contract that handles notifications by hand (no annotations): it counts the token
// transfers it receives, per token contract (the scope) and symbol (the primary key), as a
// shop would. A transfer with the memo "refuse" is refused, which fails the transfer.
import { Datastream, Row, Table, check, n, print, receiver } from "sdk";

class Incoming extends Row {
  constructor(public symbolCode: u64 = 0, public count: u64 = 0, public total: i64 = 0) {
    super();
  }
  primaryKey(): u64 {
    return this.symbolCode;
  }
  write(ds: Datastream): void {
    ds.writeU64(this.symbolCode).writeU64(this.count).writeI64(this.total);
  }
  read(ds: Datastream): void {
    this.symbolCode = ds.readU64();
    this.count = ds.readU64();
    this.total = ds.readI64();
  }
}

function onTransfer(token: u64): void {
  const ds = Datastream.fromActionData();
  ds.readName(); // from
  const to = ds.readName();
  const quantity = ds.readAsset();
  const memo = ds.readString();
  if (to != receiver()) return; // notified as the sender: nothing came in
  check(memo != "refuse", "refused");
  const table = new Table<Incoming>(receiver(), token, n("incoming"));
  const code = quantity.symbol.code;
  const row = table.find(code);
  if (row === null) {
    table.store(new Incoming(code, 1, quantity.amount), receiver());
  } else {
    row.count += 1;
    row.total += quantity.amount;
    table.update(row);
  }
  print("received " + quantity.amount.toString());
}

export function apply(receiver: u64, code: u64, action: u64): void {
  if (code != receiver) {
    if (action == n("transfer")) onTransfer(code);
    return; // any other notification: ignored
  }
  check(false, "unknown action");
}
