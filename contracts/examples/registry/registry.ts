// A consortium's asset registry: registrars (appointed by the admin) register assets with an
// owner, a URI and a content hash; owners transfer them; registrars attest to them. Every
// change is an event, so an asset's provenance is the stream of its events.
//
// Tables: `config` (one row, key 0: the admin), `roles` (key = registrar), `assets` (key =
// asset id; secondary index `byowner`, table `assets.owner`). Storage payer: the admin pays for
// config and roles, the registering registrar for an asset's row and index entry.
import {
  Checksum256, Name, Table,
  check, currentTime, isAccount, n, receiver, requireAuth,
} from "sdk";

const MAX_TEXT_BYTES = 256;
const MAX_LISTED = 100; // assets one `assetsof` returns, so a read-only call stays bounded

@table("config")
class Config {
  constructor(public admin: Name = 0) {}

  @primary get key(): u64 {
    return 0;
  }
}

@table("roles")
class Role {
  constructor(public account: Name = 0, public since: i64 = 0) {}

  @primary get key(): u64 {
    return this.account;
  }
}

@table("assets")
class AssetRecord {
  id: u64 = 0;
  @secondary("byowner", "u64", "assets.owner") owner: Name = 0;
  registrar: Name = 0;
  uri: string = "";
  hash: Checksum256 = new Uint8Array(32);
  registered: i64 = 0;
  attestations: u32 = 0;

  @primary get key(): u64 {
    return this.id;
  }
}

@event("roleadded")
class RoleAdded {
  constructor(public account: Name = 0) {}
}

@event("roleremoved")
class RoleRemoved {
  constructor(public account: Name = 0) {}
}

@event("registered")
class Registered {
  constructor(
    public registrar: Name = 0,
    public id: u64 = 0,
    public owner: Name = 0,
    public uri: string = "",
    public hash: Checksum256 = new Uint8Array(32),
  ) {}
}

@event("transferred")
class Transferred {
  constructor(public id: u64 = 0, public from: Name = 0, public to: Name = 0) {}
}

@event("attested")
class Attested {
  constructor(public id: u64 = 0, public registrar: Name = 0, public note: string = "") {}
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

@contract
class Registry {
  @action
  init(admin: Name): void {
    requireAuth(receiver());
    check(isAccount(admin), "admin account does not exist");
    const cfg = config();
    check(!cfg.has(0), "registry is already initialized");
    cfg.store(new Config(admin), receiver());
  }

  @action
  addRegistrar(account: Name): void {
    const admin = requireAdmin();
    check(isAccount(account), "account does not exist");
    const table = roles();
    check(!table.has(account), "already a registrar");
    table.store(new Role(account, currentTime()), admin);
    new RoleAdded(account).emit();
  }

  @action
  rmRegistrar(account: Name): void {
    requireAdmin();
    const table = roles();
    check(table.has(account), "not a registrar");
    table.erase(account);
    new RoleRemoved(account).emit();
  }

  @action
  register(registrar: Name, id: u64, owner: Name, uri: string, hash: Checksum256): void {
    requireRegistrar(registrar);
    check(isAccount(owner), "owner account does not exist");
    check(String.UTF8.byteLength(uri) <= MAX_TEXT_BYTES, "uri has more than 256 bytes");
    const table = assets();
    check(!table.has(id), "asset id already registered");
    const asset = new AssetRecord();
    asset.id = id;
    asset.owner = owner;
    asset.registrar = registrar;
    asset.uri = uri;
    asset.hash = hash;
    asset.registered = currentTime();
    table.store(asset, registrar);
    new Registered(registrar, id, owner, uri, hash).emit();
  }

  @action
  transfer(id: u64, from: Name, to: Name): void {
    requireAuth(from);
    check(isAccount(to), "to account does not exist");
    const table = assets();
    const asset = table.get(id, "no such asset");
    check(asset.owner == from, "from does not own the asset");
    check(from != to, "cannot transfer to self");
    asset.owner = to;
    table.update(asset);
    new Transferred(id, from, to).emit();
  }

  @action
  attest(id: u64, registrar: Name, note: string): void {
    requireRegistrar(registrar);
    check(String.UTF8.byteLength(note) <= MAX_TEXT_BYTES, "note has more than 256 bytes");
    const table = assets();
    const asset = table.get(id, "no such asset");
    asset.attestations += 1;
    table.update(asset);
    new Attested(id, registrar, note).emit();
  }

  @action({ readOnly: true })
  ownerOf(id: u64): Name {
    return assets().get(id, "no such asset").owner;
  }

  @readonly
  assetsOf(owner: Name): Array<u64> {
    const ids = new Array<u64>();
    const index = assets().bySecondary();
    for (let c = index.lowerBound(owner); c.valid && c.secondary == owner; c.next()) {
      if (ids.length == MAX_LISTED) break;
      ids.push(c.primary);
    }
    return ids;
  }
}
