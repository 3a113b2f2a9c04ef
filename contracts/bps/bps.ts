// BPS: the on-chain half of the topic publish/subscribe service for tenants. Messages never
// come here: the chain keeps who may broker, tenants and their members' keys, topics and
// which broker serves each partition, access control entries, and per-partition anchors
// (offset range, Merkle root of the messages, hash chain, the broker's signature).
//
// Tables (scope `bps`, the contract, unless said otherwise; the payer in brackets):
// - `config`, key 0 [bps]: admin (the governance account that approves brokers and tenants),
//   next_topic (starts at 1), next_anchor and next_acl (start at 0).
// - `brokers`, key = account [admin]: url (the sidecar's endpoint), key (a packed K1 public
//   key, 34 bytes: type 0 + 33-byte compressed key, that anchors are signed with), since.
// - `tenants`, key = tenant [admin]: owner, since.
// - `members`, scope = tenant, key = account [owner; the member once it sets its enckey]:
//   enckey (empty or a 33-byte key for end-to-end encryption), since.
// - `topics`, scope = tenant, key = topic name [owner]: id (global, from next_topic),
//   partitions (1..64), replicas (1..5), retention_s, since.
// - `parts`, scope = the topic's id (a u64), key = partition [owner]: broker (the broker
//   serving and anchoring it), anchors (count), last (last anchored offset, 0 = none; offsets
//   start at 1), head (digest of the last anchor, zero before the first).
// - `acls`, scope = tenant, key = id from next_acl [owner]: principal (secondary index
//   `byprincipal`, table `acls.princ`), pattern (a topic name, a prefix ending in `*`, or
//   `*`), rights (1 produce | 2 consume | 4 admin), expires (microseconds, 0 = never).
// - `anchors`, key = id from next_anchor [broker]: topic (the id), place (topic id << 44 |
//   partition << 38 | id: the secondary index `bytopic`, table `anchor.topic`; every key
//   differs, so the index pages by key, and one topic's or one partition's anchors are one
//   key range, oldest first), partition, first, last, root, prev, broker, signature (packed
//   K1, 66 bytes), block, time. Topic ids stop at 2^20 - 1, anchor ids at 2^38 - 1.
// - `wraps`, scope = the topic's id (a u64), key = account [owner]: the topic's end-to-end
//   key wrapped for that account's enckey (ECIES, bps/crypto.py; at most 128 bytes), its
//   version (never goes back), since.
//
// An anchor's digest, which the broker signs and which becomes the partition's head, is the
// sha256 of these 92 bytes (integers little-endian):
//   topic id u64 (8) | partition u32 (4) | first u64 (8) | last u64 (8) | root (32) | prev (32)
//
// Actions (who signs) and the event each emits: init (bps; initialized), regbroker (admin;
// registered), rmbroker (admin; unregistered), addtenant (admin; tenantadded), addmember
// (owner; memberadded), rmmember (owner; removed, with the number of the member's ACLs it
// erased), setenckey (the member; enckeyset), createtopic (owner; topiccreated: partition p
// goes to the p-th registered broker in key order, round robin), assign (the registered broker
// taking the partition over; assigned), grant (owner; granted), revoke (owner; revoked),
// anchor (the partition's broker; anchored), wrapkey (owner; keywrapped: the account must be
// a member with an enckey, or the owner). An ACL names any account, but counts only while
// that account is a member. The read-only canaccess answers (false, never an abort, for an
// unknown tenant or topic): the tenant's owner holds every right on its topics; a member holds
// the union of the rights of its unexpired ACLs (expires > currentTime(), or 0) whose pattern
// matches the topic; anyone else holds none.
import {
  Checksum256, Datastream, Name, Table,
  assertRecoverKey, blockNum, check, currentTime, isAccount, n, nameToString, receiver,
  requireAuth, sha256,
} from "sdk";

