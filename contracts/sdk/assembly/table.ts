// Tables in the shape of Antelope's multi_index: rows of one class, keyed by a u64 primary
// key, in a (contract, scope, table) namespace, walked both ways, with up to 16 secondary
// indexes of the CDT's key types (u64, u128, checksum256, double) the table keeps in step
// with its rows.
import { Datastream, Serializable } from "./datastream";
import { check } from "./system";
import * as env from "./env";

/** Pass as the payer of an update to keep the row's current payer (Antelope's same_payer). */
export const SAME_PAYER: u64 = 0;

/** The most secondary indexes a table may have (Antelope's 16). */
export const MAX_INDEXES: i32 = 16;

// Out-parameters of the host calls: a secondary key (up to 32 bytes) at SCRATCH, a primary
// key at SCRATCH + 32. A static segment, not an allocation: a contract module may have no
// start function to allocate it.
const SCRATCH: usize = memory.data(48);
const PRIMARY: usize = SCRATCH + 32;

/** The key types of a secondary index, as the ABI names them. */
export enum KeyType {
  U64 = 0,
  U128 = 1,
  Checksum256 = 2,
  Double = 3,
}

/**
 * A secondary key of any of the index types: `lo` for u64, `hi`:`lo` for u128, the 32
 * bytes of a checksum256, `value` for a double. Build one with the static constructors.
 */
export class SecondaryKey {
  constructor(
    public type: KeyType,
    public lo: u64 = 0,
    public hi: u64 = 0,
    public bytes: Uint8Array | null = null,
    public value: f64 = 0,
  ) {}

  static u64(v: u64): SecondaryKey {
    return new SecondaryKey(KeyType.U64, v);
  }
  static u128(hi: u64, lo: u64): SecondaryKey {
    return new SecondaryKey(KeyType.U128, lo, hi);
  }
  static checksum256(bytes: Uint8Array): SecondaryKey {
    check(bytes.length == 32, "a checksum256 key is 32 bytes");
    return new SecondaryKey(KeyType.Checksum256, 0, 0, bytes);
  }
  static double(v: f64): SecondaryKey {
    check(v == v, "NaN is not an allowed secondary key");
    return new SecondaryKey(KeyType.Double, 0, 0, null, v);
  }

  /** The smallest key of `type`: where a walk of a whole index starts. */
  static lowest(type: KeyType): SecondaryKey {
    if (type == KeyType.Checksum256) return SecondaryKey.checksum256(new Uint8Array(32));
    if (type == KeyType.Double) return SecondaryKey.double(-Infinity);
    return new SecondaryKey(type);
  }

  equals(other: SecondaryKey): bool {
    if (this.type != other.type) return false;
    if (this.type == KeyType.Double) return this.value == other.value;
    if (this.type != KeyType.Checksum256) return this.lo == other.lo && this.hi == other.hi;
    const a = this.bytes!;
    const b = other.bytes!;
    for (let i = 0; i < 32; i++) if (a[i] != b[i]) return false;
    return true;
  }

  /** Write the key where the host reads it, as Antelope passes each type. */
  store(at: usize): void {
    if (this.type == KeyType.U64) {
      store<u64>(at, this.lo);
    } else if (this.type == KeyType.U128) {
      store<u64>(at, this.lo);
      store<u64>(at + 8, this.hi);
    } else if (this.type == KeyType.Double) {
      store<f64>(at, this.value);
    } else {
      // Two u128 words, each the big-endian value of 16 of the checksum's bytes.
      const b = this.bytes!;
      for (let i = 0; i < 16; i++) {
        store<u8>(at + <usize>i, b[15 - i]);
        store<u8>(at + 16 + <usize>i, b[31 - i]);
      }
    }
  }

  /** The key of `type` the host wrote at `at`. */
  static load(type: KeyType, at: usize): SecondaryKey {
    if (type == KeyType.U64) return SecondaryKey.u64(load<u64>(at));
    if (type == KeyType.U128) return SecondaryKey.u128(load<u64>(at + 8), load<u64>(at));
    if (type == KeyType.Double) return SecondaryKey.double(load<f64>(at));
    const b = new Uint8Array(32);
    for (let i = 0; i < 16; i++) {
      b[15 - i] = load<u8>(at + <usize>i);
      b[31 - i] = load<u8>(at + 16 + <usize>i);
    }
    return SecondaryKey.checksum256(b);
  }
}

/** One secondary index of a table: the index's table name (as the ABI's `secondary[].table`
 * says) and its key type. */
