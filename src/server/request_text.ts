/**
 * Requests as etcd 3.4 writes them into its "took too long" warnings: Go's compact protobuf text
 * (golang/protobuf's CompactTextString: `name:value ` per set field in declaration order, nested
 * messages as `name:<...> `, proto3 zero values left out, enums by name, bytes quoted with Go's
 * escapes), with etcd's redactions (etcdserverpb/raft_internal_stringer.go): a put's value and a
 * value compare's value as `value_size`, a lease id in hex, an authentication's token removed.
 * Operators grep these lines; the same text means the same grep works.
 *
 * Only for the warning path (a slow request): the reflection is loaded on first use.
 */
import protobuf from "protobufjs";
import { MEMBER_FILES, PROTO_DIR } from "../pb/protos.js";
import type { CompareInit, InternalRaftRequest, PutRequestInit, RequestOpInit, TxnRequestInit } from "../pb/member-types.js";

let root: protobuf.Root | undefined;

/** The protos with their field names as written (the text uses them; the decoded objects have them camelCased). */
function reflectedType(name: string): protobuf.Type {
  if (root === undefined) {
    const r = new protobuf.Root();
    r.resolvePath = (_origin, target) => (target.startsWith("/") ? target : PROTO_DIR + target);
    r.loadSync([...MEMBER_FILES], { keepCase: true });
    r.resolveAll();
    root = r;
  }
  return root.lookupType(name);
}

/** Go's writeString over bytes: \n \r \t \" \\ escaped, printable ASCII as is, any other byte as \ooo. */
export function goTextBytes(bytes: Uint8Array): string {
  let out = '"';
  for (const c of bytes) {
    if (c === 0x0a) out += "\\n";
    else if (c === 0x0d) out += "\\r";
    else if (c === 0x09) out += "\\t";
    else if (c === 0x22) out += '\\"';
    else if (c === 0x5c) out += "\\\\";
    else if (c >= 0x20 && c < 0x7f) out += String.fromCharCode(c);
    else out += "\\" + c.toString(8).padStart(3, "0");
  }
  return out + '"';
}

function isZero(v: unknown): boolean {
  if (v === 0 || v === 0n || v === false || v === "") return true;
  return v instanceof Uint8Array && v.byteLength === 0;
}

function scalarText(field: protobuf.Field, v: unknown): string {
  const t = field.resolvedType;
  if (t instanceof protobuf.Enum) return t.valuesById[Number(v)] ?? String(v);
  if (field.type === "bytes") return goTextBytes(v as Uint8Array);
  if (field.type === "string") return goTextBytes(Buffer.from(String(v), "utf8"));
  return String(v);
}

function valueText(field: protobuf.Field, v: unknown): string {
  const t = field.resolvedType;
  return t instanceof protobuf.Type ? `<${fieldsText(t, v as Record<string, unknown>)}>` : scalarText(field, v);
}

/** The compact text of a decoded message's fields (each followed by a space, as Go writes them). */
function fieldsText(type: protobuf.Type, msg: Record<string, unknown>): string {
  let out = "";
  for (const field of type.fieldsArray) {
    const v = msg[protobuf.util.camelCase(field.name)];
    if (field.repeated) {
      if (Array.isArray(v)) for (const el of v) out += `${field.name}:${valueText(field, el)} `;
      continue;
    }
    if (v === undefined || v === null) continue;
    // proto3: a zero scalar is not written, unless it is the set member of a oneof.
    if (field.partOf === null && !(field.resolvedType instanceof protobuf.Type) && isZero(v)) continue;
    out += `${field.name}:${valueText(field, v)} `;
  }
  return out;
}

/** Go's CompactTextString of a decoded message of `typeName` (e.g. "etcdserverpb.RangeRequest"). */
export function compactText(typeName: string, msg: object): string {
  return fieldsText(reflectedType(typeName), msg as Record<string, unknown>);
}