const MAX_URL_BYTES = 256;
const BROKER_KEY_BYTES = 34; // type byte 0 (K1) + 33-byte compressed secp256k1 key
const ENC_KEY_BYTES = 33;
const SIGNATURE_BYTES = 66; // type byte 0 + header (31 + recovery id) + r + s
const MAX_PARTITIONS: u32 = 64;
const MAX_REPLICAS: u32 = 5;
const MAX_PATTERN_BYTES = 13;
const MAX_ANCHOR_SPAN: u64 = 1_000_000;
const MAX_TOPIC_ID: u64 = (1 << 20) - 1;
const MAX_ANCHOR_ID: u64 = (1 << 38) - 1;

// An anchor's key in `bytopic`: topic, partition, id (see the table's description above).
function anchorPlace(topic: u64, partition: u32, id: u64): u64 {
  return (topic << 44) | (<u64>partition << 38) | id;
}
const ALL_RIGHTS: u8 = 7;
const MAX_WRAPPED_BYTES = 128;

@table("config")
class Config {
  constructor(
    public admin: Name = 0,
    public nextTopic: u64 = 1,
    public nextAnchor: u64 = 0,
    public nextAcl: u64 = 0,
  ) {}

  @primary get key(): u64 {
    return 0;
  }
}

@table("brokers")
class Broker {
  constructor(
    public account: Name = 0,
    public url: string = "",
    public key: Uint8Array = new Uint8Array(0),
    public since: i64 = 0,
  ) {}

  @primary get primaryKeyValue(): u64 {
    return this.account;
  }
}

@table("tenants")
class Tenant {
  constructor(public tenant: Name = 0, public owner: Name = 0, public since: i64 = 0) {}

  @primary get key(): u64 {
    return this.tenant;
  }
}

@table("members")
class Member {
  constructor(
    public account: Name = 0,
    public enckey: Uint8Array = new Uint8Array(0),
    public since: i64 = 0,
  ) {}

  @primary get key(): u64 {
    return this.account;
  }
}

@table("topics")
class Topic {
  constructor(
    public topic: Name = 0,
    public id: u64 = 0,
    public partitions: u32 = 0,
    public replicas: u32 = 0,
    public retentionS: u32 = 0,
    public since: i64 = 0,
  ) {}

  @primary get key(): u64 {
    return this.topic;
  }
}

@table("parts")
class Part {
  constructor(
    public partition: u32 = 0,
    public broker: Name = 0,
    public anchors: u64 = 0,
    public last: u64 = 0,
    public head: Checksum256 = new Uint8Array(32),
  ) {}

  @primary get key(): u64 {
    return <u64>this.partition;
  }
}

@table("acls")
class Acl {
  id: u64 = 0;
  @secondary("byprincipal", "u64", "acls.princ") principal: Name = 0;
  pattern: string = "";
  rights: u8 = 0;
  expires: i64 = 0;

  @primary get key(): u64 {
    return this.id;
  }
}

@table("anchors")
class AnchorRecord {
  id: u64 = 0;
  topic: u64 = 0;
  @secondary("bytopic", "u64", "anchor.topic") place: u64 = 0;
  partition: u32 = 0;
  first: u64 = 0;
  last: u64 = 0;
  root: Checksum256 = new Uint8Array(32);
  prev: Checksum256 = new Uint8Array(32);
  broker: Name = 0;
  signature: Uint8Array = new Uint8Array(0);
  block: u32 = 0;
  time: i64 = 0;

  @primary get key(): u64 {
    return this.id;
  }
}

@table("wraps")
class Wrap {
  constructor(
    public account: Name = 0,
    public version: u32 = 0,
    public wrapped: Uint8Array = new Uint8Array(0),
    public since: i64 = 0,
  ) {}

  @primary get key(): u64 {
    return this.account;
  }
}

@event("initialized")
class Initialized {
  constructor(public admin: Name = 0) {}
}

@event("registered")
class Registered {
  constructor(public broker: Name = 0, public url: string = "", public key: Uint8Array = new Uint8Array(0)) {}
}