export class IndexSpec {
  constructor(
    public table: u64,
    public type: KeyType = KeyType.U64,
  ) {}
}

/** A table row: its primary key, its layout, and (for an indexed table) its secondary keys. */
export abstract class Row extends Serializable {
  abstract primaryKey(): u64;

  /** The key of a table's one u64 secondary index; override it when the table has one. */
  secondaryKey(): u64 {
    return 0;
  }

  /** The row's secondary keys, one per index of its table in the order they were declared
   * (`Table.index`). By default the one u64 key of `secondaryKey`. */
  secondaryKeys(): SecondaryKey[] {
    return [SecondaryKey.u64(this.secondaryKey())];
  }

  /** The indexes the row's class declares (the transform generates it from `@secondary`),
   * which every Table of it keeps without `Table.index`; by default none. */
  indexSpecs(): IndexSpec[] {
    return [];
  }
}

// --- the host calls of each key type ----------------------------------------------------------

function idxStore(type: KeyType, scope: u64, table: u64, payer: u64, id: u64): i32 {
  if (type == KeyType.U64) return env.db_idx64_store(scope, table, payer, id, SCRATCH);
  if (type == KeyType.U128) return env.db_idx128_store(scope, table, payer, id, SCRATCH);
  if (type == KeyType.Double) return env.db_idx_double_store(scope, table, payer, id, SCRATCH);
  return env.db_idx256_store(scope, table, payer, id, SCRATCH, 2);
}

function idxUpdate(type: KeyType, itr: i32, payer: u64): void {
  if (type == KeyType.U64) env.db_idx64_update(itr, payer, SCRATCH);
  else if (type == KeyType.U128) env.db_idx128_update(itr, payer, SCRATCH);
  else if (type == KeyType.Double) env.db_idx_double_update(itr, payer, SCRATCH);
  else env.db_idx256_update(itr, payer, SCRATCH, 2);
}

function idxRemove(type: KeyType, itr: i32): void {
  if (type == KeyType.U64) env.db_idx64_remove(itr);
  else if (type == KeyType.U128) env.db_idx128_remove(itr);
  else if (type == KeyType.Double) env.db_idx_double_remove(itr);
  else env.db_idx256_remove(itr);
}

/** The entry of row `id` (its key at SCRATCH), or a negative iterator. */
function idxFindPrimary(type: KeyType, code: u64, scope: u64, table: u64, id: u64): i32 {
  if (type == KeyType.U64) return env.db_idx64_find_primary(code, scope, table, SCRATCH, id);
  if (type == KeyType.U128) return env.db_idx128_find_primary(code, scope, table, SCRATCH, id);
  if (type == KeyType.Double) {
    return env.db_idx_double_find_primary(code, scope, table, SCRATCH, id);
  }
  return env.db_idx256_find_primary(code, scope, table, SCRATCH, 2, id);
}

/** Lower (or upper) bound of the key at SCRATCH: the entry's key at SCRATCH, primary at PRIMARY. */
function idxBound(type: KeyType, upper: bool, code: u64, scope: u64, table: u64): i32 {
  if (type == KeyType.U64) {
    return upper
      ? env.db_idx64_upperbound(code, scope, table, SCRATCH, PRIMARY)
      : env.db_idx64_lowerbound(code, scope, table, SCRATCH, PRIMARY);
  }
  if (type == KeyType.U128) {
    return upper
      ? env.db_idx128_upperbound(code, scope, table, SCRATCH, PRIMARY)
      : env.db_idx128_lowerbound(code, scope, table, SCRATCH, PRIMARY);
  }
  if (type == KeyType.Double) {
    return upper
      ? env.db_idx_double_upperbound(code, scope, table, SCRATCH, PRIMARY)
      : env.db_idx_double_lowerbound(code, scope, table, SCRATCH, PRIMARY);
  }
  return upper
    ? env.db_idx256_upperbound(code, scope, table, SCRATCH, 2, PRIMARY)
    : env.db_idx256_lowerbound(code, scope, table, SCRATCH, 2, PRIMARY);
}

function idxStep(type: KeyType, forward: bool, itr: i32): i32 {
  if (type == KeyType.U64) {
    return forward ? env.db_idx64_next(itr, PRIMARY) : env.db_idx64_previous(itr, PRIMARY);
  }
  if (type == KeyType.U128) {
    return forward ? env.db_idx128_next(itr, PRIMARY) : env.db_idx128_previous(itr, PRIMARY);
  }
  if (type == KeyType.Double) {
    return forward
      ? env.db_idx_double_next(itr, PRIMARY)
      : env.db_idx_double_previous(itr, PRIMARY);
  }
  return forward ? env.db_idx256_next(itr, PRIMARY) : env.db_idx256_previous(itr, PRIMARY);
}

