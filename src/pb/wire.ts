/**
 * The protobuf wire format: a reader over a Buffer and a growable writer.
 * 64-bit integers are JS numbers (etcetera keeps revisions and ids below 2^53;
 * larger values lose precision, they never wrap). `bytes` decode as zero-copy
 * views of the input.
 */

const TWO_32 = 4294967296;
const TWO_63 = 2 ** 63;
const UINT64_MAX = 2n ** 64n - 1n;

/**
 * The two uint64 bigints encoded last, with their 32-bit halves: every response's header carries
 * the same cluster and member ids, and splitting a bigint costs four bigint operations (each a new
 * bigint) per id per response (issue 18). Only in-range values are remembered.
 */
const recentUint64s: { a: bigint | undefined; aLo: number; aHi: number; b: bigint | undefined; bLo: number; bHi: number } = {
  a: undefined,
  aLo: 0,
  aHi: 0,
  b: undefined,
  bLo: 0,
  bHi: 0,
};

function rememberUint64(v: bigint, lo: number, hi: number): void {
  const r = recentUint64s;
  r.b = r.a;
  r.bLo = r.aLo;
  r.bHi = r.aHi;
  r.a = v;
  r.aLo = lo;
  r.aHi = hi;
}
const INT64_MAX = 2n ** 63n - 1n;
const INT64_MIN = -(2n ** 63n);

/** The int64 of a varint's 32-bit halves, as a number when exact, else a bigint. */
function exactInt64(lo: number, hi: number): number | bigint {
  const signed = hi | 0;
  // |v| <= 2^53 - 1 exactly when the high half is within [-2^21, 2^21) and v is not -2^53.
  if (signed >= -0x200000 && signed < 0x200000) {
    const v = signed * TWO_32 + lo;
    if (Number.isSafeInteger(v)) return v;
  }
  return BigInt.asIntN(64, (BigInt(hi) << 32n) | BigInt(lo));
}

/** Thrown on malformed or truncated input. */
export class WireError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "WireError";
  }
}

export const EMPTY_BYTES: Buffer = Buffer.alloc(0);

/** Bytes of the varint of a non-negative safe integer. */
export function varintBytes(v: number): number {
  let n = 1;
  while (v >= 0x80) {
    v = Math.floor(v / 0x80);
    n++;
  }
  return n;
}

/** Writes the varint of a non-negative safe integer at `at` (division, not bit operators: it may exceed 2^32); returns where it ends. */
export function writeVarint(buf: Buffer, at: number, v: number): number {
  while (v >= 0x80) {
    buf[at++] = (v % 0x80) | 0x80;
    v = Math.floor(v / 0x80);
  }
  buf[at++] = v;
  return at;
}

export class ProtoReader {
  buf: Buffer;
  pos: number;
  end: number;

  constructor(buf: Buffer, pos = 0, end = buf.length) {
    this.buf = buf;
    this.pos = pos;
    this.end = end;
  }

  private check(): void {
    if (this.pos > this.end) throw new WireError("truncated message");
  }

  /** A varint's low 32 bits, unsigned (the remaining bytes are skipped). */
  uint32(): number {
    const buf = this.buf;
    let b = buf[this.pos++]!;
    if (b < 0x80) {
      if (this.pos > this.end) this.check();
      return b;
    }
    let v = b & 0x7f;
    b = buf[this.pos++]!;
    v |= (b & 0x7f) << 7;
    if (b >= 0x80) {
      b = buf[this.pos++]!;
      v |= (b & 0x7f) << 14;
      if (b >= 0x80) {
        b = buf[this.pos++]!;
        v |= (b & 0x7f) << 21;
        if (b >= 0x80) {
          b = buf[this.pos++]!;
          v |= (b & 0x0f) << 28;
          // Up to five more bytes belong to a sign-extended 64-bit varint.
          for (let i = 0; b >= 0x80 && i < 5; i++) b = buf[this.pos++]!;
          if (b >= 0x80) throw new WireError("varint too long");
        }
      }
    }
    this.check();
    return v >>> 0;
  }

  int32(): number {
    return this.uint32() | 0;
  }

  sint32(): number {
    const v = this.uint32();
    return (v >>> 1) ^ -(v & 1);
  }

  bool(): boolean {
    return this.uint32() !== 0;
  }

