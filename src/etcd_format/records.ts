/**
 * etcd's records as plain objects, and their encodings in the backend's buckets:
 * mvccpb.KeyValue (key bucket), leasepb.Lease (lease bucket), membership.Member as JSON
 * (members bucket), etcdserverpb.AlarmMember (alarm bucket keys), authpb.User and authpb.Role.
 * 64-bit ids are bigints (etcd uses all 64 bits); revisions, versions and TTLs are numbers.
 */

import {
  asInt64,
  asSafeNumber,
  expectBytes,
  expectVarint,
  ProtoFieldError,
  ProtoFieldWriter,
  protoFields,
} from "./proto_fields.js";

const EMPTY: Uint8Array = new Uint8Array(0);

/** mvccpb.KeyValue. */
export interface EtcdKeyValue {
  readonly key: Uint8Array;
  readonly createRevision: number;
  readonly modRevision: number;
  readonly version: number;
  readonly value: Uint8Array;
  /** Lease id, 0n for none. */
  readonly lease: bigint;
}

/** One entry of the `key` bucket: a put of kv at revision main_sub, or a deletion of kv.key. */
export interface EtcdRevisionRecord {
  readonly main: number;
  readonly sub: number;
  readonly tombstone: boolean;
  /** For a tombstone etcd stores only the key (other fields zero). */
  readonly kv: EtcdKeyValue;
}

/** leasepb.Lease. */
export interface EtcdLease {
  readonly id: bigint;
  readonly ttl: number;
  /** Checkpointed remaining TTL (0 when never checkpointed). */
  readonly remainingTtl: number;
}

/** membership.Member, as etcd 3.4 stores it (JSON). */
export interface EtcdMember {
  readonly id: bigint;
  readonly name: string;
  readonly peerURLs: readonly string[];
  readonly clientURLs: readonly string[];
  readonly isLearner: boolean;
}

/** etcdserverpb.AlarmMember: alarm 1 is NOSPACE, 2 is CORRUPT. */
export interface EtcdAlarm {
  readonly memberId: bigint;
  readonly alarm: number;
}

/** authpb.Permission: permType 0 READ, 1 WRITE, 2 READWRITE. */
export interface EtcdPermission {
  readonly permType: number;
  readonly key: Uint8Array;
  readonly rangeEnd: Uint8Array;
}

/** authpb.User (password is the bcrypt hash etcd stores). */
export interface EtcdUser {
  readonly name: Uint8Array;
  readonly password: Uint8Array;
  readonly roles: readonly string[];
  /** authpb.UserAddOptions; etcd 3.4 stores it present (even when empty) for users added through the API. */
  readonly options: { readonly noPassword: boolean } | undefined;
}

/** authpb.Role. */
export interface EtcdRole {
  readonly name: Uint8Array;
  readonly permissions: readonly EtcdPermission[];
}

export function encodeKeyValue(kv: EtcdKeyValue): Buffer {
  return new ProtoFieldWriter()
    .bytesField(1, kv.key)
    .uint(2, kv.createRevision)
    .uint(3, kv.modRevision)
    .uint(4, kv.version)
    .bytesField(5, kv.value)
    .uint(6, kv.lease)
    .finish();
}

export function decodeKeyValue(buf: Uint8Array): EtcdKeyValue {
  let key = EMPTY;
  let value = EMPTY;
  let createRevision = 0;
  let modRevision = 0;
  let version = 0;
  let lease = 0n;
  for (const f of protoFields(buf)) {
    switch (f.field) {
      case 1: key = expectBytes(f, "KeyValue.key"); break;
      case 2: createRevision = asSafeNumber(expectVarint(f, "KeyValue.create_revision"), "create_revision"); break;
      case 3: modRevision = asSafeNumber(expectVarint(f, "KeyValue.mod_revision"), "mod_revision"); break;
      case 4: version = asSafeNumber(expectVarint(f, "KeyValue.version"), "version"); break;
      case 5: value = expectBytes(f, "KeyValue.value"); break;
      case 6: lease = asInt64(expectVarint(f, "KeyValue.lease")); break;
    }
  }
  return { key, createRevision, modRevision, version, value, lease };
}

export function encodeLease(l: EtcdLease): Buffer {
  return new ProtoFieldWriter().uint(1, l.id).uint(2, l.ttl).uint(3, l.remainingTtl).finish();
}

export function decodeLease(buf: Uint8Array): EtcdLease {
  let id = 0n;
  let ttl = 0;
  let remainingTtl = 0;
  for (const f of protoFields(buf)) {
    if (f.field === 1) id = asInt64(expectVarint(f, "Lease.ID"));
    else if (f.field === 2) ttl = asSafeNumber(expectVarint(f, "Lease.TTL"), "TTL");
    else if (f.field === 3) remainingTtl = asSafeNumber(expectVarint(f, "Lease.RemainingTTL"), "RemainingTTL");
  }
  return { id, ttl, remainingTtl };
}

/** The lease bucket's key: the id as 8-byte big-endian int64. */
export function leaseKey(id: bigint): Buffer {
  const b = Buffer.alloc(8);
  b.writeBigInt64BE(asInt64(BigInt.asUintN(64, id)), 0);
  return b;
}

export function encodeAlarm(a: EtcdAlarm): Buffer {
  return new ProtoFieldWriter().uint(1, a.memberId).uint(2, a.alarm).finish();
}

