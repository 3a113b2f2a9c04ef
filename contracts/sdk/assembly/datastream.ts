// Antelope's binary encoding, the one action data, rows, events and return values use:
// little-endian integers, names as u64, strings and bytes as a varuint32 length and the
// bytes, symbols as u64, assets as an i64 amount and a symbol.
import { Asset, Symbol } from "./asset";
import { check } from "./system";
import * as env from "./env";

/** Reads values from bytes in order, or appends values to a growing buffer. */
export class Datastream {
  private buf: Uint8Array;
  /** The read position (reading) or the number of bytes written (writing). */
  pos: i32 = 0;

  constructor(data: Uint8Array | null = null) {
    this.buf = data !== null ? data : new Uint8Array(64);
  }

  /** A stream over this action's data. */
  static fromActionData(): Datastream {
    const size = env.action_data_size();
    const data = new Uint8Array(size);
    if (size > 0) env.read_action_data(data.dataStart, size);
    return new Datastream(data);
  }

  // ---- reading ----

  /** Bytes left to read. */
  get remaining(): i32 {
    return this.buf.length - this.pos;
  }

  /** Abort unless every byte was read: catches data encoded for another layout. */
  end(): void {
    check(this.pos == this.buf.length, "datastream: unexpected bytes after the last field");
  }

  private take(size: i32): usize {
    check(size >= 0 && this.pos + size <= this.buf.length, "datastream: read past the end");
    const at = this.buf.dataStart + <usize>this.pos;
    this.pos += size;
    return at;
  }

  readU8(): u8 {
    return load<u8>(this.take(1));
  }
  readBool(): bool {
    const b = this.readU8();
    check(b <= 1, "datastream: bool is not 0 or 1");
    return b == 1;
  }
  readU16(): u16 {
    return load<u16>(this.take(2));
  }
  readU32(): u32 {
    return load<u32>(this.take(4));
  }
  readU64(): u64 {
    return load<u64>(this.take(8));
  }
  readI8(): i8 {
    return load<i8>(this.take(1));
  }
  readI16(): i16 {
    return load<i16>(this.take(2));
  }
  readI32(): i32 {
    return load<i32>(this.take(4));
  }
  readI64(): i64 {
    return load<i64>(this.take(8));
  }
  readF64(): f64 {
    return load<f64>(this.take(8));
  }
  readName(): u64 {
    return this.readU64();
  }
  readVarUint32(): u32 {
    let value: u32 = 0;
    let shift: u32 = 0;
    while (true) {
      const b = this.readU8();
      check(shift < 35, "datastream: varuint32 too long");
      value |= (<u32>(b & 0x7f)) << shift;
      if ((b & 0x80) == 0) break;
      shift += 7;
    }
    return value;
  }
  readBytes(): Uint8Array {
    const len = <i32>this.readVarUint32();
    return this.readFixed(len);
  }
  /** `size` raw bytes (a checksum256 is `readFixed(32)`). */
  readFixed(size: i32): Uint8Array {
    const at = this.take(size);
    const out = new Uint8Array(size);
    memory.copy(out.dataStart, at, <usize>size);
    return out;
  }
  readChecksum256(): Uint8Array {
    return this.readFixed(32);
  }
  readString(): string {
    const len = <i32>this.readVarUint32();
    const at = this.take(len);
    return String.UTF8.decodeUnsafe(at, <usize>len);
  }
  readSymbol(): Symbol {
    return new Symbol(this.readU64());
  }
  readAsset(): Asset {
    const amount = this.readI64();
    return new Asset(amount, this.readSymbol());
  }

  // ---- writing (each returns the stream, so writes chain) ----

  private reserve(size: i32): usize {
    const need = this.pos + size;
    if (need > this.buf.length) {
      let cap = this.buf.length * 2;
      if (cap < need) cap = need;
      const grown = new Uint8Array(cap);
      memory.copy(grown.dataStart, this.buf.dataStart, <usize>this.pos);
      this.buf = grown;
    }
    const at = this.buf.dataStart + <usize>this.pos;
    this.pos = need;
    return at;
  }

  writeU8(v: u8): Datastream {
    store<u8>(this.reserve(1), v);
    return this;
  }
  writeBool(v: bool): Datastream {
    return this.writeU8(v ? 1 : 0);
  }
  writeU16(v: u16): Datastream {
    store<u16>(this.reserve(2), v);
    return this;
  }
  writeU32(v: u32): Datastream {
    store<u32>(this.reserve(4), v);
    return this;
  }
  writeU64(v: u64): Datastream {
    store<u64>(this.reserve(8), v);
    return this;
  }
  writeI8(v: i8): Datastream {
    store<i8>(this.reserve(1), v);
    return this;
  }
  writeI16(v: i16): Datastream {
    store<i16>(this.reserve(2), v);
    return this;
  }
  writeI32(v: i32): Datastream {
    store<i32>(this.reserve(4), v);
    return this;
  }
  writeI64(v: i64): Datastream {
    store<i64>(this.reserve(8), v);
    return this;
  }
  writeF64(v: f64): Datastream {
    store<f64>(this.reserve(8), v);
    return this;
  }
  writeName(v: u64): Datastream {
    return this.writeU64(v);
  }
  writeVarUint32(v: u32): Datastream {
    do {
      let b = <u8>(v & 0x7f);
      v >>= 7;
      if (v != 0) b |= 0x80;
      this.writeU8(b);
    } while (v != 0);
    return this;
  }
  writeFixed(data: Uint8Array): Datastream {
    memory.copy(this.reserve(data.length), data.dataStart, <usize>data.length);
    return this;
  }
  writeBytes(data: Uint8Array): Datastream {
    this.writeVarUint32(<u32>data.length);
    return this.writeFixed(data);
  }
  writeChecksum256(data: Uint8Array): Datastream {
    check(data.length == 32, "datastream: checksum256 must be 32 bytes");
    return this.writeFixed(data);
  }
  writeString(v: string): Datastream {
    const utf8 = String.UTF8.encode(v);
    this.writeVarUint32(<u32>utf8.byteLength);
    memory.copy(this.reserve(utf8.byteLength), changetype<usize>(utf8), <usize>utf8.byteLength);
    return this;
  }
  writeSymbol(v: Symbol): Datastream {
    return this.writeU64(v.raw);
  }
  writeAsset(v: Asset): Datastream {
    this.writeI64(v.amount);
    return this.writeSymbol(v.symbol);
  }

  /** The bytes written so far. */
  toBytes(): Uint8Array {
    return this.buf.subarray(0, this.pos);
  }
}

/** A value with an Antelope binary layout: a table row, action arguments or an event. */
export abstract class Serializable {
  abstract write(ds: Datastream): void;
  abstract read(ds: Datastream): void;

  /** This value's bytes. */
  pack(): Uint8Array {
    const ds = new Datastream();
    this.write(ds);
    return ds.toBytes();
  }
}

/** Decode a `T` from `data`, aborting on bytes left over. */
export function unpack<T extends Serializable>(data: Uint8Array): T {
  const value = instantiate<T>();
  const ds = new Datastream(data);
  value.read(ds);
  ds.end();
  return value;
}
