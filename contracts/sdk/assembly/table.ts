// Tables in the shape of Antelope's multi_index: rows of one class, keyed by a u64 primary
// key, in a (contract, scope, table) namespace, with an optional u64 secondary index the
// table keeps in step with its rows.
import { Datastream, Serializable } from "./datastream";
import { check } from "./system";
import * as env from "./env";

/** Pass as the payer of an update to keep the row's current payer (Antelope's same_payer). */
export const SAME_PAYER: u64 = 0;

// Out-parameters of the host calls (primary and secondary keys, u64 little-endian). A static
// segment, not an allocation: a contract module may have no start function to allocate it.
const SCRATCH: usize = memory.data(16);

/** A table row: its primary key, its layout, and (for an indexed table) its secondary key. */
export abstract class Row extends Serializable {
  abstract primaryKey(): u64;

  /** The key of the table's secondary index; override it when the table has one. */
  secondaryKey(): u64 {
    return 0;
  }
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
 */
export class Table<T extends Row> {
  /**
   * `secondary` names the table of the idx64 secondary index (as the ABI's `secondary`
   * entry does), 0 for a table without one.
   */
  constructor(
    public code: u64,
    public scope: u64,
    public table: u64,
    public secondary: u64 = 0,
  ) {}

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

  /** Add a new row, its storage billed to `payer`; aborts if its key is taken. */
  store(row: T, payer: u64): void {
    const data = row.pack();
    const id = row.primaryKey();
    env.db_store_i64(this.scope, this.table, payer, id, data.dataStart, data.length);
    if (this.secondary != 0) {
      store<u64>(SCRATCH, row.secondaryKey());
      env.db_idx64_store(this.scope, this.secondary, payer, id, SCRATCH);
    }
  }

  /** Replace the row with `row`'s primary key; aborts if there is none. `payer` defaults to
   * the row's current payer. */
  update(row: T, payer: u64 = SAME_PAYER): void {
    const id = row.primaryKey();
    const itr = env.db_find_i64(this.code, this.scope, this.table, id);
    check(itr >= 0, "cannot update a row that does not exist");
    const data = row.pack();
    env.db_update_i64(itr, payer, data.dataStart, data.length);
    if (this.secondary != 0) {
      const idx = env.db_idx64_find_primary(this.code, this.scope, this.secondary, SCRATCH, id);
      const wanted = row.secondaryKey();
      if (idx < 0) {
        store<u64>(SCRATCH, wanted);
        env.db_idx64_store(this.scope, this.secondary, payer, id, SCRATCH);
      } else if (wanted != load<u64>(SCRATCH) || payer != SAME_PAYER) {
        store<u64>(SCRATCH, wanted);
        env.db_idx64_update(idx, payer, SCRATCH);
      }
    }
  }

  /** Add `row`, or replace the row with its key: `payer` pays for a new row's storage. */
  set(row: T, payer: u64): void {
    if (this.has(row.primaryKey())) this.update(row, SAME_PAYER);
    else this.store(row, payer);
  }

  /** Delete the row with primary key `id`; aborts if there is none. */
  erase(id: u64): void {
    const itr = env.db_find_i64(this.code, this.scope, this.table, id);
    check(itr >= 0, "cannot erase a row that does not exist");
    if (this.secondary != 0) {
      const idx = env.db_idx64_find_primary(this.code, this.scope, this.secondary, SCRATCH, id);
      if (idx >= 0) env.db_idx64_remove(idx);
    }
    env.db_remove_i64(itr);
  }

  /** A cursor at the first row with primary key >= `id`. */
  lowerBound(id: u64): Cursor<T> {
    return new Cursor<T>(env.db_lowerbound_i64(this.code, this.scope, this.table, id));
  }

  /** A cursor at the first row: `for (let c = t.begin(); c.valid; c.next()) c.row ...`. */
  begin(): Cursor<T> {
    return this.lowerBound(0);
  }

  /** The secondary index; aborts if the table was made without one. */
  bySecondary(): SecondaryIndex<T> {
    check(this.secondary != 0, "table has no secondary index");
    return new SecondaryIndex<T>(this);
  }
}

/** A position in a table, in primary key order. */
export class Cursor<T extends Row> {
  private cached: T | null = null;

  constructor(private itr: i32) {}

  /** False past the last row. */
  get valid(): bool {
    return this.itr >= 0;
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
    this.itr = env.db_next_i64(this.itr, SCRATCH);
    this.cached = null;
  }
}

/** A table's idx64 secondary index, in (secondary, primary) order. */
export class SecondaryIndex<T extends Row> {
  constructor(private owner: Table<T>) {}

  /** A cursor at the first entry whose secondary key is >= `secondary`. */
  lowerBound(secondary: u64): IndexCursor<T> {
    const t = this.owner;
    store<u64>(SCRATCH, secondary);
    const itr = env.db_idx64_lowerbound(t.code, t.scope, t.secondary, SCRATCH, SCRATCH + 8);
    return new IndexCursor<T>(t, itr, load<u64>(SCRATCH), load<u64>(SCRATCH + 8));
  }

  /** The first row whose secondary key is `secondary`, or null. */
  find(secondary: u64): T | null {
    const c = this.lowerBound(secondary);
    if (!c.valid || c.secondary != secondary) return null;
    return c.row;
  }
}

/** A position in a secondary index: `secondary` and `primary` are the entry's keys. */
export class IndexCursor<T extends Row> {
  constructor(
    private owner: Table<T>,
    private itr: i32,
    public secondary: u64,
    public primary: u64,
  ) {}

  /** False past the last entry. */
  get valid(): bool {
    return this.itr >= 0;
  }

  /** The row this entry points to. */
  get row(): T {
    check(this.itr >= 0, "cursor is past the last entry");
    return this.owner.get(this.primary, "index entry without its row");
  }

  /** Move to the next entry. */
  next(): void {
    check(this.itr >= 0, "cursor is past the last entry");
    const t = this.owner;
    this.itr = env.db_idx64_next(this.itr, SCRATCH + 8);
    if (this.itr < 0) return;
    this.primary = load<u64>(SCRATCH + 8);
    env.db_idx64_find_primary(t.code, t.scope, t.secondary, SCRATCH, this.primary);
    this.secondary = load<u64>(SCRATCH);
  }
}