function idxEnd(type: KeyType, code: u64, scope: u64, table: u64): i32 {
  if (type == KeyType.U64) return env.db_idx64_end(code, scope, table);
  if (type == KeyType.U128) return env.db_idx128_end(code, scope, table);
  if (type == KeyType.Double) return env.db_idx_double_end(code, scope, table);
  return env.db_idx256_end(code, scope, table);
}

// Rows of up to this many bytes are read with one host call; longer ones take two.
const FIRST_READ: i32 = 256;

function readRow<T extends Row>(itr: i32): T {
  let data = new Uint8Array(FIRST_READ);
  const size = env.db_get_i64(itr, data.dataStart, FIRST_READ);
  if (size > FIRST_READ) {
    data = new Uint8Array(size);
    env.db_get_i64(itr, data.dataStart, size);
  } else {
    data = data.subarray(0, size);
  }
  const row = instantiate<T>();
  const ds = new Datastream(data);
  row.read(ds);
  ds.end();
  return row;
}

/**
 * The rows of `table` in `scope` of contract `code`. Another contract's tables can be read;
 * only the running contract's own can be written.
 *
 *     const accounts = new Table<Account>(receiver(), owner, n("accounts"));
 *     const row = accounts.find(symbolCode);
 *     const posts = new Table<Post>(receiver(), scope, n("posts"))
 *       .index(n("byauthor"))                      // Post.secondaryKeys()[0]: a u64
 *       .index(n("bytime"), KeyType.Double);       // Post.secondaryKeys()[1]: a double
 */
export class Table<T extends Row> {
  /** The secondary indexes, in the order of the row's `secondaryKeys()`. */
  indexes: IndexSpec[] = [];

  /**
   * `secondary` names the table of one u64 secondary index keyed by `Row.secondaryKey`
   * (as the ABI's `secondary` entry does), 0 for none; `index` adds more, of any key type.
   */
  constructor(
    public code: u64,
    public scope: u64,
    public table: u64,
    public secondary: u64 = 0,
  ) {
    const declared = instantiate<T>().indexSpecs();
    check(declared.length <= MAX_INDEXES, "a table has at most 16 secondary indexes");
    for (let i = 0; i < declared.length; i++) this.indexes.push(declared[i]);
    if (secondary != 0) this.index(secondary, KeyType.U64);
  }

  /** Add a secondary index (its ABI `table` name and key type); at most MAX_INDEXES. One the
   * row declares already (`Row.indexSpecs`) is kept where it is. */
  index(table: u64, type: KeyType = KeyType.U64): Table<T> {
    for (let i = 0; i < this.indexes.length; i++) {
      if (this.indexes[i].table != table) continue;
      check(this.indexes[i].type == type, "index declared again with another key type");
      return this;
    }
    check(this.indexes.length < MAX_INDEXES, "a table has at most 16 secondary indexes");
    this.indexes.push(new IndexSpec(table, type));
    return this;
  }

  /** The row with primary key `id`, or null. */
  find(id: u64): T | null {
    const itr = env.db_find_i64(this.code, this.scope, this.table, id);
    if (itr < 0) return null;
    return readRow<T>(itr);
  }

  /** The row with primary key `id`; aborts with `message` if there is none. */
  get(id: u64, message: string = "row not found"): T {
    const row = this.find(id);
    check(row !== null, message);
    return row!;
  }

  /** Whether a row with primary key `id` exists. */
  has(id: u64): bool {
    return env.db_find_i64(this.code, this.scope, this.table, id) >= 0;
  }

  private keysOf(row: T): SecondaryKey[] {
    const keys = this.indexes.length > 0 ? row.secondaryKeys() : [];
    check(keys.length >= this.indexes.length, "row has fewer secondary keys than its table");
    for (let i = 0; i < this.indexes.length; i++) {
      check(keys[i].type == this.indexes[i].type, "secondary key of the wrong type");
    }
    return keys;
  }