  /** Reads a 64-bit varint as [lo, hi] words packed into this.lo/this.hi. */
  private lo = 0;
  private hi = 0;
  private varint64(): void {
    const buf = this.buf;
    let lo = 0;
    let hi = 0;
    let b = 0;
    let shift = 0;
    for (; shift < 28; shift += 7) {
      b = buf[this.pos++]!;
      lo |= (b & 0x7f) << shift;
      if (b < 0x80) {
        this.lo = lo >>> 0;
        this.hi = 0;
        this.check();
        return;
      }
    }
    b = buf[this.pos++]!;
    lo |= (b & 0x0f) << 28;
    hi = (b & 0x7f) >> 4;
    if (b >= 0x80) {
      for (shift = 3; shift < 32; shift += 7) {
        b = buf[this.pos++]!;
        hi |= (b & 0x7f) << shift;
        if (b < 0x80) break;
      }
      if (b >= 0x80) throw new WireError("varint too long");
    }
    this.check();
    this.lo = lo >>> 0;
    this.hi = hi >>> 0;
  }

  int64(): number {
    const b = this.buf[this.pos]!;
    if (b < 0x80 && this.pos < this.end) {
      this.pos++;
      return b;
    }
    this.varint64();
    return (this.hi | 0) * TWO_32 + this.lo;
  }

  uint64(): number {
    const b = this.buf[this.pos]!;
    if (b < 0x80 && this.pos < this.end) {
      this.pos++;
      return b;
    }
    this.varint64();
    return this.hi * TWO_32 + this.lo;
  }

  /** A uint64 as an exact bigint (member and cluster ids: all 64 bits are significant). */
  uint64Big(): bigint {
    const b = this.buf[this.pos]!;
    if (b < 0x80 && this.pos < this.end) {
      this.pos++;
      return BigInt(b);
    }
    this.varint64();
    return (BigInt(this.hi) << 32n) | BigInt(this.lo);
  }

  /** An int64 as an exact bigint (lease and watch ids: ids above 2^53 round-trip). */
  int64Big(): bigint {
    return BigInt.asIntN(64, this.uint64Big());
  }

  /**
   * An int64 exactly, in one representation per value: a number when it is a safe integer
   * (|v| <= 2^53 - 1, the common case, kept cheap), a bigint beyond (lease ids: etcd's
   * server-chosen ones use all 63 bits). Callers compare these with === and key Maps by them.
   */
  int64Exact(): number | bigint {
    const b = this.buf[this.pos]!;
    if (b < 0x80 && this.pos < this.end) {
      this.pos++;
      return b;
    }
    this.varint64();
    return exactInt64(this.lo, this.hi);
  }

  sint64(): number {
    this.varint64();
    // Zig-zag: value = (n >>> 1) ^ -(n & 1) on the 64-bit pair.
    const negative = this.lo & 1;
    let lo = ((this.lo >>> 1) | (this.hi << 31)) >>> 0;
    let hi = this.hi >>> 1;
    if (negative) {
      lo = ~lo >>> 0;
      hi = ~hi >>> 0;
      return (hi | 0) * TWO_32 + lo;
    }
    return hi * TWO_32 + lo;
  }

  fixed32(): number {
    const v = this.buf.readUInt32LE(this.pos);
    this.pos += 4;
    this.check();
    return v;
  }

  sfixed32(): number {
    const v = this.buf.readInt32LE(this.pos);
    this.pos += 4;
    this.check();
    return v;
  }

  fixed64(): number {
    const lo = this.buf.readUInt32LE(this.pos);
    const hi = this.buf.readUInt32LE(this.pos + 4);
    this.pos += 8;
    this.check();
    return hi * TWO_32 + lo;
  }

  sfixed64(): number {
    const lo = this.buf.readUInt32LE(this.pos);
    const hi = this.buf.readInt32LE(this.pos + 4);
    this.pos += 8;
    this.check();
    return hi * TWO_32 + lo;
  }

  float(): number {
    const v = this.buf.readFloatLE(this.pos);
    this.pos += 4;
    this.check();
    return v;
  }

  double(): number {
    const v = this.buf.readDoubleLE(this.pos);
    this.pos += 8;
    this.check();
    return v;
  }

  /** Reads a length prefix and returns the end offset of the delimited field. */
  delimited(): number {
    const len = this.uint32();
    const end = this.pos + len;
    if (end > this.end) throw new WireError("truncated length-delimited field");
    return end;
  }

  bytes(): Buffer {
    const end = this.delimited();
    const start = this.pos;
    this.pos = end;
    return start === end ? EMPTY_BYTES : this.buf.subarray(start, end);
  }

  string(): string {
    const end = this.delimited();
    const start = this.pos;
    this.pos = end;
    return start === end ? "" : this.buf.toString("utf8", start, end);
  }

