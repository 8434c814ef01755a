/**
 * Binary codec for Raft messages on the peer transport (our own peer protocol; etcd's raftpb is
 * protobuf, but peers only ever talk to peers of the same implementation, so a fixed layout that
 * needs no schema and is cheap to bound-check wins).
 *
 * All integers are big-endian. Ids, terms and indexes are safe integers sent as uint64 (two uint32
 * words); a decoded value above 2^53-1 is rejected. Byte strings are a uint32 length then bytes.
 *
 *   Message  := type:u8 to:u64 from:u64 term:u64 logTerm:u64 index:u64 commit:u64 reject:u8
 *               rejectHint:u64 context:bytes entryCount:u32 Entry* hasSnapshot:u8 [Snapshot]
 *   Entry    := term:u64 index:u64 type:u8 data:bytes
 *   Snapshot := index:u64 term:u64 voters:ids learners:ids votersOutgoing:ids learnersNext:ids
 *               autoLeave:u8 data:bytes
 *   ids      := count:u32 u64*
 *
 * Decoding never trusts a length: every read is checked against the buffer, so a corrupt or
 * hostile frame yields a CodecError, never a huge allocation or an out-of-range read.
 */
import { type ConfState, type Entry, EntryType, type Message, MessageType, type NodeId, type Snapshot } from "../../raft/types.js";

const UINT64_MAX = 2n ** 64n - 1n;

export class CodecError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "CodecError";
  }
}

const TWO_32 = 2 ** 32;
/** Fixed bytes of a Message with no entries, empty context and no snapshot. */
const MESSAGE_FIXED_BYTES = 1 + 8 * 6 + 1 + 8 + 4 + 4 + 1;
const ENTRY_FIXED_BYTES = 8 + 8 + 1 + 4;
const MAX_MESSAGE_TYPE = MessageType.MsgPreVoteResp;
const MAX_ENTRY_TYPE = EntryType.ConfChangeV2;

/** Exact encoded size of `m`, so a batch is allocated once. */
export function encodedMessageBytes(m: Message): number {
  let n = MESSAGE_FIXED_BYTES + m.context.byteLength;
  for (const e of m.entries) n += ENTRY_FIXED_BYTES + e.data.byteLength;
  if (m.snapshot !== undefined) n += snapshotBytes(m.snapshot);
  return n;
}

function snapshotBytes(s: Snapshot): number {
  const cs = s.metadata.confState;
  const ids = cs.voters.length + cs.learners.length + cs.votersOutgoing.length + cs.learnersNext.length;
  return 8 + 8 + 4 * 4 + 8 * ids + 1 + 4 + s.data.byteLength;
}

/** A cursor writing into a preallocated buffer. */
export class Writer {
  offset = 0;
  constructor(readonly buf: Buffer) {}

  u8(v: number): void {
    this.buf[this.offset++] = v;
  }
  u32(v: number): void {
    this.buf.writeUInt32BE(v, this.offset);
    this.offset += 4;
  }
  u64(v: number): void {
    if (!Number.isSafeInteger(v) || v < 0) throw new CodecError(`cannot encode ${v} as uint64`);
    this.buf.writeUInt32BE(Math.floor(v / TWO_32), this.offset);
    this.buf.writeUInt32BE(v >>> 0, this.offset + 4);
    this.offset += 8;
  }
  /** A node id: all 64 bits (ids are sha1-derived uint64s). */
  id(v: NodeId): void {
    if (typeof v !== "bigint" || v < 0n || v > UINT64_MAX) throw new CodecError(`cannot encode ${String(v)} as a uint64 id`);
    this.buf.writeBigUInt64BE(v, this.offset);
    this.offset += 8;
  }
  bytes(b: Uint8Array): void {
    this.u32(b.byteLength);
    this.buf.set(b, this.offset);
    this.offset += b.byteLength;
  }
  raw(b: Uint8Array): void {
    this.buf.set(b, this.offset);
    this.offset += b.byteLength;
  }
}

/** A bounds-checked cursor over a received buffer. */
export class Reader {
  offset: number;
  constructor(
    readonly buf: Buffer,
    start = 0,
    readonly end = buf.byteLength,
  ) {
    this.offset = start;
  }