@event("unregistered")
class Unregistered {
  constructor(public broker: Name = 0) {}
}

@event("tenantadded")
class TenantAdded {
  constructor(public tenant: Name = 0, public owner: Name = 0) {}
}

@event("memberadded")
class MemberAdded {
  constructor(public tenant: Name = 0, public account: Name = 0, public enckey: Uint8Array = new Uint8Array(0)) {}
}

@event("removed")
class MemberRemoved {
  constructor(public tenant: Name = 0, public account: Name = 0, public acls: u32 = 0) {}
}

@event("enckeyset")
class EnckeySet {
  constructor(public tenant: Name = 0, public account: Name = 0, public enckey: Uint8Array = new Uint8Array(0)) {}
}

@event("topiccreated")
class TopicCreated {
  constructor(
    public tenant: Name = 0,
    public topic: Name = 0,
    public id: u64 = 0,
    public partitions: u32 = 0,
    public replicas: u32 = 0,
    public retentionS: u32 = 0,
  ) {}
}

@event("assigned")
class Assigned {
  constructor(
    public tenant: Name = 0,
    public topic: Name = 0,
    public id: u64 = 0,
    public partition: u32 = 0,
    public broker: Name = 0,
    public previous: Name = 0,
  ) {}
}

@event("granted")
class Granted {
  constructor(
    public tenant: Name = 0,
    public id: u64 = 0,
    public principal: Name = 0,
    public pattern: string = "",
    public rights: u8 = 0,
    public expires: i64 = 0,
  ) {}
}

@event("revoked")
class Revoked {
  constructor(public tenant: Name = 0, public id: u64 = 0, public principal: Name = 0, public pattern: string = "") {}
}

@event("anchored")
class Anchored {
  constructor(
    public topic: u64 = 0,
    public partition: u32 = 0,
    public first: u64 = 0,
    public last: u64 = 0,
    public root: Checksum256 = new Uint8Array(32),
    public id: u64 = 0,
  ) {}
}

@event("keywrapped")
class KeyWrapped {
  constructor(
    public tenant: Name = 0,
    public topic: Name = 0,
    public id: u64 = 0,
    public account: Name = 0,
    public version: u32 = 0,
  ) {}
}

function config(): Table<Config> {
  return new Table<Config>(receiver(), receiver(), n("config"));
}

function brokers(): Table<Broker> {
  return new Table<Broker>(receiver(), receiver(), n("brokers"));
}

function tenants(): Table<Tenant> {
  return new Table<Tenant>(receiver(), receiver(), n("tenants"));
}

function members(tenant: u64): Table<Member> {
  return new Table<Member>(receiver(), tenant, n("members"));
}

function topics(tenant: u64): Table<Topic> {
  return new Table<Topic>(receiver(), tenant, n("topics"));
}

function parts(topicId: u64): Table<Part> {
  return new Table<Part>(receiver(), topicId, n("parts"));
}

function acls(tenant: u64): Table<Acl> {
  return new Table<Acl>(receiver(), tenant, n("acls"), n("acls.princ"));
}

function wraps(topicId: u64): Table<Wrap> {
  return new Table<Wrap>(receiver(), topicId, n("wraps"));
}

function anchors(): Table<AnchorRecord> {
  return new Table<AnchorRecord>(receiver(), receiver(), n("anchors"), n("anchor.topic"));
}

function loadConfig(): Config {
  return config().get(0, "bps is not initialized");
}

function requireAdmin(): u64 {
  const admin = loadConfig().admin;
  requireAuth(admin);
  return admin;
}

/** The tenant's row, after checking that its owner signed. */
function requireOwner(tenant: u64): Tenant {
  const row = tenants().get(tenant, "no such tenant");
  requireAuth(row.owner);
  return row;
}

