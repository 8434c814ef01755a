/**
 * Protobuf inputs for a request type: random valid encodings (every field type, edge values,
 * out-of-range enum numbers, nested messages) and malformed ones, each labelled with the
 * corruption used. A "malformed" strategy yields bytes no conforming decoder accepts (so the
 * server must answer INTERNAL "grpc: error unmarshalling request: ..."); the others may decode.
 */
import protobuf from "protobufjs";
import type { Rng } from "./rng.js";

const INT64_EDGES = ["0", "1", "-1", "2147483647", "-2147483648", "4294967296", "9007199254740991", "9223372036854775807", "-9223372036854775808"];
const UINT64_EDGES = ["0", "1", "4294967295", "9007199254740991", "9007199254740993", "18446744073709551615"];

function tag(fieldId: number, wireType: number): number {
  return ((fieldId << 3) | wireType) >>> 0;
}

function randomAscii(rng: Rng, n: number): string {
  let s = "";
  for (let i = 0; i < n; i++) s += String.fromCharCode(rng.between(0x20, 0x7e));
  return s;
}

function randomInt64(rng: Rng, unsigned: boolean): string {
  if (rng.bool(0.5)) return rng.pick(unsigned ? UINT64_EDGES : INT64_EDGES);
  const v = rng.between(0, 1000);
  return String(!unsigned && rng.bool(0.2) ? -v : v);
}

/** Wire type of a field as declared (for the "wrong wire type" corruption). */
export function declaredWireType(f: protobuf.Field): number {
  if (f.resolvedType instanceof protobuf.Type) return 2;
  if (f.resolvedType instanceof protobuf.Enum) return 0;
  switch (f.type) {
    case "double":
    case "fixed64":
    case "sfixed64":
      return 1;
    case "float":
    case "fixed32":
    case "sfixed32":
      return 5;
    case "string":
    case "bytes":
      return 2;
    default:
      return 0;
  }
}

function writeValue(rng: Rng, w: protobuf.Writer, f: protobuf.Field, depth: number): void {
  const t = f.resolvedType;
  if (t instanceof protobuf.Type) {
    w.uint32(tag(f.id, 2)).bytes(depth > 0 ? randomEncoding(rng, t, depth - 1) : new Uint8Array(0));
    return;
  }
  if (t instanceof protobuf.Enum) {
    const values = Object.values(t.values);
    // Mostly defined values; sometimes a number the enum does not define.
    w.uint32(tag(f.id, 0)).int32(rng.bool(0.8) ? rng.pick(values) : rng.pick([-1, 99, 2 ** 31 - 1]));
    return;
  }
  switch (f.type) {
    case "bytes":
      w.uint32(tag(f.id, 2)).bytes(rng.bytes(rng.size(64)));
      return;
    case "string":
      w.uint32(tag(f.id, 2)).string(randomAscii(rng, rng.size(32)));
      return;
    case "int64":
      w.uint32(tag(f.id, 0)).int64(randomInt64(rng, false));
      return;
    case "uint64":
      w.uint32(tag(f.id, 0)).uint64(randomInt64(rng, true));
      return;
    case "int32":
      w.uint32(tag(f.id, 0)).int32(rng.pick([0, 1, -1, 2 ** 31 - 1, -(2 ** 31), rng.between(0, 100)]));
      return;
    case "uint32":
      w.uint32(tag(f.id, 0)).uint32(rng.pick([0, 1, 2 ** 32 - 1, rng.between(0, 100)]));
      return;
    case "bool":
      w.uint32(tag(f.id, 0)).bool(rng.bool());
      return;
    default:
      throw new Error(`proto_garbage: no generator for ${f.type} (${f.fullName})`);
  }
}

/** A random but valid encoding of `type` (nested messages down to `depth`). */
export function randomEncoding(rng: Rng, type: protobuf.Type, depth = 2): Uint8Array {
  const w = protobuf.Writer.create();
  // Oneof members: set at most one per oneof, as a well-behaved client would.
  const oneofTaken = new Set<string>();
  for (const f of type.fieldsArray) {
    f.resolve();
    if (rng.bool(0.45)) continue;
    if (f.partOf !== null) {
      if (oneofTaken.has(f.partOf.name)) continue;
      oneofTaken.add(f.partOf.name);
    }
    const n = f.repeated ? rng.between(1, 3) : 1;
    for (let i = 0; i < n; i++) writeValue(rng, w, f, depth);
  }
  return w.finish();
}

export type GarbageKind =
  | "random-bytes"
  | "unknown-fields"
  | "truncated-encoding"
  | "wrong-wire-type"
  | "start-group"
  | "nested-garbage"
  // The malformed ones: no conforming decoder accepts these.
  | "truncated-varint"
  | "length-past-end"
  | "varint-overflow"
  | "illegal-wire-type"
  | "field-zero"
  | "end-group";

/** Corruptions that make the bytes undecodable whatever the message type. */
export const MALFORMED_KINDS: readonly GarbageKind[] = [
  "truncated-varint",
  "length-past-end",
  "varint-overflow",
  "illegal-wire-type",
  "field-zero",
  "end-group",
];

export const ALL_GARBAGE_KINDS: readonly GarbageKind[] = [
  "random-bytes",
  "unknown-fields",
  "truncated-encoding",
  "wrong-wire-type",
  "start-group",
  "nested-garbage",
  ...MALFORMED_KINDS,
];

export interface GarbageInput {
  readonly kind: GarbageKind;
  readonly bytes: Buffer;
}

function varintBytes(v: number): Buffer {
  return Buffer.from(protobuf.Writer.create().uint32(v).finish());
}