  /** Add a new row, its storage billed to `payer`; aborts if its key is taken. */
  store(row: T, payer: u64): void {
    const data = row.pack();
    const id = row.primaryKey();
    const keys = this.keysOf(row);
    env.db_store_i64(this.scope, this.table, payer, id, data.dataStart, data.length);
    for (let i = 0; i < this.indexes.length; i++) {
      keys[i].store(SCRATCH);
      idxStore(this.indexes[i].type, this.scope, this.indexes[i].table, payer, id);
    }
  }

  /** Replace the row with `row`'s primary key; aborts if there is none. `payer` defaults to
   * the row's current payer. */
  update(row: T, payer: u64 = SAME_PAYER): void {
    const id = row.primaryKey();
    const itr = env.db_find_i64(this.code, this.scope, this.table, id);
    check(itr >= 0, "cannot update a row that does not exist");
    const data = row.pack();
    const keys = this.keysOf(row);
    env.db_update_i64(itr, payer, data.dataStart, data.length);
    for (let i = 0; i < this.indexes.length; i++) {
      const spec = this.indexes[i];
      const idx = idxFindPrimary(spec.type, this.code, this.scope, spec.table, id);
      const wanted = keys[i];
      if (idx < 0) {
        wanted.store(SCRATCH);
        idxStore(spec.type, this.scope, spec.table, payer, id);
      } else if (!wanted.equals(SecondaryKey.load(spec.type, SCRATCH)) || payer != SAME_PAYER) {
        wanted.store(SCRATCH);
        idxUpdate(spec.type, idx, payer);
      }
    }
  }

  /** Add `row`, or replace the row with its key: `payer` pays for a new row's storage. */
  set(row: T, payer: u64): void {
    if (this.has(row.primaryKey())) this.update(row, SAME_PAYER);
    else this.store(row, payer);
  }

  /** Delete the row with primary key `id` (and its index entries); aborts if there is none. */
  erase(id: u64): void {
    const itr = env.db_find_i64(this.code, this.scope, this.table, id);
    check(itr >= 0, "cannot erase a row that does not exist");
    for (let i = 0; i < this.indexes.length; i++) {
      const spec = this.indexes[i];
      const idx = idxFindPrimary(spec.type, this.code, this.scope, spec.table, id);
      if (idx >= 0) idxRemove(spec.type, idx);
    }
    env.db_remove_i64(itr);
  }

  /** A cursor at the first row with primary key >= `id`. */
  lowerBound(id: u64): Cursor<T> {
    return new Cursor<T>(env.db_lowerbound_i64(this.code, this.scope, this.table, id));
  }

  /** A cursor at the first row with primary key > `id`. */
  upperBound(id: u64): Cursor<T> {
    return new Cursor<T>(env.db_upperbound_i64(this.code, this.scope, this.table, id));
  }

  /** A cursor at the first row: `for (let c = t.begin(); c.valid; c.next()) c.row ...`. */
  begin(): Cursor<T> {
    return this.lowerBound(0);
  }

  /** A cursor past the last row; `previous()` moves it to the last:
   * `for (let c = t.end(); c.previous(); ) c.row ...` walks the rows backwards. */
  end(): Cursor<T> {
    return new Cursor<T>(env.db_end_i64(this.code, this.scope, this.table));
  }

  /** The primary key after the last row's (0 for an empty table), as Antelope's
   * available_primary_key; aborts when the last key is the largest u64. */
  availablePrimaryKey(): u64 {
    const end = env.db_end_i64(this.code, this.scope, this.table);
    if (env.db_previous_i64(end, PRIMARY) < 0) return 0;
    const last = load<u64>(PRIMARY);
    check(last != u64.MAX_VALUE, "next primary key in table is at autoincrement limit");
    return last + 1;
  }

  /** The table's one u64 secondary index (the first declared); aborts if it has none. */
  bySecondary(): SecondaryIndex<T> {
    return this.byIndex(0);
  }

  /** Secondary index `i`, in the order the table declared them. */
  byIndex(i: i32): SecondaryIndex<T> {
    check(i >= 0 && i < this.indexes.length, "table has no such secondary index");
    return new SecondaryIndex<T>(this, this.indexes[i]);
  }
}

/** A position in a table, in primary key order. */
export class Cursor<T extends Row> {
  private cached: T | null = null;

  constructor(private itr: i32) {}

  /** False past the last row (or before the first). */
  get valid(): bool {
    return this.itr >= 0;
  }

  /** The primary key of the row here. */
  get primary(): u64 {
    return this.row.primaryKey();
  }

  /** The row here (read once, then kept). */
  get row(): T {
    check(this.itr >= 0, "cursor is past the last row");
    let row = this.cached;
    if (row === null) {
      row = readRow<T>(this.itr);
      this.cached = row;
    }
    return row;
  }

