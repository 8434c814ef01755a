import { assert } from "./assert.js";
import {
  ConfChangeTransition,
  ConfChangeType,
  EntryType,
  type ConfChangeSingle,
  type ConfChangeV2,
  type Entry,
  type NodeId,
  NONE,
} from "./types.js";

/**
 * Wire encoding of membership changes inside log entries, byte-compatible with etcd's raftpb
 * protobuf messages (ConfChangeV2 {transition=1, changes=2 {type=1, node_id=2}, context=3} and
 * ConfChange {id=1, type=2, node_id=3, context=4}). The leader must look inside proposed changes
 * (and itself proposes the empty change that leaves a joint config), so the codec lives here.
 */

/** A changes list longer than this is refused by decoding (a limit on everything). */
export const CONF_CHANGES_MAX = 1024;

const UINT64_MAX = 2n ** 64n - 1n;

export function encodeConfChangeV2(cc: ConfChangeV2): Uint8Array {
  const w = new Writer();
  if (cc.transition !== ConfChangeTransition.Auto) w.tag(1, 0).varint(cc.transition);
  for (const c of cc.changes) {
    const inner = new Writer();
    if (c.type !== ConfChangeType.AddNode) inner.tag(1, 0).varint(c.type);
    if (c.nodeId !== NONE) inner.tag(2, 0).uvarint64(c.nodeId);
    w.tag(2, 2).bytes(inner.finish());
  }
  if (cc.context.byteLength > 0) w.tag(3, 2).bytes(cc.context);
  return w.finish();
}

export function decodeConfChangeV2(data: Uint8Array): ConfChangeV2 {
  const cc: ConfChangeV2 = { transition: ConfChangeTransition.Auto, changes: [], context: new Uint8Array(0) };
  const r = new Reader(data);
  while (!r.done()) {
    const [field, wire] = r.tag();
    if (field === 1 && wire === 0) cc.transition = r.varint() as ConfChangeTransition;
    else if (field === 2 && wire === 2) {
      assert(cc.changes.length < CONF_CHANGES_MAX, "too many changes in ConfChangeV2");
      cc.changes.push(decodeSingle(r.bytes()));
    } else if (field === 3 && wire === 2) cc.context = r.bytes();
    else r.skip(wire);
  }
  return cc;
}

function decodeSingle(data: Uint8Array): ConfChangeSingle {
  const c: ConfChangeSingle = { type: ConfChangeType.AddNode, nodeId: NONE };
  const r = new Reader(data);
  while (!r.done()) {
    const [field, wire] = r.tag();
    if (field === 1 && wire === 0) c.type = r.varint() as ConfChangeType;
    else if (field === 2 && wire === 0) c.nodeId = r.uvarint64();
    else r.skip(wire);
  }
  return c;
}

/** etcd's v1 ConfChange (what etcd 3.4/3.5 servers propose for member add/remove). */
export interface ConfChangeV1 {
  /** etcd's ConfChange.ID: the proposal's request id (any uint64). */
  id: bigint;
  type: ConfChangeType;
  nodeId: NodeId;
  context: Uint8Array;
}

export function encodeConfChangeV1(cc: ConfChangeV1): Uint8Array {
  const w = new Writer();
  // etcd's gogoproto ConfChange has non-nullable scalars: they are always written.
  w.tag(1, 0).uvarint64(cc.id);
  w.tag(2, 0).varint(cc.type);
  w.tag(3, 0).uvarint64(cc.nodeId);
  if (cc.context.byteLength > 0) w.tag(4, 2).bytes(cc.context);
  return w.finish();
}

export function decodeConfChangeV1(data: Uint8Array): ConfChangeV1 {
  const cc: ConfChangeV1 = { id: 0n, type: ConfChangeType.AddNode, nodeId: NONE, context: new Uint8Array(0) };
  const r = new Reader(data);
  while (!r.done()) {
    const [field, wire] = r.tag();
    if (field === 1 && wire === 0) cc.id = r.uvarint64();
    else if (field === 2 && wire === 0) cc.type = r.varint() as ConfChangeType;
    else if (field === 3 && wire === 0) cc.nodeId = r.uvarint64();
    else if (field === 4 && wire === 2) cc.context = r.bytes();
    else r.skip(wire);
  }
  return cc;
}

