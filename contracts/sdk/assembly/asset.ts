// Antelope's symbol and asset: a symbol is a precision (low byte) and up to 7 upper-case
// letters (the next 7 bytes); an asset is a signed amount in units of 10^-precision.
// Arithmetic aborts instead of wrapping, as eosio::asset does.
import { check } from "./system";

/** The largest amount an asset holds: 2^62 - 1, so a sum of two never overflows an i64. */
export const MAX_AMOUNT: i64 = (<i64>1 << 62) - 1;

/** A token symbol: `Symbol.of("TOK", 4)` is "4,TOK". */
export class Symbol {
  constructor(public raw: u64 = 0) {}

  /** The symbol of `code` (1..7 upper-case letters) with `precision` decimals (<= 18). */
  static of(code: string, precision: u8): Symbol {
    return new Symbol((symbolCode(code) << 8) | <u64>precision);
  }

  get precision(): u8 {
    return <u8>(this.raw & 0xff);
  }

  /** The letters as a number: the primary key eosio.token's tables use. */
  get code(): u64 {
    return this.raw >> 8;
  }

  /** The letters: "TOK". */
  get codeString(): string {
    let text = "";
    let sym = this.code;
    while (sym != 0) {
      text += String.fromCharCode(<i32>(sym & 0xff));
      sym >>= 8;
    }
    return text;
  }

  isValid(): bool {
    if (this.precision > 18) return false;
    let sym = this.code;
    if (sym == 0) return false;
    for (let i = 0; i < 7; i++) {
      const c = <i32>(sym & 0xff);
      if (c == 0) return sym == 0; // letters end: nothing may follow
      if (c < 0x41 || c > 0x5a) return false;
      sym >>= 8;
    }
    return sym == 0;
  }

  @operator("==") static eq(a: Symbol, b: Symbol): bool {
    return a.raw == b.raw;
  }
  @operator("!=") static ne(a: Symbol, b: Symbol): bool {
    return a.raw != b.raw;
  }

  toString(): string {
    return this.precision.toString() + "," + this.codeString;
  }
}

/** The number of a symbol code ("TOK"), aborting unless it is 1..7 upper-case letters. */
export function symbolCode(code: string): u64 {
  check(code.length >= 1 && code.length <= 7, "symbol code must be 1 to 7 letters");
  let value: u64 = 0;
  for (let i = code.length - 1; i >= 0; i--) {
    const c = code.charCodeAt(i);
    check(c >= 0x41 && c <= 0x5a, "symbol code must be upper-case letters");
    value = (value << 8) | <u64>c;
  }
  return value;
}

/** An amount of a token: `new Asset(10000, Symbol.of("TOK", 4))` is "1.0000 TOK". */
export class Asset {
  constructor(public amount: i64 = 0, public symbol: Symbol = new Symbol()) {}

  isAmountWithinRange(): bool {
    return -MAX_AMOUNT <= this.amount && this.amount <= MAX_AMOUNT;
  }

  isValid(): bool {
    return this.isAmountWithinRange() && this.symbol.isValid();
  }

  @operator("+") static add(a: Asset, b: Asset): Asset {
    check(a.symbol == b.symbol, "attempt to add asset with different symbol");
    const sum = new Asset(a.amount + b.amount, a.symbol);
    check(sum.amount >= -MAX_AMOUNT, "addition underflow");
    check(sum.amount <= MAX_AMOUNT, "addition overflow");
    return sum;
  }

  @operator("-") static sub(a: Asset, b: Asset): Asset {
    check(a.symbol == b.symbol, "attempt to subtract asset with different symbol");
    const diff = new Asset(a.amount - b.amount, a.symbol);
    check(diff.amount >= -MAX_AMOUNT, "subtraction underflow");
    check(diff.amount <= MAX_AMOUNT, "subtraction overflow");
    return diff;
  }

  @operator("==") static eq(a: Asset, b: Asset): bool {
    check(a.symbol == b.symbol, "comparison of assets with different symbols is not allowed");
    return a.amount == b.amount;
  }
  @operator("!=") static ne(a: Asset, b: Asset): bool {
    return !Asset.eq(a, b);
  }
  @operator("<") static lt(a: Asset, b: Asset): bool {
    check(a.symbol == b.symbol, "comparison of assets with different symbols is not allowed");
    return a.amount < b.amount;
  }
  @operator("<=") static le(a: Asset, b: Asset): bool {
    check(a.symbol == b.symbol, "comparison of assets with different symbols is not allowed");
    return a.amount <= b.amount;
  }
  @operator(">") static gt(a: Asset, b: Asset): bool {
    return Asset.lt(b, a);
  }
  @operator(">=") static ge(a: Asset, b: Asset): bool {
    return Asset.le(b, a);
  }

  /** "1.0000 TOK", the form the ABI's JSON uses. */
  toString(): string {
    const precision = <i32>this.symbol.precision;
    const negative = this.amount < 0;
    // i64's minimum is outside the asset range, so the negation cannot overflow here.
    let digits = (negative ? -this.amount : this.amount).toString();
    while (digits.length <= precision) digits = "0" + digits;
    let text = precision > 0
      ? digits.substring(0, digits.length - precision) + "." + digits.substring(digits.length - precision)
      : digits;
    if (negative) text = "-" + text;
    return text + " " + this.symbol.codeString;
  }
}
