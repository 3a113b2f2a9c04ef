// The ABI's 128-bit integers, u128 and i128, as two u64 halves (AssemblyScript has no 128-bit
// integer type): 16 bytes little-endian, the low half first, as Antelope lays them out. A
// u128 field of a table row can key a u128 secondary index (SecondaryKey.u128(hi, lo)).
import { Datastream } from "./datastream";

/** An unsigned 128-bit integer: `hi` * 2^64 + `lo`. */
export class U128 {
  constructor(
    public hi: u64 = 0,
    public lo: u64 = 0,
  ) {}

  static fromU64(v: u64): U128 {
    return new U128(0, v);
  }
  equals(other: U128): bool {
    return this.hi == other.hi && this.lo == other.lo;
  }
  read(ds: Datastream): void {
    this.lo = ds.readU64();
    this.hi = ds.readU64();
  }
  write(ds: Datastream): void {
    ds.writeU64(this.lo).writeU64(this.hi);
  }
}

/** A signed 128-bit integer in two's complement: `hi` (signed) * 2^64 + `lo`. */
export class I128 {
  constructor(
    public hi: i64 = 0,
    public lo: u64 = 0,
  ) {}

  /** `v` widened, its sign carried into the high half. */
  static fromI64(v: i64): I128 {
    return new I128(v < 0 ? -1 : 0, <u64>v);
  }
  equals(other: I128): bool {
    return this.hi == other.hi && this.lo == other.lo;
  }
  read(ds: Datastream): void {
    this.lo = ds.readU64();
    this.hi = ds.readI64();
  }
  write(ds: Datastream): void {
    ds.writeU64(this.lo).writeI64(this.hi);
  }
}
