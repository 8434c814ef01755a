/**
 * A minimal protobuf field codec for the few messages etcd keeps in its backend
 * (mvccpb.KeyValue, leasepb.Lease, authpb.User/Role, etcdserverpb.AlarmMember).
 *
 * Why not src/pb's codecs: they decode 64-bit integers as JS numbers, and etcd's lease ids (and
 * member ids) use all 64 bits (a lease id of 0x694d7b1a2c5e3f04 is common), so a backend read
 * through them would silently change ids. Here every varint is a bigint; the message modules
 * convert revisions and TTLs to numbers with a range check. Fields are written in field-number
 * order, zero values omitted, as gogoproto marshals them, so our values are byte-identical to
 * etcd's.
 */

const U64 = (1n << 64n) - 1n;

export class ProtoFieldError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ProtoFieldError";
  }
}

export type ProtoField =
  | { readonly field: number; readonly wire: 0; readonly varint: bigint }
  | { readonly field: number; readonly wire: 2; readonly bytes: Uint8Array }
  | { readonly field: number; readonly wire: 1 | 5 };

/** A read position in a buffer, advanced by readVarint. */
interface Cursor {
  pos: number;
}

/**
 * The varint at `at.pos` as a uint64, advancing `at.pos` past it: every varint this codec reads
 * (tags, field values, elements of a packed run). `kind` names it in the errors ("varint",
 * "packed varint").
 */
function readVarint(buf: Uint8Array, at: Cursor, kind: string): bigint {
  // Up to 7 bytes (49 bits) in plain arithmetic: every tag, length, revision and TTL.
  let n = 0;
  let mul = 1;
  for (let i = 0; i < 7; i++) {
    if (at.pos >= buf.length) throw new ProtoFieldError(`truncated ${kind}`);
    const b = buf[at.pos++]!;
    n += (b & 0x7f) * mul;
    if (b < 0x80) return BigInt(n);
    mul *= 128;
  }
  let v = BigInt(n);
  for (let shift = 49n; shift < 70n; shift += 7n) {
    if (at.pos >= buf.length) throw new ProtoFieldError(`truncated ${kind}`);
    const b = buf[at.pos++]!;
    v |= BigInt(b & 0x7f) << shift;
    if (b < 0x80) return v & U64;
  }
  throw new ProtoFieldError(`${kind} longer than 10 bytes`);
}

/** Every field of a message, in wire order; malformed input throws ProtoFieldError. */
export function* protoFields(buf: Uint8Array): Generator<ProtoField> {
  const at: Cursor = { pos: 0 };
  while (at.pos < buf.length) {
    const tag = readVarint(buf, at, "varint");
    const field = Number(tag >> 3n);
    const wire = Number(tag & 7n);
    if (field === 0) throw new ProtoFieldError("field number 0");
    if (wire === 0) yield { field, wire, varint: readVarint(buf, at, "varint") };
    else if (wire === 2) {
      const len = readVarint(buf, at, "varint");
      if (len > BigInt(buf.length - at.pos)) throw new ProtoFieldError(`field ${field}: length ${len} overruns the message`);
      const bytes = buf.subarray(at.pos, at.pos + Number(len));
      at.pos += Number(len);
      yield { field, wire, bytes };
    } else if (wire === 1 || wire === 5) {
      const n = wire === 1 ? 8 : 4;
      if (at.pos + n > buf.length) throw new ProtoFieldError(`field ${field}: truncated fixed${n * 8}`);
      at.pos += n;
      yield { field, wire };
    } else throw new ProtoFieldError(`field ${field}: unsupported wire type ${wire}`);
  }
}

/** The elements of a packed repeated varint field (one length-delimited run of varints), as uint64s. */
export function packedVarints(run: Uint8Array, what: string): bigint[] {
  const out: bigint[] = [];
  const at: Cursor = { pos: 0 };
  try {
    while (at.pos < run.length) out.push(readVarint(run, at, "packed varint"));
  } catch (err) {
    if (err instanceof ProtoFieldError) throw new ProtoFieldError(`${what}: ${err.message}`);
    throw err;
  }
  return out;
}

/** int64 as proto encodes it: two's complement in 64 bits. */
export function asInt64(v: bigint): bigint {
  return v >= 1n << 63n ? v - (1n << 64n) : v;
}

/** A varint field as a safe JS number (revisions, versions, TTLs). */
export function asSafeNumber(v: bigint, what: string): number {
  const s = asInt64(v);
  if (s < BigInt(Number.MIN_SAFE_INTEGER) || s > BigInt(Number.MAX_SAFE_INTEGER)) throw new ProtoFieldError(`${what} ${s} outside ±2^53`);
  return Number(s);
}

export function expectVarint(f: ProtoField, what: string): bigint {
  if (f.wire !== 0) throw new ProtoFieldError(`${what}: wire type ${f.wire}, want varint`);
  return f.varint;
}

export function expectBytes(f: ProtoField, what: string): Uint8Array {
  if (f.wire !== 2) throw new ProtoFieldError(`${what}: wire type ${f.wire}, want length-delimited`);
  return f.bytes;
}

export class ProtoFieldWriter {
  /** Tags and varints collect here; a bytes field's payload is kept as its own part. */
  private bytes: number[] = [];
  private readonly parts: Uint8Array[] = [];

  private varint(v: bigint | number): void {
    if (typeof v === "number" && v >= 0 && v <= Number.MAX_SAFE_INTEGER) {
      let n = v;
      while (n >= 0x80) {
        this.bytes.push((n % 0x80) | 0x80);
        n = Math.floor(n / 0x80);
      }
      this.bytes.push(n);
      return;
    }
    let x = BigInt(v) & U64;
    while (x >= 0x80n) {
      this.bytes.push(Number(x & 0x7fn) | 0x80);
      x >>= 7n;
    }
    this.bytes.push(Number(x));
  }

  /** A varint field (int64/uint64/enum/bool), omitted when zero. */
  uint(field: number, v: bigint | number | boolean): this {
    const x = typeof v === "boolean" ? (v ? 1 : 0) : v;
    if (x === 0 || x === 0n) return this;
    this.varint(field * 8);
    this.varint(x);
    return this;
  }

  /** A bytes/string/message field; omitted when empty unless `always` (repeated elements, set messages). */
  bytesField(field: number, v: Uint8Array | string, always = false): this {
    const b = typeof v === "string" ? Buffer.from(v) : v;
    if (b.length === 0 && !always) return this;
    this.varint(field * 8 + 2);
    this.varint(b.length);
    if (b.length > 0) {
      this.parts.push(Buffer.from(this.bytes), b);
      this.bytes = [];
    }
    return this;
  }

  finish(): Buffer {
    if (this.parts.length === 0) return Buffer.from(this.bytes);
    return Buffer.concat([...this.parts, Buffer.from(this.bytes)]);
  }
}
