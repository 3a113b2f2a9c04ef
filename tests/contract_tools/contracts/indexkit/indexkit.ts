// A test contract of the annotations alone (no abi.json, no hand-written serializer or
// Table.index call): one table with a u64, a u128, a checksum256 and a double secondary
// index, and fields of the ABI's 128-bit, f64 and time types.
import {
  BlockTimestamp, Checksum256, I128, Name, Table, TimePoint, TimePointSec, U128, receiver, n,
} from "sdk";

@table("items")
class Item {
  @primary id: u64 = 0;
  @secondary("byowner", "u64", "byowner") owner: Name = 0;
  @secondary("bybig", "u128", "bybig") big: U128 = new U128();
  @secondary("byhash", "checksum256", "byhash") hash: Checksum256 = new Uint8Array(32);
  @secondary("byscore", "double", "byscore") score: f64 = 0;
  delta: I128 = new I128();
  at: TimePoint = new TimePoint();
  day: TimePointSec = new TimePointSec();
  slot: BlockTimestamp = new BlockTimestamp();
}

function items(): Table<Item> {
  return new Table<Item>(receiver(), receiver(), n("items"));
}

@contract
class IndexKit {
  @action
  add(item: Item): void {
    items().store(item, receiver());
  }

  @action("setscore")
  setScore(id: u64, score: f64): void {
    const t = items();
    const row = t.get(id);
    row.score = score;
    t.update(row);
  }

  @action
  rm(id: u64): void {
    items().erase(id);
  }

  /** The ids in index `which`'s order (0 owner, 1 big, 2 hash, 3 score). */
  @action({ readOnly: true })
  walk(which: i32): Array<u64> {
    const ids = new Array<u64>();
    for (let c = items().byIndex(which).begin(); c.valid; c.next()) ids.push(c.primary);
    return ids;
  }

  @readonly
  @action
  get(id: u64): Item {
    return items().get(id);
  }
}
