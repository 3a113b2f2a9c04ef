// A fungible token with eosio.token's actions, tables and checks.
//
// Tables (as eosio.token): `accounts`, scope = owner, one row per symbol the owner holds
// (primary key = the symbol code); `stat`, scope = symbol code, one row per token (supply,
// maximum supply, issuer). Storage payer: BoR has no RAM market, so whoever's action creates
// a row pays for it, as eosio.token does: the issuer for its stat row and first balance, the
// sender for a recipient's new balance row (unless the recipient also authorized).
import {
  Asset, Datastream, Row, Symbol, Table,
  check, emitEvent, hasAuth, isAccount, n, receiver, requireAuth, requireRecipient,
} from "sdk";

class Account extends Row {
  constructor(public balance: Asset = new Asset()) {
    super();
  }
  primaryKey(): u64 {
    return this.balance.symbol.code;
  }
  write(ds: Datastream): void {
    ds.writeAsset(this.balance);
  }
  read(ds: Datastream): void {
    this.balance = ds.readAsset();
  }
}

class CurrencyStats extends Row {
  constructor(
    public supply: Asset = new Asset(),
    public maxSupply: Asset = new Asset(),
    public issuer: u64 = 0,
  ) {
    super();
  }
  primaryKey(): u64 {
    return this.supply.symbol.code;
  }
  write(ds: Datastream): void {
    ds.writeAsset(this.supply).writeAsset(this.maxSupply).writeName(this.issuer);
  }
  read(ds: Datastream): void {
    this.supply = ds.readAsset();
    this.maxSupply = ds.readAsset();
    this.issuer = ds.readName();
  }
}

function accounts(owner: u64): Table<Account> {
  return new Table<Account>(receiver(), owner, n("accounts"));
}

function stats(symbolCode: u64): Table<CurrencyStats> {
  return new Table<CurrencyStats>(receiver(), symbolCode, n("stat"));
}

function create(issuer: u64, maximumSupply: Asset): void {
  requireAuth(receiver());
  const sym = maximumSupply.symbol;
  check(sym.isValid(), "invalid symbol name");
  check(maximumSupply.isValid(), "invalid supply");
  check(maximumSupply.amount > 0, "max-supply must be positive");
  check(isAccount(issuer), "issuer account does not exist");
  const stat = stats(sym.code);
  check(!stat.has(sym.code), "token with symbol already exists");
  stat.store(new CurrencyStats(new Asset(0, sym), maximumSupply, issuer), receiver());
}

function issue(to: u64, quantity: Asset, memo: string): void {
  const sym = quantity.symbol;
  check(sym.isValid(), "invalid symbol name");
  check(String.UTF8.byteLength(memo) <= 256, "memo has more than 256 bytes");
  const stat = stats(sym.code);
  const st = stat.get(sym.code, "token with symbol does not exist, create token before issue");
  check(to == st.issuer, "tokens can only be issued to issuer account");
  requireAuth(st.issuer);
  check(quantity.isValid(), "invalid quantity");
  check(quantity.amount > 0, "must issue positive quantity");
  check(quantity.symbol == st.supply.symbol, "symbol precision mismatch");
  check(quantity.amount <= st.maxSupply.amount - st.supply.amount, "quantity exceeds available supply");
  st.supply = st.supply + quantity;
  stat.update(st);
  addBalance(st.issuer, quantity, st.issuer);
  emitEvent(n("issue"), new Datastream().writeName(to).writeAsset(quantity).writeString(memo).toBytes());
}

function transfer(from: u64, to: u64, quantity: Asset, memo: string): void {
  check(from != to, "cannot transfer to self");
  requireAuth(from);
  check(isAccount(to), "to account does not exist");
  // As eosio.token: both parties' contracts, if any, see the transfer (and so does anyone
  // following either account in the stream).
  requireRecipient(from);
  requireRecipient(to);
  const sym = quantity.symbol;
  const st = stats(sym.code).get(sym.code, "token with symbol does not exist");
  check(quantity.isValid(), "invalid quantity");
  check(quantity.amount > 0, "must transfer positive quantity");
  check(quantity.symbol == st.supply.symbol, "symbol precision mismatch");
  check(String.UTF8.byteLength(memo) <= 256, "memo has more than 256 bytes");
  const payer = hasAuth(to) ? to : from;
  subBalance(from, quantity);
  addBalance(to, quantity, payer);
  emitEvent(
    n("transfer"),
    new Datastream().writeName(from).writeName(to).writeAsset(quantity).writeString(memo).toBytes(),
  );
}

function subBalance(owner: u64, value: Asset): void {
  const table = accounts(owner);
  const from = table.get(value.symbol.code, "no balance object found");
  check(from.balance.amount >= value.amount, "overdrawn balance");
  from.balance = from.balance - value;
  table.update(from);
}

function addBalance(owner: u64, value: Asset, payer: u64): void {
  const table = accounts(owner);
  const to = table.find(value.symbol.code);
  if (to === null) {
    table.store(new Account(value), payer);
  } else {
    to.balance = to.balance + value;
    table.update(to);
  }
}

export function apply(receiver: u64, code: u64, action: u64): void {
  if (code != receiver) return; // a notification of another contract's action: none handled
  const ds = Datastream.fromActionData();
  if (action == n("create")) {
    const issuer = ds.readName();
    const maximumSupply = ds.readAsset();
    ds.end();
    create(issuer, maximumSupply);
  } else if (action == n("issue")) {
    const to = ds.readName();
    const quantity = ds.readAsset();
    const memo = ds.readString();
    ds.end();
    issue(to, quantity, memo);
  } else if (action == n("transfer")) {
    const from = ds.readName();
    const to = ds.readName();
    const quantity = ds.readAsset();
    const memo = ds.readString();
    ds.end();
    transfer(from, to, quantity, memo);
  } else {
    check(false, "unknown action");
  }
}
