// A consortium's asset registry: registrars (appointed by the admin) register assets with an
// owner, a URI and a content hash; owners transfer them; registrars attest to them. Every
// change is an event, so an asset's provenance is the stream of its events.
//
// Tables: `config` (one row, key 0: the admin), `roles` (key = registrar), `assets` (key =
// asset id; secondary index `assets.owner` by owner). Storage payer: the admin pays for
// config and roles, the registering registrar for an asset's row and index entry.
import {
  Datastream, Row, Table,
  check, currentTime, emitEvent, isAccount, n, receiver, requireAuth, setReturnValue,
} from "sdk";

const MAX_TEXT_BYTES = 256;
const MAX_LISTED = 100; // assets one `assetsof` returns, so a read-only call stays bounded

class Config extends Row {
  constructor(public admin: u64 = 0) {
    super();
  }
  primaryKey(): u64 {
    return 0;
  }
  write(ds: Datastream): void {
    ds.writeName(this.admin);
  }
  read(ds: Datastream): void {
    this.admin = ds.readName();
  }
}

class Role extends Row {
  constructor(public account: u64 = 0, public since: i64 = 0) {
    super();
  }
  primaryKey(): u64 {
    return this.account;
  }
  write(ds: Datastream): void {
    ds.writeName(this.account).writeI64(this.since);
  }
  read(ds: Datastream): void {
    this.account = ds.readName();
    this.since = ds.readI64();
  }
}

class AssetRecord extends Row {
  constructor(
    public id: u64 = 0,
    public owner: u64 = 0,
    public registrar: u64 = 0,
    public uri: string = "",
    public hash: Uint8Array = new Uint8Array(32),
    public registered: i64 = 0,
    public attestations: u32 = 0,
  ) {
    super();
  }
  primaryKey(): u64 {
    return this.id;
  }
  secondaryKey(): u64 {
    return this.owner;
  }
  write(ds: Datastream): void {
    ds.writeU64(this.id).writeName(this.owner).writeName(this.registrar).writeString(this.uri);
    ds.writeChecksum256(this.hash).writeI64(this.registered).writeU32(this.attestations);
  }
  read(ds: Datastream): void {
    this.id = ds.readU64();
    this.owner = ds.readName();
    this.registrar = ds.readName();
    this.uri = ds.readString();
    this.hash = ds.readChecksum256();
    this.registered = ds.readI64();
    this.attestations = ds.readU32();
  }
}

function config(): Table<Config> {
  return new Table<Config>(receiver(), receiver(), n("config"));
}

function roles(): Table<Role> {
  return new Table<Role>(receiver(), receiver(), n("roles"));
}

function assets(): Table<AssetRecord> {
  return new Table<AssetRecord>(receiver(), receiver(), n("assets"), n("assets.owner"));
}

function requireAdmin(): u64 {
  const admin = config().get(0, "registry is not initialized").admin;
  requireAuth(admin);
  return admin;
}

function requireRegistrar(registrar: u64): void {
  requireAuth(registrar);
  check(roles().has(registrar), "not a registrar");
}

function init(admin: u64): void {
  requireAuth(receiver());
  check(isAccount(admin), "admin account does not exist");
  const cfg = config();
  check(!cfg.has(0), "registry is already initialized");
  cfg.store(new Config(admin), receiver());
}

function addRegistrar(account: u64): void {
  const admin = requireAdmin();
  check(isAccount(account), "account does not exist");
  const table = roles();
  check(!table.has(account), "already a registrar");
  table.store(new Role(account, currentTime()), admin);
  emitEvent(n("roleadded"), new Datastream().writeName(account).toBytes());
}

function rmRegistrar(account: u64): void {
  requireAdmin();
  const table = roles();
  check(table.has(account), "not a registrar");
  table.erase(account);
  emitEvent(n("roleremoved"), new Datastream().writeName(account).toBytes());
}

function register(registrar: u64, id: u64, owner: u64, uri: string, hash: Uint8Array): void {
  requireRegistrar(registrar);
  check(isAccount(owner), "owner account does not exist");
  check(String.UTF8.byteLength(uri) <= MAX_TEXT_BYTES, "uri has more than 256 bytes");
  const table = assets();
  check(!table.has(id), "asset id already registered");
  table.store(new AssetRecord(id, owner, registrar, uri, hash, currentTime(), 0), registrar);
  emitEvent(
    n("registered"),
    new Datastream()
      .writeName(registrar).writeU64(id).writeName(owner).writeString(uri).writeChecksum256(hash)
      .toBytes(),
  );
}

function transfer(id: u64, from: u64, to: u64): void {
  requireAuth(from);
  check(isAccount(to), "to account does not exist");
  const table = assets();
  const asset = table.get(id, "no such asset");
  check(asset.owner == from, "from does not own the asset");
  check(from != to, "cannot transfer to self");
  asset.owner = to;
  table.update(asset);
  emitEvent(n("transferred"), new Datastream().writeU64(id).writeName(from).writeName(to).toBytes());
}

function attest(id: u64, registrar: u64, note: string): void {
  requireRegistrar(registrar);
  check(String.UTF8.byteLength(note) <= MAX_TEXT_BYTES, "note has more than 256 bytes");
  const table = assets();
  const asset = table.get(id, "no such asset");
  asset.attestations += 1;
  table.update(asset);
  emitEvent(n("attested"), new Datastream().writeU64(id).writeName(registrar).writeString(note).toBytes());
}

function ownerOf(id: u64): void {
  const asset = assets().get(id, "no such asset");
  setReturnValue(new Datastream().writeName(asset.owner).toBytes());
}

function assetsOf(owner: u64): void {
  const ids = new Array<u64>();
  const index = assets().bySecondary();
  for (let c = index.lowerBound(owner); c.valid && c.secondary == owner; c.next()) {
    if (ids.length == MAX_LISTED) break;
    ids.push(c.primary);
  }
  const ds = new Datastream().writeVarUint32(<u32>ids.length);
  for (let i = 0; i < ids.length; i++) ds.writeU64(ids[i]);
  setReturnValue(ds.toBytes());
}

export function apply(receiver: u64, code: u64, action: u64): void {
  const ds = Datastream.fromActionData();
  if (action == n("init")) {
    const admin = ds.readName();
    ds.end();
    init(admin);
  } else if (action == n("addregistrar")) {
    const account = ds.readName();
    ds.end();
    addRegistrar(account);
  } else if (action == n("rmregistrar")) {
    const account = ds.readName();
    ds.end();
    rmRegistrar(account);
  } else if (action == n("register")) {
    const registrar = ds.readName();
    const id = ds.readU64();
    const owner = ds.readName();
    const uri = ds.readString();
    const hash = ds.readChecksum256();
    ds.end();
    register(registrar, id, owner, uri, hash);
  } else if (action == n("transfer")) {
    const id = ds.readU64();
    const from = ds.readName();
    const to = ds.readName();
    ds.end();
    transfer(id, from, to);
  } else if (action == n("attest")) {
    const id = ds.readU64();
    const registrar = ds.readName();
    const note = ds.readString();
    ds.end();
    attest(id, registrar, note);
  } else if (action == n("ownerof")) {
    const id = ds.readU64();
    ds.end();
    ownerOf(id);
  } else if (action == n("assetsof")) {
    const owner = ds.readName();
    ds.end();
    assetsOf(owner);
  } else {
    check(false, "unknown action");
  }
}