/** A v1 change as the equivalent single-change ConfChangeV2 (etcd's ConfChange.AsV2). */
export function confChangeV1AsV2(cc: ConfChangeV1): ConfChangeV2 {
  return { transition: ConfChangeTransition.Auto, changes: [{ type: cc.type, nodeId: cc.nodeId }], context: cc.context };
}

/** The change carried by a ConfChange or ConfChangeV2 entry, as a ConfChangeV2. */
export function confChangeFromEntry(e: Entry): ConfChangeV2 {
  if (e.type === EntryType.ConfChange) return confChangeV1AsV2(decodeConfChangeV1(e.data));
  assert(e.type === EntryType.ConfChangeV2, () => `entry ${e.index} is not a conf change`);
  return decodeConfChangeV2(e.data);
}

class Writer {
  private readonly buf: number[] = [];

  tag(field: number, wire: number): this {
    return this.varint(field * 8 + wire);
  }

  varint(v: number): this {
    assert(Number.isSafeInteger(v) && v >= 0, () => `varint out of range: ${v}`);
    while (v >= 0x80) {
      this.buf.push((v % 0x80) | 0x80);
      v = Math.floor(v / 0x80);
    }
    this.buf.push(v);
    return this;
  }

  /** A uint64 varint (node ids, request ids: all 64 bits are significant). */
  uvarint64(v: bigint): this {
    assert(v >= 0n && v <= UINT64_MAX, () => `uint64 out of range: ${v}`);
    while (v >= 0x80n) {
      this.buf.push(Number(v & 0x7fn) | 0x80);
      v >>= 7n;
    }
    this.buf.push(Number(v));
    return this;
  }

  bytes(b: Uint8Array): this {
    this.varint(b.byteLength);
    for (const x of b) this.buf.push(x);
    return this;
  }

  finish(): Uint8Array {
    return Uint8Array.from(this.buf);
  }
}

class Reader {
  private pos = 0;

  constructor(private readonly data: Uint8Array) {}

  done(): boolean {
    return this.pos >= this.data.byteLength;
  }

  tag(): [number, number] {
    const t = this.varint();
    return [Math.floor(t / 8), t % 8];
  }

  varint(): number {
    let result = 0;
    let mul = 1;
    for (let i = 0; i < 10; i++) {
      assert(this.pos < this.data.byteLength, "truncated varint");
      const b = this.data[this.pos++];
      result += (b & 0x7f) * mul;
      if (b < 0x80) {
        assert(Number.isSafeInteger(result), "varint exceeds 2^53");
        return result;
      }
      mul *= 0x80;
    }
    assert(false, "varint too long");
  }

  uvarint64(): bigint {
    let result = 0n;
    for (let i = 0; i < 10; i++) {
      assert(this.pos < this.data.byteLength, "truncated varint");
      const b = this.data[this.pos++];
      result |= BigInt(b & 0x7f) << BigInt(7 * i);
      if (b < 0x80) {
        // A tenth byte may carry only the top bit; more would overflow 64 bits.
        assert(result <= UINT64_MAX, "varint exceeds 2^64");
        return result;
      }
    }
    assert(false, "varint too long");
  }

  bytes(): Uint8Array {
    const n = this.varint();
    assert(this.pos + n <= this.data.byteLength, "truncated bytes field");
    const b = this.data.subarray(this.pos, this.pos + n);
    this.pos += n;
    return b;
  }

  skip(wire: number): void {
    if (wire === 0) this.varint();
    else if (wire === 2) this.bytes();
    else if (wire === 1) this.pos += 8;
    else if (wire === 5) this.pos += 4;
    else assert(false, () => `unsupported wire type ${wire}`);
  }
}