  /** Move to the next row. */
  next(): void {
    check(this.itr >= 0, "cursor is past the last row");
    this.itr = env.db_next_i64(this.itr, PRIMARY);
    this.cached = null;
  }

  /** Move to the previous row (from the end: the last); false, and invalid, when there is
   * none. */
  previous(): bool {
    check(this.itr != -1, "cursor is before the first row");
    this.itr = env.db_previous_i64(this.itr, PRIMARY);
    this.cached = null;
    return this.itr >= 0;
  }
}

/** One secondary index of a table, in (secondary, primary) order. */
export class SecondaryIndex<T extends Row> {
  constructor(
    private owner: Table<T>,
    private spec: IndexSpec,
  ) {}

  private bound(key: SecondaryKey, upper: bool): IndexCursor<T> {
    check(key.type == this.spec.type, "secondary key of the wrong type");
    const t = this.owner;
    key.store(SCRATCH);
    const itr = idxBound(this.spec.type, upper, t.code, t.scope, this.spec.table);
    const found = itr >= 0 ? SecondaryKey.load(this.spec.type, SCRATCH) : key;
    return new IndexCursor<T>(t, this.spec, itr, found, itr >= 0 ? load<u64>(PRIMARY) : 0);
  }

  /** A cursor at the first entry whose secondary key is >= `key`. */
  lowerBoundKey(key: SecondaryKey): IndexCursor<T> {
    return this.bound(key, false);
  }

  /** A cursor at the first entry whose secondary key is > `key`. */
  upperBoundKey(key: SecondaryKey): IndexCursor<T> {
    return this.bound(key, true);
  }

  /** The first row whose secondary key is `key`, or null. */
  findKey(key: SecondaryKey): T | null {
    const c = this.lowerBoundKey(key);
    if (!c.valid || !c.key.equals(key)) return null;
    return c.row;
  }

  /** `lowerBoundKey` of a u64 index. */
  lowerBound(secondary: u64): IndexCursor<T> {
    return this.bound(SecondaryKey.u64(secondary), false);
  }

  /** `upperBoundKey` of a u64 index. */
  upperBound(secondary: u64): IndexCursor<T> {
    return this.bound(SecondaryKey.u64(secondary), true);
  }

  /** `findKey` of a u64 index. */
  find(secondary: u64): T | null {
    return this.findKey(SecondaryKey.u64(secondary));
  }

  /** A cursor at the index's first entry. */
  begin(): IndexCursor<T> {
    return this.bound(SecondaryKey.lowest(this.spec.type), false);
  }

  /** A cursor past the last entry; `previous()` moves it to the last. */
  end(): IndexCursor<T> {
    const t = this.owner;
    const itr = idxEnd(this.spec.type, t.code, t.scope, this.spec.table);
    return new IndexCursor<T>(t, this.spec, itr, SecondaryKey.lowest(this.spec.type), 0);
  }
}

/** A position in a secondary index: `key` and `primary` are the entry's keys (`secondary`:
 * a u64 index's key as a number). */
export class IndexCursor<T extends Row> {
  constructor(
    private owner: Table<T>,
    private spec: IndexSpec,
    private itr: i32,
    public key: SecondaryKey,
    public primary: u64,
  ) {}

  /** The entry's key of a u64 index. */
  get secondary(): u64 {
    return this.key.lo;
  }

  /** False past the last entry (or before the first). */
  get valid(): bool {
    return this.itr >= 0;
  }

  /** The row this entry points to. */
  get row(): T {
    check(this.itr >= 0, "cursor is past the last entry");
    return this.owner.get(this.primary, "index entry without its row");
  }

  private moved(itr: i32): bool {
    this.itr = itr;
    if (itr < 0) return false;
    const t = this.owner;
    this.primary = load<u64>(PRIMARY);
    idxFindPrimary(this.spec.type, t.code, t.scope, this.spec.table, this.primary);
    this.key = SecondaryKey.load(this.spec.type, SCRATCH);
    return true;
  }

  /** Move to the next entry. */
  next(): void {
    check(this.itr >= 0, "cursor is past the last entry");
    this.moved(idxStep(this.spec.type, true, this.itr));
  }

  /** Move to the previous entry (from the end: the last); false when there is none. */
  previous(): bool {
    check(this.itr != -1, "cursor is before the first entry");
    return this.moved(idxStep(this.spec.type, false, this.itr));
  }
}