function findTopic(tenant: u64, topic: u64): Topic {
  tenants().get(tenant, "no such tenant");
  return topics(tenant).get(topic, "no such topic in the tenant");
}

function checkEncKey(enckey: Uint8Array): void {
  check(enckey.length == 0 || enckey.length == ENC_KEY_BYTES, "enckey must be empty or 33 bytes");
}

function isNameChar(c: i32): bool {
  return (c >= 0x61 && c <= 0x7a) || (c >= 0x31 && c <= 0x35) || c == 0x2e;
}

/** A topic name, a prefix of name characters ending in `*`, or `*` alone. */
function checkPattern(pattern: string): void {
  const bytes = String.UTF8.byteLength(pattern);
  check(bytes >= 1 && bytes <= MAX_PATTERN_BYTES, "pattern must have 1 to 13 bytes");
  const prefix = pattern.endsWith("*");
  const body = prefix ? pattern.substring(0, pattern.length - 1) : pattern;
  check(body.length <= 12, "pattern: a name has at most 12 characters");
  for (let i = 0; i < body.length; i++) {
    check(isNameChar(body.charCodeAt(i)), "pattern: only a-z, 1-5 and '.' before an optional trailing '*'");
  }
  if (!prefix) check(nameToString(n(body)) == body, "pattern: not a topic name");
}

function matches(pattern: string, topic: string): bool {
  if (pattern.endsWith("*")) return topic.startsWith(pattern.substring(0, pattern.length - 1));
  return pattern == topic;
}

/** The 92 bytes an anchor's digest hashes (layout at the top of this file). */
function anchorDigest(
  topicId: u64, partition: u32, first: u64, last: u64, root: Checksum256, prev: Checksum256,
): Uint8Array {
  const ds = new Datastream();
  ds.writeU64(topicId).writeU32(partition).writeU64(first).writeU64(last);
  ds.writeFixed(root).writeFixed(prev);
  return sha256(ds.toBytes());
}

function sameBytes(a: Uint8Array, b: Uint8Array): bool {
  if (a.length != b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] != b[i]) return false;
  return true;
}

@contract
class Bps {
  @action
  init(admin: Name): void {
    requireAuth(receiver());
    check(isAccount(admin), "admin account does not exist");
    const cfg = config();
    check(!cfg.has(0), "bps is already initialized");
    cfg.store(new Config(admin), receiver());
    new Initialized(admin).emit();
  }

  @action
  regbroker(broker: Name, url: string, key: Uint8Array): void {
    const admin = requireAdmin();
    check(isAccount(broker), "broker account does not exist");
    const urlBytes = String.UTF8.byteLength(url);
    check(urlBytes > 0 && urlBytes <= MAX_URL_BYTES, "url must have 1 to 256 bytes");
    check(key.length == BROKER_KEY_BYTES && key[0] == 0, "key must be a packed K1 key: 34 bytes, type 0");
    const table = brokers();
    const row = table.find(broker);
    if (row === null) table.store(new Broker(broker, url, key, currentTime()), admin);
    else {
      row.url = url;
      row.key = key;
      table.update(row);
    }
    new Registered(broker, url, key).emit();
  }

  @action
  rmbroker(broker: Name): void {
    requireAdmin();
    const table = brokers();
    check(table.has(broker), "not a registered broker");
    table.erase(broker);
    new Unregistered(broker).emit();
  }

  @action
  addtenant(tenant: Name, owner: Name): void {
    const admin = requireAdmin();
    check(tenant != 0, "tenant name is empty");
    check(isAccount(owner), "owner account does not exist");
    const table = tenants();
    check(!table.has(tenant), "tenant already exists");
    table.store(new Tenant(tenant, owner, currentTime()), admin);
    new TenantAdded(tenant, owner).emit();
  }

  @action
  addmember(tenant: Name, account: Name, enckey: Uint8Array): void {
    const owner = requireOwner(tenant).owner;
    check(isAccount(account), "member account does not exist");
    checkEncKey(enckey);
    const table = members(tenant);
    check(!table.has(account), "already a member");
    table.store(new Member(account, enckey, currentTime()), owner);
    new MemberAdded(tenant, account, enckey).emit();
  }