  remaining(): number {
    return this.end - this.offset;
  }
  private need(n: number): void {
    if (this.end - this.offset < n) throw new CodecError(`truncated: need ${n} bytes, have ${this.end - this.offset}`);
  }
  u8(): number {
    this.need(1);
    return this.buf[this.offset++]!;
  }
  u16(): number {
    this.need(2);
    const v = this.buf.readUInt16BE(this.offset);
    this.offset += 2;
    return v;
  }
  u32(): number {
    this.need(4);
    const v = this.buf.readUInt32BE(this.offset);
    this.offset += 4;
    return v;
  }
  id(): NodeId {
    this.need(8);
    const v = this.buf.readBigUInt64BE(this.offset);
    this.offset += 8;
    return v;
  }
  u64(): number {
    this.need(8);
    const hi = this.buf.readUInt32BE(this.offset);
    const lo = this.buf.readUInt32BE(this.offset + 4);
    this.offset += 8;
    const v = hi * TWO_32 + lo;
    if (!Number.isSafeInteger(v)) throw new CodecError(`uint64 ${hi}:${lo} exceeds 2^53-1`);
    return v;
  }
  bool(): boolean {
    const v = this.u8();
    if (v > 1) throw new CodecError(`invalid boolean ${v}`);
    return v === 1;
  }
  /** A length-prefixed byte string; copied so the frame buffer can be released. */
  bytes(): Uint8Array {
    const n = this.u32();
    this.need(n);
    const out = new Uint8Array(n);
    out.set(this.buf.subarray(this.offset, this.offset + n));
    this.offset += n;
    return out;
  }
  /** A count that announces `elementBytes` per element must fit in what is left. */
  count(elementBytes: number): number {
    const n = this.u32();
    if (n * elementBytes > this.remaining()) throw new CodecError(`count ${n} exceeds the frame`);
    return n;
  }
}

export function writeMessage(w: Writer, m: Message): void {
  w.u8(m.type);
  w.id(m.to);
  w.id(m.from);
  w.u64(m.term);
  w.u64(m.logTerm);
  w.u64(m.index);
  w.u64(m.commit);
  w.u8(m.reject ? 1 : 0);
  w.u64(m.rejectHint);
  w.bytes(m.context);
  w.u32(m.entries.length);
  for (const e of m.entries) {
    w.u64(e.term);
    w.u64(e.index);
    w.u8(e.type);
    w.bytes(e.data);
  }
  if (m.snapshot === undefined) {
    w.u8(0);
  } else {
    w.u8(1);
    writeSnapshot(w, m.snapshot);
  }
}

function writeIds(w: Writer, ids: readonly NodeId[]): void {
  w.u32(ids.length);
  for (const id of ids) w.id(id);
}

function writeSnapshot(w: Writer, s: Snapshot): void {
  w.u64(s.metadata.index);
  w.u64(s.metadata.term);
  const cs = s.metadata.confState;
  writeIds(w, cs.voters);
  writeIds(w, cs.learners);
  writeIds(w, cs.votersOutgoing);
  writeIds(w, cs.learnersNext);
  w.u8(cs.autoLeave ? 1 : 0);
  w.bytes(s.data);
}

export function readMessage(r: Reader): Message {
  const type = r.u8();
  if (type > MAX_MESSAGE_TYPE) throw new CodecError(`unknown message type ${type}`);
  const to = r.id();
  const from = r.id();
  const term = r.u64();
  const logTerm = r.u64();
  const index = r.u64();
  const commit = r.u64();
  const reject = r.bool();
  const rejectHint = r.u64();
  const context = r.bytes();
  const entryCount = r.count(ENTRY_FIXED_BYTES);
  const entries: Entry[] = new Array<Entry>(entryCount);
  for (let i = 0; i < entryCount; i++) entries[i] = readEntry(r);
  const m: Message = { type, to, from, term, logTerm, index, entries, commit, reject, rejectHint, context };
  if (r.bool()) m.snapshot = readSnapshot(r);
  return m;
}

function readEntry(r: Reader): Entry {
  const term = r.u64();
  const index = r.u64();
  const type = r.u8();
  if (type > MAX_ENTRY_TYPE) throw new CodecError(`unknown entry type ${type}`);
  return { term, index, type, data: r.bytes() };
}

function readIds(r: Reader): NodeId[] {
  const n = r.count(8);
  const ids = new Array<NodeId>(n);
  for (let i = 0; i < n; i++) ids[i] = r.id();
  return ids;
}

function readSnapshot(r: Reader): Snapshot {
  const index = r.u64();
  const term = r.u64();
  const confState: ConfState = {
    voters: readIds(r),
    learners: readIds(r),
    votersOutgoing: readIds(r),
    learnersNext: readIds(r),
    autoLeave: r.bool(),
  };
  return { metadata: { index, term, confState }, data: r.bytes() };
}

/** One message alone (tests, snapshot headers). */
export function encodeMessage(m: Message): Buffer {
  const buf = Buffer.allocUnsafe(encodedMessageBytes(m));
  const w = new Writer(buf);
  writeMessage(w, m);
  if (w.offset !== buf.byteLength) throw new Error(`message size mismatch: wrote ${w.offset}, sized ${buf.byteLength}`);
  return buf;
}

export function decodeMessage(buf: Buffer): Message {
  const r = new Reader(buf);
  const m = readMessage(r);
  if (r.remaining() !== 0) throw new CodecError(`${r.remaining()} trailing bytes after message`);
  return m;
}