/** Fields of a redacted message (etcd's loggable types), zero values left out as Go's text does. */
function loggable(fields: ReadonlyArray<readonly [string, unknown]>): string {
  let out = "";
  for (const [name, v] of fields) {
    if (v === undefined || v === null || isZero(v)) continue;
    out += `${name}:${v instanceof Uint8Array ? goTextBytes(v) : String(v)} `;
  }
  return out;
}

function loggablePut(p: PutRequestInit): string {
  return loggable([
    ["key", p.key],
    ["value_size", p.value?.byteLength ?? 0],
    ["lease", p.lease],
    ["prev_kv", p.prevKv],
    ["ignore_value", p.ignoreValue],
    ["ignore_lease", p.ignoreLease],
  ]);
}

const COMPARE_RESULTS = ["EQUAL", "GREATER", "LESS", "NOT_EQUAL"];
const COMPARE_TARGETS = ["VERSION", "CREATE", "MOD", "VALUE", "LEASE"];

function compareText(c: CompareInit): string {
  if (c.value === undefined || c.value === null) return compactText("etcdserverpb.Compare", c);
  const result = c.result ?? 0;
  const target = c.target ?? 0;
  // etcd's loggableValueCompare: result, target, key, value_size, range_end.
  return loggable([
    ["result", result === 0 ? 0 : (COMPARE_RESULTS[result] ?? result)],
    ["target", target === 0 ? 0 : (COMPARE_TARGETS[target] ?? target)],
    ["key", c.key],
    ["value_size", c.value.byteLength],
    ["range_end", c.rangeEnd],
  ]);
}

function requestOpText(op: RequestOpInit): string {
  if (op.requestPut) return `request_put:<${loggablePut(op.requestPut)}>`;
  if (op.requestTxn) return `request_txn:<${loggableTxn(op.requestTxn)}>`;
  return compactText("etcdserverpb.RequestOp", op);
}

/** A txn as etcd's txnRequestStringer writes it (inside a raft request's text, and alone in a read-only txn's warning). */
export function loggableTxn(t: TxnRequestInit): string {
  const compare = (t.compare ?? []).map(compareText).join(" ");
  const success = (t.success ?? []).map(requestOpText).join(" ");
  const failure = (t.failure ?? []).map(requestOpText).join(" ");
  return `compare:<${compare}> success:<${success}> failure:<${failure}>`;
}

/** Go's %016x of a lease id (an int64). */
function leaseHex(id: number | bigint): string {
  return BigInt.asUintN(64, BigInt(id)).toString(16).padStart(16, "0");
}

/** A raft request as etcd's InternalRaftStringer writes it. */
export function raftRequestText(request: InternalRaftRequest): string {
  // etcetera proposes a request's id in the top-level ID (which etcd's apply reads first), etcd in
  // the header's: the text shows it where etcd's own request would have it (a publish, which etcd
  // sends as a v2 request with a top-level ID, keeps it there).
  const r: InternalRaftRequest =
    request.ID !== 0 && request.memberAttributes === undefined
      ? { ...request, ID: 0, header: { username: "", authRevision: 0, ...request.header, ID: request.ID } }
      : request;
  const header = r.header === undefined ? "" : compactText("etcdserverpb.RequestHeader", r.header);
  if (r.leaseGrant) return `header:<${header}> lease_grant:<ttl:${r.leaseGrant.TTL}-second id:${leaseHex(r.leaseGrant.ID)}>`;
  if (r.leaseRevoke) return `header:<${header}> lease_revoke:<id:${leaseHex(r.leaseRevoke.ID)}>`;
  if (r.authenticate) return `header:<${header}> authenticate:<name:${r.authenticate.name} simple_token:<value removed>>`;
  if (r.authUserAdd) return `header:<${header}> auth_user_add:<name:${r.authUserAdd.name}>`;
  if (r.authUserChangePassword) return `header:<${header}> auth_user_change_password:<name:${r.authUserChangePassword.name}>`;
  if (r.put) return `header:<${header}> put:<${loggablePut(r.put)}>`;
  if (r.txn) return `header:<${header}> txn:<${loggableTxn(r.txn)}>`;
  return compactText("etcdserverpb.InternalRaftRequest", r);
}
