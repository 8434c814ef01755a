/**
 * etcd v3 API messages for the load generator: protobufjs types loaded once per thread from the
 * repository's proto/ folder. Requests are encoded up front (or per request when the key
 * changes) and responses stay raw Buffers unless a command needs a field, so that the
 * generator spends its CPU on sending, not on decoding.
 */
import { fileURLToPath } from "node:url";
import protobuf from "protobufjs";

export const PROTO_DIR = fileURLToPath(new URL("../../proto/", import.meta.url));

/** Full gRPC method paths used by the benchmark. */
export const METHODS = {
  range: "/etcdserverpb.KV/Range",
  put: "/etcdserverpb.KV/Put",
  txn: "/etcdserverpb.KV/Txn",
  compact: "/etcdserverpb.KV/Compact",
  watch: "/etcdserverpb.Watch/Watch",
  leaseGrant: "/etcdserverpb.Lease/LeaseGrant",
  leaseKeepAlive: "/etcdserverpb.Lease/LeaseKeepAlive",
  memberList: "/etcdserverpb.Cluster/MemberList",
  status: "/etcdserverpb.Maintenance/Status",
} as const;

let root: protobuf.Root | undefined;

function loadRoot(): protobuf.Root {
  if (root !== undefined) return root;
  const r = new protobuf.Root();
  r.resolvePath = (_origin, target) => PROTO_DIR + target;
  r.loadSync("etcdserverpb/rpc.proto", { keepCase: true });
  root = r;
  return r;
}

/** A message type of package etcdserverpb (or mvccpb with its package prefix). */
export function messageType(name: string): protobuf.Type {
  return loadRoot().lookupType(name.includes(".") ? name : `etcdserverpb.${name}`);
}

/** A plain object the type accepts; snake_case field names as in the .proto. */
export type Fields = Record<string, unknown>;

/** Encodes a message; enum fields accept names ("LESS") or numbers, bytes fields Buffers. */
export function encode(type: string, fields: Fields): Buffer {
  const t = messageType(type);
  const bytes = t.encode(t.fromObject(fields)).finish();
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

function varintLength(n: number): number {
  let len = 1;
  while (n >= 0x80) {
    n = Math.floor(n / 0x80);
    len++;
  }
  return len;
}

function writeVarint(buf: Buffer, off: number, n: number): number {
  while (n >= 0x80) {
    buf[off++] = (n % 0x80) | 0x80;
    n = Math.floor(n / 0x80);
  }
  buf[off++] = n;
  return off;
}

/**
 * PutRequest{key = 1, value = 2} encoded by hand: the put hot path skips protobufjs. Fields
 * with empty bytes are omitted, as proto3 does.
 */
export function encodePut(key: Buffer, value: Buffer): Buffer {
  const size =
    (key.length > 0 ? 1 + varintLength(key.length) + key.length : 0) + (value.length > 0 ? 1 + varintLength(value.length) + value.length : 0);
  const out = Buffer.allocUnsafe(size);
  let off = 0;
  if (key.length > 0) {
    out[off++] = 0x0a;
    off = writeVarint(out, off, key.length);
    off += key.copy(out, off);
  }
  if (value.length > 0) {
    out[off++] = 0x12;
    off = writeVarint(out, off, value.length);
    off += value.copy(out, off);
  }
  if (off !== size) throw new Error(`encodePut: wrote ${off} of ${size} bytes`);
  return out;
}

/**
 * Decodes to a plain object: int64 as number (or as decimal string with `exactLongs`, for
 * 64-bit ids), bytes as Buffer, defaults filled in.
 */
export function decode(type: string, buf: Uint8Array, exactLongs = false): Fields {
  const t = messageType(type);
  return t.toObject(t.decode(buf), { longs: exactLongs ? String : Number, defaults: true, bytes: Buffer }) as Fields;
}

/** Numeric field of a decoded message (int64 comes back as number with `longs: Number`). */
export function num(obj: Fields, field: string): number {
  const v = obj[field];
  if (typeof v === "number") return v;
  if (typeof v === "string") return Number(v);
  return 0;
}

export function sub(obj: Fields, field: string): Fields {
  const v = obj[field];
  return typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Fields) : {};
}

export function list(obj: Fields, field: string): Fields[] {
  const v = obj[field];
  return Array.isArray(v) ? (v as Fields[]) : [];
}

/**
 * etcd's benchmark key: `keySize` bytes, zero-filled, starting with Go's binary.PutVarint(n)
 * (zig-zag varint). A key shorter than the varint is cut, as Go's PutVarint would panic there.
 */
export function varintKey(n: number, keySize: number): Buffer {
  const key = Buffer.alloc(keySize);
  // Zig-zag in floating arithmetic: n is a non-negative index below 2^52 here.
  let ux = n >= 0 ? n * 2 : -n * 2 - 1;
  let i = 0;
  while (ux >= 0x80 && i < keySize) {
    key[i++] = (ux % 0x80) | 0x80;
    ux = Math.floor(ux / 0x80);
  }
  if (i < keySize) key[i] = ux;
  return key;
}

/** The next key after every key with prefix `p` (etcd's clientv3.GetPrefixRangeEnd). */
export function prefixRangeEnd(p: Buffer): Buffer {
  const end = Buffer.from(p);
  for (let i = end.length - 1; i >= 0; i--) {
    if ((end[i] as number) < 0xff) {
      end[i] = (end[i] as number) + 1;
      return end.subarray(0, i + 1);
    }
  }
  return Buffer.from([0]);
}