  @action
  rmmember(tenant: Name, account: Name): void {
    requireOwner(tenant);
    const table = members(tenant);
    check(table.has(account), "not a member");
    table.erase(account);
    const entries = acls(tenant);
    const ids = new Array<u64>();
    const index = entries.bySecondary();
    for (let c = index.lowerBound(account); c.valid && c.secondary == account; c.next()) {
      ids.push(c.primary);
    }
    for (let i = 0; i < ids.length; i++) entries.erase(ids[i]);
    new MemberRemoved(tenant, account, <u32>ids.length).emit();
  }

  @action
  setenckey(tenant: Name, account: Name, enckey: Uint8Array): void {
    requireAuth(account);
    tenants().get(tenant, "no such tenant");
    checkEncKey(enckey);
    const table = members(tenant);
    const row = table.get(account, "not a member");
    row.enckey = enckey;
    table.update(row, account); // the member pays for its row from now on: a key may grow it
    new EnckeySet(tenant, account, enckey).emit();
  }

  @action
  createtopic(tenant: Name, topic: Name, partitions: u32, replicas: u32, retentionS: u32): void {
    const owner = requireOwner(tenant).owner;
    check(topic != 0, "topic name is empty");
    check(partitions >= 1 && partitions <= MAX_PARTITIONS, "partitions must be 1 to 64");
    check(replicas >= 1 && replicas <= MAX_REPLICAS, "replicas must be 1 to 5");
    const table = topics(tenant);
    check(!table.has(topic), "topic already exists in the tenant");
    const serving = new Array<u64>();
    for (let c = brokers().begin(); c.valid; c.next()) serving.push(c.primary);
    check(serving.length > 0, "no broker is registered");
    const cfgTable = config();
    const cfg = cfgTable.get(0);
    const id = cfg.nextTopic;
    check(id <= MAX_TOPIC_ID, "no topic ids are left");
    cfg.nextTopic = id + 1;
    cfgTable.update(cfg);
    table.store(new Topic(topic, id, partitions, replicas, retentionS, currentTime()), owner);
    const rows = parts(id);
    for (let p: u32 = 0; p < partitions; p++) {
      rows.store(new Part(p, serving[<i32>(p % <u32>serving.length)]), owner);
    }
    new TopicCreated(tenant, topic, id, partitions, replicas, retentionS).emit();
  }

  @action
  assign(tenant: Name, topic: Name, partition: u32, broker: Name): void {
    requireAuth(broker);
    check(brokers().has(broker), "not a registered broker");
    const id = findTopic(tenant, topic).id;
    const rows = parts(id);
    const part = rows.get(<u64>partition, "no such partition");
    const previous = part.broker;
    part.broker = broker;
    rows.update(part);
    new Assigned(tenant, topic, id, partition, broker, previous).emit();
  }

  @action
  grant(tenant: Name, principal: Name, pattern: string, rights: u8, expires: i64): void {
    const owner = requireOwner(tenant).owner;
    check(isAccount(principal), "principal account does not exist");
    checkPattern(pattern);
    check(rights >= 1 && rights <= ALL_RIGHTS, "rights must be 1 to 7 (1 produce, 2 consume, 4 admin)");
    check(expires >= 0, "expires must be 0 (never) or a time in microseconds");
    const cfgTable = config();
    const cfg = cfgTable.get(0);
    const acl = new Acl();
    acl.id = cfg.nextAcl;
    acl.principal = principal;
    acl.pattern = pattern;
    acl.rights = rights;
    acl.expires = expires;
    cfg.nextAcl = acl.id + 1;
    cfgTable.update(cfg);
    acls(tenant).store(acl, owner);
    new Granted(tenant, acl.id, principal, pattern, rights, expires).emit();
  }

