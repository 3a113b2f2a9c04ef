// A fungible token with eosio.token's actions, tables and checks.
//
// Tables (as eosio.token): `accounts`, scope = owner, one row per symbol the owner holds
// (primary key = the symbol code); `stat`, scope = symbol code, one row per token (supply,
// maximum supply, issuer). Storage payer: BoR has no RAM market, so whoever's action creates
// a row pays for it, as eosio.token does: the issuer for its stat row and first balance, the
// sender for a recipient's new balance row (unless the recipient also authorized).
import {
  Asset, Name, Table,
  check, hasAuth, isAccount, n, receiver, requireAuth, requireRecipient,
} from "sdk";

@table("accounts")
class Account {
  constructor(public balance: Asset = new Asset()) {}

  @primary get key(): u64 {
    return this.balance.symbol.code;
  }
}

@table("stat")
class CurrencyStats {
  constructor(
    public supply: Asset = new Asset(),
    public maxSupply: Asset = new Asset(),
    public issuer: Name = 0,
  ) {}

  @primary get key(): u64 {
    return this.supply.symbol.code;
  }
}

@event("issue")
class Issued {
  constructor(public to: Name = 0, public quantity: Asset = new Asset(), public memo: string = "") {}
}

@event("transfer")
class Transferred {
  constructor(
    public from: Name = 0,
    public to: Name = 0,
    public quantity: Asset = new Asset(),
    public memo: string = "",
  ) {}
}

function accounts(owner: u64): Table<Account> {
  return new Table<Account>(receiver(), owner, n("accounts"));
}

function stats(symbolCode: u64): Table<CurrencyStats> {
  return new Table<CurrencyStats>(receiver(), symbolCode, n("stat"));
}

@contract
class Token {
  @action
  create(issuer: Name, maximumSupply: Asset): void {
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

  @action
  issue(to: Name, quantity: Asset, memo: string): void {
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
    new Issued(to, quantity, memo).emit();
  }

  @action
  transfer(from: Name, to: Name, quantity: Asset, memo: string): void {
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
    new Transferred(from, to, quantity, memo).emit();
  }
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