  skip(wireType: number): void {
    switch (wireType) {
      case 0:
        this.varint64();
        return;
      case 1:
        this.pos += 8;
        break;
      case 2:
        this.pos = this.delimited();
        return;
      case 3:
        this.skipGroup();
        return;
      case 4:
        // An end-group tag where no group is open (gogoproto's wording).
        throw new WireError("proto: wiretype end group for non-group");
      case 5:
        this.pos += 4;
        break;
      default:
        throw new WireError(`proto: illegal wireType ${wireType}`);
    }
    this.check();
  }

  /**
   * Skips a (deprecated) group whose start tag was just read, as gogoproto's
   * generated skip functions do (so etcd 3.4 accepts such a field when it does
   * not declare it): up to the end-group tag that balances it, whatever that
   * tag's field number, nested groups included. Iterative, with a depth count,
   * so a message of nothing but nested start tags cannot exhaust the stack.
   */
  private skipGroup(): void {
    let depth = 1;
    while (depth > 0) {
      if (this.pos >= this.end) throw new WireError("unexpected EOF");
      const wireType = this.uint32() & 7;
      if (wireType === 3) depth++;
      else if (wireType === 4) depth--;
      else this.skip(wireType);
    }
  }
}

export class ProtoWriter {
  buf: Buffer;
  pos: number;

  constructor(capacity: number, reserveBytes = 0) {
    this.buf = Buffer.allocUnsafe(Math.max(capacity, reserveBytes + 16));
    this.pos = reserveBytes;
  }

  ensure(n: number): void {
    if (this.pos + n <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < this.pos + n) size *= 2;
    const next = Buffer.allocUnsafe(size);
    this.buf.copy(next, 0, 0, this.pos);
    this.buf = next;
  }

  /** Varint of an unsigned 32-bit value (negative int32 must use int64()). */
  uint32(v: number): void {
    this.ensure(5);
    const buf = this.buf;
    v >>>= 0;
    while (v >= 0x80) {
      buf[this.pos++] = (v & 0x7f) | 0x80;
      v >>>= 7;
    }
    buf[this.pos++] = v;
  }

  int32(v: number): void {
    if (v < 0) this.int64(v);
    else this.uint32(v);
  }

  sint32(v: number): void {
    this.uint32(((v << 1) ^ (v >> 31)) >>> 0);
  }

  bool(v: boolean): void {
    this.ensure(1);
    this.buf[this.pos++] = v ? 1 : 0;
  }

  /**
   * Varint of a 64-bit integer given as a number (two's complement when negative). A number
   * outside int64's range is written as the nearest int64: such a number comes from decoding an
   * int64 near ±(2^63-1), which a double rounds to ±2^63, and writing 2^63 bit for bit would wrap
   * to -2^63 (a Txn ranging at revision 2^63-1 became revision -2^63 in its raft entry and was
   * answered "compacted" where etcd answers "future revision").
   */
  int64(v: number): void {
    if (v >= TWO_63) {
      this.varint64(0xffffffff, 0x7fffffff);
      return;
    }
    if (v < -TWO_63) {
      this.varint64(0, 0x80000000);
      return;
    }
    this.int64Bits(v);
  }

  /** Varint of an unsigned 64-bit integer given as a number in [0, 2^64). */
  uint64(v: number): void {
    this.int64Bits(v);
  }

  private int64Bits(v: number): void {
    if (v >= 0 && v < 0x80000000) {
      this.uint32(v);
      return;
    }
    let lo: number;
    let hi: number;
    if (v >= 0) {
      lo = v % TWO_32 >>> 0;
      hi = Math.floor(v / TWO_32) >>> 0;
    } else {
      const a = -v;
      lo = a % TWO_32 >>> 0;
      hi = Math.floor(a / TWO_32) >>> 0;
      // Negate the 64-bit pair.
      lo = ~lo >>> 0;
      hi = ~hi >>> 0;
      lo = (lo + 1) >>> 0;
      if (lo === 0) hi = (hi + 1) >>> 0;
    }
    this.varint64(lo, hi);
  }

  /** Varint of a uint64 given as a bigint; out-of-range values are refused, never wrapped. */
  uint64Big(v: bigint | number): void {
    if (v === recentUint64s.a) {
      this.varint64(recentUint64s.aLo, recentUint64s.aHi);
      return;
    }
    if (v === recentUint64s.b) {
      this.varint64(recentUint64s.bLo, recentUint64s.bHi);
      return;
    }
    // A number is taken if it is an exact integer (a caller that predates exact ids): BigInt refuses fractions.
    if (typeof v === "number") v = BigInt(v);
    if (v < 0n || v > UINT64_MAX) throw new RangeError(`uint64 out of range: ${v}`);
    const lo = Number(v & 0xffffffffn);
    const hi = Number(v >> 32n);
    rememberUint64(v, lo, hi);
    this.varint64(lo, hi);
  }