  @action
  revoke(tenant: Name, id: u64): void {
    requireOwner(tenant);
    const table = acls(tenant);
    const acl = table.get(id, "no such acl in the tenant");
    table.erase(id);
    new Revoked(tenant, id, acl.principal, acl.pattern).emit();
  }

  @action
  anchor(
    tenant: Name, topic: Name, partition: u32, first: u64, last: u64,
    root: Checksum256, prev: Checksum256, signature: Uint8Array,
  ): void {
    const id = findTopic(tenant, topic).id;
    const rows = parts(id);
    const part = rows.get(<u64>partition, "no such partition");
    requireAuth(part.broker);
    const broker = brokers().get(part.broker, "the partition's broker is not registered");
    check(first == part.last + 1, "first must be the partition's last anchored offset + 1");
    check(last >= first, "last must not be below first");
    check(last - first < MAX_ANCHOR_SPAN, "an anchor covers at most 1000000 offsets");
    check(sameBytes(prev, part.head), "prev is not the partition's head");
    check(signature.length == SIGNATURE_BYTES, "signature must be a packed K1 signature of 66 bytes");
    const digest = anchorDigest(id, partition, first, last, root, prev);
    assertRecoverKey(digest, signature, broker.key);
    const cfgTable = config();
    const cfg = cfgTable.get(0);
    const record = new AnchorRecord();
    check(cfg.nextAnchor <= MAX_ANCHOR_ID, "no anchor ids are left");
    record.id = cfg.nextAnchor;
    record.topic = id;
    record.place = anchorPlace(id, partition, record.id);
    record.partition = partition;
    record.first = first;
    record.last = last;
    record.root = root;
    record.prev = prev;
    record.broker = part.broker;
    record.signature = signature;
    record.block = blockNum();
    record.time = currentTime();
    cfg.nextAnchor = record.id + 1;
    cfgTable.update(cfg);
    anchors().store(record, part.broker);
    part.anchors += 1;
    part.last = last;
    part.head = digest;
    rows.update(part);
    new Anchored(id, partition, first, last, root, record.id).emit();
  }

  @action
  wrapkey(tenant: Name, topic: Name, account: Name, version: u32, wrapped: Uint8Array): void {
    const owner = requireOwner(tenant).owner;
    const id = findTopic(tenant, topic).id;
    if (account != owner) {
      const member = members(tenant).get(account, "not a member");
      check(member.enckey.length > 0, "the member has no enckey");
    }
    check(version >= 1, "version must be at least 1");
    check(wrapped.length >= 1 && wrapped.length <= MAX_WRAPPED_BYTES, "wrapped must have 1 to 128 bytes");
    const table = wraps(id);
    const row = table.find(account);
    if (row === null) table.store(new Wrap(account, version, wrapped, currentTime()), owner);
    else {
      check(version >= row.version, "a wrap's version never goes back");
      row.version = version;
      row.wrapped = wrapped;
      row.since = currentTime();
      table.update(row);
    }
    new KeyWrapped(tenant, topic, id, account, version).emit();
  }

  @readonly
  canaccess(tenant: Name, topic: Name, principal: Name, right: u8): bool {
    check(right >= 1 && right <= ALL_RIGHTS, "right must be 1 to 7 (1 produce, 2 consume, 4 admin)");
    const row = tenants().find(tenant);
    if (row === null || !topics(tenant).has(topic)) return false;
    if (principal == row.owner) return true;
    if (!members(tenant).has(principal)) return false;
    const name = nameToString(topic);
    const now = currentTime();
    let held: u8 = 0;
    const index = acls(tenant).bySecondary();
    for (let c = index.lowerBound(principal); c.valid && c.secondary == principal; c.next()) {
      const acl = c.row;
      if (acl.expires != 0 && acl.expires <= now) continue;
      if (matches(acl.pattern, name)) held |= acl.rights;
    }
    return (held & right) == right;
  }
}