/** A valid prefix to hide the corruption behind (sometimes empty). */
function validPrefix(rng: Rng, type: protobuf.Type): Buffer {
  return rng.bool(0.6) ? Buffer.from(randomEncoding(rng, type, 1)) : Buffer.alloc(0);
}

/** A field number the type does not declare (unknown fields must be skipped, proto3 says). */
function unknownFieldId(rng: Rng, type: protobuf.Type): number {
  const used = new Set(type.fieldsArray.map((f) => f.id));
  for (;;) {
    const id = rng.pick([rng.between(1, 40), rng.between(1000, 5000), 536_870_911]);
    if (!used.has(id)) return id;
  }
}

/** Bytes that cannot decode as any message (used inside nested fields too). */
function malformed(rng: Rng, type: protobuf.Type, kind: GarbageKind): Buffer {
  const prefix = validPrefix(rng, type);
  const fieldId = type.fieldsArray.length > 0 && rng.bool(0.7) ? rng.pick(type.fieldsArray).id : unknownFieldId(rng, type);
  switch (kind) {
    case "truncated-varint":
      // A varint field whose last byte still says "more follows".
      return Buffer.concat([prefix, varintBytes(tag(fieldId, 0)), Buffer.from([0x80, 0x80].slice(0, rng.between(1, 2)))]);
    case "length-past-end": {
      const body = rng.bytes(rng.size(16));
      return Buffer.concat([prefix, varintBytes(tag(fieldId, 2)), varintBytes(body.length + rng.between(1, 100_000)), body]);
    }
    case "varint-overflow":
      // Eleven continuation bytes: longer than any 64-bit varint may be.
      return Buffer.concat([prefix, varintBytes(tag(fieldId, 0)), Buffer.alloc(11, 0xff), Buffer.from([0x01])]);
    case "illegal-wire-type":
      return Buffer.concat([prefix, varintBytes(tag(fieldId, rng.pick([6, 7]))), rng.bytes(rng.between(0, 8))]);
    case "field-zero":
      return Buffer.concat([prefix, Buffer.from([rng.pick([0x00, 0x02, 0x05])]), rng.bytes(rng.between(0, 4))]);
    case "end-group":
      return Buffer.concat([prefix, varintBytes(tag(fieldId, 4))]);
    default:
      throw new Error(`not a malformed kind: ${kind}`);
  }
}

/** Message-typed fields of `type` (for nesting garbage inside a valid outer message). */
function messageFields(type: protobuf.Type): protobuf.Field[] {
  return type.fieldsArray.filter((f) => {
    f.resolve();
    return f.resolvedType instanceof protobuf.Type;
  });
}

/** One input of the given kind for `type`. */
export function garbageFor(rng: Rng, type: protobuf.Type, kind: GarbageKind): GarbageInput {
  switch (kind) {
    case "random-bytes":
      return { kind, bytes: rng.bytes(rng.between(1, 256)) };
    case "unknown-fields": {
      const w = protobuf.Writer.create();
      const id = unknownFieldId(rng, type);
      w.uint32(tag(id, rng.pick([0, 2]) as number));
      const bytes = Buffer.from(w.finish());
      const value = bytes[bytes.length - 1]! % 8 === 0 ? varintBytes(rng.between(0, 1e6)) : Buffer.concat([varintBytes(3), rng.bytes(3)]);
      return { kind, bytes: Buffer.concat([Buffer.from(randomEncoding(rng, type, 1)), bytes, value]) };
    }
    case "truncated-encoding": {
      const full = Buffer.from(randomEncoding(rng, type, 2));
      return { kind, bytes: full.subarray(0, full.length === 0 ? 0 : rng.int(full.length)) };
    }
    case "wrong-wire-type": {
      if (type.fieldsArray.length === 0) return garbageFor(rng, type, "random-bytes");
      const f = rng.pick(type.fieldsArray);
      const declared = declaredWireType(f);
      const wt = rng.pick([0, 1, 2, 5].filter((x) => x !== declared));
      const payload = wt === 0 ? varintBytes(rng.between(0, 300)) : wt === 1 ? rng.bytes(8) : wt === 5 ? rng.bytes(4) : Buffer.concat([varintBytes(2), rng.bytes(2)]);
      return { kind, bytes: Buffer.concat([validPrefix(rng, type), varintBytes(tag(f.id, wt)), payload]) };
    }
    case "start-group": {
      const id = unknownFieldId(rng, type);
      // A well-formed (deprecated) group of an unknown field, or one that never ends.
      const closed = rng.bool(0.5);
      const parts = [validPrefix(rng, type), varintBytes(tag(id, 3)), varintBytes(tag(1, 0)), varintBytes(7)];
      if (closed) parts.push(varintBytes(tag(id, 4)));
      return { kind, bytes: Buffer.concat(parts) };
    }
    case "nested-garbage": {
      const nested = messageFields(type);
      if (nested.length === 0) return { kind, bytes: malformed(rng, type, rng.pick(MALFORMED_KINDS)) };
      const f = rng.pick(nested);
      const inner = malformed(rng, f.resolvedType as protobuf.Type, rng.pick(MALFORMED_KINDS));
      return { kind, bytes: Buffer.concat([validPrefix(rng, type), varintBytes(tag(f.id, 2)), varintBytes(inner.length), inner]) };
    }
    default:
      return { kind, bytes: malformed(rng, type, kind) };
  }
}

/** True if no conforming protobuf decoder accepts this input (the server must answer INTERNAL). */
export function isMalformed(kind: GarbageKind): boolean {
  return MALFORMED_KINDS.includes(kind) || kind === "nested-garbage";
}
