// A test contract of the SDK's table API: one table with four secondary indexes (u64,
// double, checksum256, u128), keys from availablePrimaryKey, walks forwards and backwards.
// Written by hand (no transform annotations), as a contract without them is written.
import {
  Datastream, KeyType, Row, SecondaryKey, Table, check, n, receiver, setReturnValue,
} from "sdk";

class Post extends Row {
  id: u64 = 0;
  owner: u64 = 0;
  score: f64 = 0;
  hash: Uint8Array = new Uint8Array(32);
  lo: u64 = 0; // the u128 "big", low half first as its bytes are
  hi: u64 = 0;

  primaryKey(): u64 {
    return this.id;
  }
  secondaryKeys(): SecondaryKey[] {
    return [
      SecondaryKey.u64(this.owner),
      SecondaryKey.double(this.score),
      SecondaryKey.checksum256(this.hash),
      SecondaryKey.u128(this.hi, this.lo),
    ];
  }
  write(ds: Datastream): void {
    ds.writeU64(this.id).writeName(this.owner).writeU64(reinterpret<u64>(this.score));
    ds.writeChecksum256(this.hash).writeU64(this.lo).writeU64(this.hi);
  }
  read(ds: Datastream): void {
    this.id = ds.readU64();
    this.owner = ds.readName();
    this.score = reinterpret<f64>(ds.readU64());
    this.hash = ds.readChecksum256();
    this.lo = ds.readU64();
    this.hi = ds.readU64();
  }
}

function posts(): Table<Post> {
  return new Table<Post>(receiver(), receiver(), n("posts"))
    .index(n("byowner"))
    .index(n("byscore"), KeyType.Double)
    .index(n("byhash"), KeyType.Checksum256)
    .index(n("bybig"), KeyType.U128);
}

function list(which: u8, arg: u64): void {
  const ids = new Array<u64>();
  const t = posts();
  if (which == 0) {
    for (let c = t.end(); c.previous(); ) ids.push(c.row.id);
  } else if (which == 1) {
    for (let c = t.byIndex(1).end(); c.previous(); ) ids.push(c.primary);
  } else if (which == 2) {
    for (let c = t.byIndex(2).begin(); c.valid; c.next()) ids.push(c.primary);
  } else if (which == 3) {
    for (let c = t.byIndex(3).begin(); c.valid; c.next()) ids.push(c.row.id);
  } else if (which == 4) {
    for (let c = t.upperBound(arg); c.valid; c.next()) ids.push(c.row.id);
  } else if (which == 5) {
    for (let c = t.bySecondary().lowerBound(arg); c.valid && c.secondary == arg; c.next()) {
      ids.push(c.primary);
    }
  } else if (which == 6) {
    const c = t.byIndex(1).upperBoundKey(SecondaryKey.double(reinterpret<f64>(arg)));
    if (c.valid) ids.push(c.primary);
  } else {
    check(false, "no such list");
  }
  const ds = new Datastream().writeVarUint32(<u32>ids.length);
  for (let i = 0; i < ids.length; i++) ds.writeU64(ids[i]);
  setReturnValue(ds.toBytes());
}

export function apply(receiver_: u64, code: u64, action: u64): void {
  const ds = Datastream.fromActionData();
  if (action == n("add")) {
    const post = new Post();
    post.owner = ds.readName();
    post.score = reinterpret<f64>(ds.readU64());
    post.hash = ds.readChecksum256();
    post.lo = ds.readU64();
    post.hi = ds.readU64();
    ds.end();
    const t = posts();
    post.id = t.availablePrimaryKey();
    t.store(post, receiver_);
    setReturnValue(new Datastream().writeU64(post.id).toBytes());
  } else if (action == n("setscore")) {
    const id = ds.readU64();
    const score = reinterpret<f64>(ds.readU64());
    ds.end();
    const t = posts();
    const post = t.get(id);
    post.score = score;
    t.update(post);
  } else if (action == n("rm")) {
    const id = ds.readU64();
    ds.end();
    posts().erase(id);
  } else if (action == n("list")) {
    const which = ds.readU8();
    const arg = ds.readU64();
    ds.end();
    list(which, arg);
  } else {
    check(false, "unknown action");
  }
}