export function decodeAlarm(buf: Uint8Array): EtcdAlarm {
  let memberId = 0n;
  let alarm = 0;
  for (const f of protoFields(buf)) {
    if (f.field === 1) memberId = expectVarint(f, "AlarmMember.MemberID");
    else if (f.field === 2) alarm = asSafeNumber(expectVarint(f, "AlarmMember.Alarm"), "alarm");
  }
  return { memberId, alarm };
}

export function encodeUser(u: EtcdUser): Buffer {
  const w = new ProtoFieldWriter().bytesField(1, u.name).bytesField(2, u.password);
  for (const r of u.roles) w.bytesField(3, r, true);
  if (u.options) w.bytesField(4, new ProtoFieldWriter().uint(1, u.options.noPassword).finish(), true);
  return w.finish();
}

export function decodeUser(buf: Uint8Array): EtcdUser {
  let name = EMPTY;
  let password = EMPTY;
  const roles: string[] = [];
  let options: { noPassword: boolean } | undefined;
  for (const f of protoFields(buf)) {
    if (f.field === 1) name = expectBytes(f, "User.name");
    else if (f.field === 2) password = expectBytes(f, "User.password");
    else if (f.field === 3) roles.push(Buffer.from(expectBytes(f, "User.roles")).toString());
    else if (f.field === 4) {
      let noPassword = false;
      for (const o of protoFields(expectBytes(f, "User.options"))) if (o.field === 1) noPassword = expectVarint(o, "UserAddOptions.no_password") !== 0n;
      options = { noPassword };
    }
  }
  return { name, password, roles, options };
}

export function encodeRole(r: EtcdRole): Buffer {
  const w = new ProtoFieldWriter().bytesField(1, r.name);
  for (const p of r.permissions) {
    w.bytesField(2, new ProtoFieldWriter().uint(1, p.permType).bytesField(2, p.key).bytesField(3, p.rangeEnd).finish(), true);
  }
  return w.finish();
}

export function decodeRole(buf: Uint8Array): EtcdRole {
  let name = EMPTY;
  const permissions: EtcdPermission[] = [];
  for (const f of protoFields(buf)) {
    if (f.field === 1) name = expectBytes(f, "Role.name");
    else if (f.field === 2) {
      let permType = 0;
      let key = EMPTY;
      let rangeEnd = EMPTY;
      for (const p of protoFields(expectBytes(f, "Role.keyPermission"))) {
        if (p.field === 1) permType = asSafeNumber(expectVarint(p, "Permission.permType"), "permType");
        else if (p.field === 2) key = expectBytes(p, "Permission.key");
        else if (p.field === 3) rangeEnd = expectBytes(p, "Permission.range_end");
      }
      permissions.push({ permType, key, rangeEnd });
    }
  }
  return { name, permissions };
}

/** The members bucket's key: the id in lower-case hex without padding (types.ID.String()). */
export function memberKey(id: bigint): string {
  return BigInt.asUintN(64, id).toString(16);
}

/**
 * A member as etcd 3.4's json.Marshal writes it: id as a JSON number (all 64 bits), then the
 * embedded RaftAttributes (peerURLs, isLearner omitted when false) and Attributes (name and
 * clientURLs, both omitted when empty).
 */
export function encodeMember(m: EtcdMember): Buffer {
  let s = `{"id":${BigInt.asUintN(64, m.id).toString()},"peerURLs":${JSON.stringify(m.peerURLs)}`;
  if (m.isLearner) s += `,"isLearner":true`;
  if (m.name !== "") s += `,"name":${JSON.stringify(m.name)}`;
  if (m.clientURLs.length > 0) s += `,"clientURLs":${JSON.stringify(m.clientURLs)}`;
  return Buffer.from(s + "}");
}

export function decodeMember(buf: Uint8Array): EtcdMember {
  const text = Buffer.from(buf).toString();
  // JSON.parse would round a 64-bit id to a double: take the digits as written first. etcd
  // writes the id first; anchoring there keeps an "id" inside a name or URL from being taken.
  const idMatch = /^\s*\{\s*"id"\s*:\s*(\d+)/.exec(text);
  if (!idMatch) throw new ProtoFieldError(`member JSON without a numeric "id": ${text.slice(0, 200)}`);
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    throw new ProtoFieldError(`member JSON does not parse: ${(err as Error).message}`);
  }
  if (typeof parsed !== "object" || parsed === null) throw new ProtoFieldError("member JSON is not an object");
  const o = parsed as Record<string, unknown>;
  const strings = (v: unknown, what: string): string[] => {
    if (v === undefined || v === null) return [];
    if (!Array.isArray(v) || !v.every((x) => typeof x === "string")) throw new ProtoFieldError(`member ${what} is not a list of strings`);
    return v as string[];
  };
  const id = BigInt(idMatch[1]!);
  if (id > (1n << 64n) - 1n) throw new ProtoFieldError(`member id ${id} exceeds 64 bits`);
  return {
    id,
    name: typeof o["name"] === "string" ? o["name"] : "",
    peerURLs: strings(o["peerURLs"], "peerURLs"),
    clientURLs: strings(o["clientURLs"], "clientURLs"),
    isLearner: o["isLearner"] === true,
  };
}