  /** Varint of an int64 given as a bigint (two's complement when negative). */
  int64Big(v: bigint | number): void {
    if (typeof v === "number") v = BigInt(v);
    if (v < INT64_MIN || v > INT64_MAX) throw new RangeError(`int64 out of range: ${v}`);
    this.uint64Big(BigInt.asUintN(64, v));
  }

  /** Varint of an int64 given as int64Exact reads it (a number or a bigint). */
  int64Exact(v: number | bigint): void {
    if (typeof v === "bigint") this.int64Big(v);
    else if (Number.isSafeInteger(v)) this.int64(v);
    else throw new RangeError(`int64 must be a safe integer or a bigint, got ${v}`);
  }

  sint64(v: number): void {
    // Zig-zag: 2v for v >= 0, 2(-v-1)+1 for v < 0, on the 64-bit pair.
    const negative = v < 0 ? 1 : 0;
    const a = negative ? -v - 1 : v;
    const lo = a % TWO_32 >>> 0;
    const hi = Math.floor(a / TWO_32) >>> 0;
    this.varint64(((lo << 1) | negative) >>> 0, ((hi << 1) | (lo >>> 31)) >>> 0);
  }

  private varint64(lo: number, hi: number): void {
    this.ensure(10);
    const buf = this.buf;
    while (hi !== 0 || lo >= 0x80) {
      buf[this.pos++] = (lo & 0x7f) | 0x80;
      lo = ((lo >>> 7) | (hi << 25)) >>> 0;
      hi >>>= 7;
    }
    buf[this.pos++] = lo;
  }

  fixed32(v: number): void {
    this.ensure(4);
    this.buf.writeUInt32LE(v >>> 0, this.pos);
    this.pos += 4;
  }

  sfixed32(v: number): void {
    this.ensure(4);
    this.buf.writeInt32LE(v | 0, this.pos);
    this.pos += 4;
  }

  fixed64(v: number): void {
    this.ensure(8);
    this.buf.writeUInt32LE(v % TWO_32 >>> 0, this.pos);
    this.buf.writeUInt32LE(Math.floor(v / TWO_32) >>> 0, this.pos + 4);
    this.pos += 8;
  }

  sfixed64(v: number): void {
    this.ensure(8);
    const hi = Math.floor(v / TWO_32);
    this.buf.writeUInt32LE((v - hi * TWO_32) >>> 0, this.pos);
    this.buf.writeInt32LE(hi | 0, this.pos + 4);
    this.pos += 8;
  }

  float(v: number): void {
    this.ensure(4);
    this.buf.writeFloatLE(v, this.pos);
    this.pos += 4;
  }

  double(v: number): void {
    this.ensure(8);
    this.buf.writeDoubleLE(v, this.pos);
    this.pos += 8;
  }

  /** Length-prefixed bytes; a string is written as UTF-8. */
  bytes(v: Uint8Array | string): void {
    if (typeof v === "string") {
      this.string(v);
      return;
    }
    const n = v.length;
    this.uint32(n);
    this.ensure(n);
    this.buf.set(v, this.pos);
    this.pos += n;
  }

  string(s: string): void {
    // Reserve one length byte, write, then widen the prefix if the text was long.
    this.ensure(s.length * 3 + 5);
    const start = ++this.pos;
    const n = this.buf.write(s, start);
    this.pos = start - 1;
    this.finishDelimited(start, n);
  }

  /** Starts a length-delimited field; returns the offset to pass to endDelimited. */
  beginDelimited(): number {
    this.ensure(1);
    return ++this.pos;
  }

  endDelimited(start: number): void {
    const n = this.pos - start;
    this.pos = start - 1;
    this.finishDelimited(start, n);
  }

  private finishDelimited(start: number, n: number): void {
    if (n >= 0x80) {
      // The length needs more than the reserved byte: shift the payload right.
      const extra = (n >= 0x4000 ? (n >= 0x200000 ? (n >= 0x10000000 ? 4 : 3) : 2) : 1);
      this.ensure(n + extra + 1);
      this.buf.copyWithin(start + extra, start, start + n);
    }
    this.uint32(n);
    this.pos += n;
  }

  /** The written bytes (a view; the writer must not be reused). */
  finish(): Buffer {
    return this.buf.subarray(0, this.pos);
  }
}
