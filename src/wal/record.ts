/**
 * The WAL record format (all integers little-endian).
 *
 * Every record is a 16-byte header followed by its payload:
 *
 *   offset  size  field
 *        0     4  payloadLength   bytes of payload after the header
 *        4     1  type            RecordType, never 0
 *        5     3  reserved        zero
 *        8     4  recordCrc       CRC-32 (node:zlib) of header[0..8) ++ payload, seeded with the
 *                                 previous record's recordCrc: the chain detects missing, swapped
 *                                 or stale records, not only flipped bits
 *       12     4  headerCrc       CRC-32 of header[0..12): the length is trusted only once this
 *                                 matches, so a corrupt length can never make us skip real data
 *
 * A header of 16 zero bytes marks the end of data: segments are preallocated with zeros, and a
 * valid header is never all zero (type ≥ 1 and headerCrc of a non-zero prefix).
 *
 * Payloads (u64 = a safe integer written as two u32 halves, low first):
 *   Entry      index u64, term u64, entryType u8, data (the rest)              17 + data bytes
 *   HardState  term u64, vote u64, commit u64                                  24 bytes
 *   Metadata   memberId u64, clusterId u64                                     16 bytes
 *   Snapshot   index u64, term u64, autoLeave u8, then voters, learners,
 *              votersOutgoing, learnersNext, each as count u32 + count × u64
 *   CrcReset   previous chain value u32 (first record of every segment)        4 bytes
 */
import { crc32 } from "node:zlib";
import type { ConfState, Entry, EntryType, HardState, NodeId } from "../raft/types.js";
import { crc32Range } from "./crc32_range.js";
import { assert } from "./errors.js";

export enum RecordType {
  Metadata = 1,
  Entry = 2,
  HardState = 3,
  CrcReset = 4,
  Snapshot = 5,
}

export const HEADER_BYTES = 16;
/** Bounds every length we accept from disk or callers (etcd's request limit is 1.5 MiB). */
export const RECORD_PAYLOAD_BYTES_MAX = 128 * 1024 * 1024;
export const ENTRY_PAYLOAD_OVERHEAD_BYTES = 17;

export interface SnapshotMarker {
  index: number;
  term: number;
  confState: ConfState;
}

export interface WalMetadata {
  memberId: NodeId;
  clusterId: NodeId;
}

const TWO_32 = 0x1_0000_0000;

export function writeU64(buf: Buffer, off: number, n: number): void {
  assert(Number.isSafeInteger(n) && n >= 0, () => `u64 value must be a non-negative safe integer, got ${n}`);
  buf.writeUInt32LE(n % TWO_32, off);
  buf.writeUInt32LE(Math.floor(n / TWO_32), off + 4);
}

/** A uint64 id (member, cluster, raft node ids: all 64 bits are significant). */
export function writeU64Id(buf: Buffer, off: number, id: NodeId): void {
  assert(typeof id === "bigint" && id >= 0n && id < 2n ** 64n, () => `u64 id out of range: ${String(id)}`);
  buf.writeBigUInt64LE(id, off);
}

export function readU64Id(buf: Buffer, off: number): NodeId {
  return buf.readBigUInt64LE(off);
}

export function readU64(buf: Buffer, off: number): number {
  return buf.readUInt32LE(off) + buf.readUInt32LE(off + 4) * TWO_32;
}

export function isKnownRecordType(t: number): t is RecordType {
  return t >= RecordType.Metadata && t <= RecordType.Snapshot;
}

/**
 * Fills the header of a record whose payload is already at `off + HEADER_BYTES`.
 * Returns the new chain value (this record's recordCrc).
 */
export function sealRecord(buf: Buffer, off: number, type: RecordType, payloadLength: number, chainCrc: number): number {
  assert(payloadLength <= RECORD_PAYLOAD_BYTES_MAX, () => `record payload of ${payloadLength} bytes is too large`);
  buf.writeUInt32LE(payloadLength, off);
  buf.writeUInt8(type, off + 4);
  buf.writeUInt8(0, off + 5);
  buf.writeUInt16LE(0, off + 6);
  const recordCrc = recordCrcOf(buf, off, payloadLength, chainCrc);
  buf.writeUInt32LE(recordCrc, off + 8);
  buf.writeUInt32LE(crc32Range(buf, off, off + 12), off + 12);
  return recordCrc;
}

/** The chain value a record is verified against: crcReset records seed the chain with their payload. */
export function recordCrcOf(buf: Buffer, off: number, payloadLength: number, chainCrc: number): number {
  return crc32(buf.subarray(off + HEADER_BYTES, off + HEADER_BYTES + payloadLength), crc32Range(buf, off, off + 8, chainCrc));
}

export function entryRecordBytes(e: Entry): number {
  return HEADER_BYTES + ENTRY_PAYLOAD_OVERHEAD_BYTES + e.data.byteLength;
}

export function writeEntryPayload(buf: Buffer, off: number, e: Entry): number {
  writeU64(buf, off, e.index);
  writeU64(buf, off + 8, e.term);
  buf.writeUInt8(e.type, off + 16);
  buf.set(e.data, off + 17);
  return ENTRY_PAYLOAD_OVERHEAD_BYTES + e.data.byteLength;
}

/** Decodes an entry payload; the data is copied so callers never alias a file buffer. */
export function readEntryPayload(p: Buffer): Entry {
  if (p.length < ENTRY_PAYLOAD_OVERHEAD_BYTES) throw new Error(`entry payload of ${p.length} bytes is too short`);
  const type = p.readUInt8(16);
  if (type > 2) throw new Error(`unknown entry type ${type}`);
  return {
    index: readU64(p, 0),
    term: readU64(p, 8),
    type: type as EntryType,
    data: new Uint8Array(p.subarray(17)),
  };
}

export const HARD_STATE_PAYLOAD_BYTES = 24;

export function writeHardStatePayload(buf: Buffer, off: number, hs: HardState): number {
  writeU64(buf, off, hs.term);
  writeU64Id(buf, off + 8, hs.vote);
  writeU64(buf, off + 16, hs.commit);
  return HARD_STATE_PAYLOAD_BYTES;
}

export function readHardStatePayload(p: Buffer): HardState {
  if (p.length !== HARD_STATE_PAYLOAD_BYTES) throw new Error(`hard state payload of ${p.length} bytes, want 24`);
  return { term: readU64(p, 0), vote: readU64Id(p, 8), commit: readU64(p, 16) };
}

export const METADATA_PAYLOAD_BYTES = 16;

export function writeMetadataPayload(buf: Buffer, off: number, m: WalMetadata): number {
  writeU64Id(buf, off, m.memberId);
  writeU64Id(buf, off + 8, m.clusterId);
  return METADATA_PAYLOAD_BYTES;
}

export function readMetadataPayload(p: Buffer): WalMetadata {
  if (p.length !== METADATA_PAYLOAD_BYTES) throw new Error(`metadata payload of ${p.length} bytes, want 16`);
  return { memberId: readU64Id(p, 0), clusterId: readU64Id(p, 8) };
}

export const CRC_RESET_PAYLOAD_BYTES = 4;

export function readCrcResetPayload(p: Buffer): number {
  if (p.length !== CRC_RESET_PAYLOAD_BYTES) throw new Error(`crc payload of ${p.length} bytes, want 4`);
  return p.readUInt32LE(0);
}

function idListBytes(ids: readonly NodeId[]): number {
  return 4 + 8 * ids.length;
}

export function snapshotPayloadBytes(s: SnapshotMarker): number {
  const c = s.confState;
  return 17 + idListBytes(c.voters) + idListBytes(c.learners) + idListBytes(c.votersOutgoing) + idListBytes(c.learnersNext);
}

export function writeSnapshotPayload(buf: Buffer, off: number, s: SnapshotMarker): number {
  writeU64(buf, off, s.index);
  writeU64(buf, off + 8, s.term);
  buf.writeUInt8(s.confState.autoLeave ? 1 : 0, off + 16);
  let at = off + 17;
  for (const ids of [s.confState.voters, s.confState.learners, s.confState.votersOutgoing, s.confState.learnersNext]) {
    buf.writeUInt32LE(ids.length, at);
    at += 4;
    for (const id of ids) {
      writeU64Id(buf, at, id);
      at += 8;
    }
  }
  return at - off;
}

export function readSnapshotPayload(p: Buffer): SnapshotMarker {
  if (p.length < 17 + 16) throw new Error(`snapshot payload of ${p.length} bytes is too short`);
  const autoLeave = p.readUInt8(16);
  if (autoLeave > 1) throw new Error(`bad autoLeave flag ${autoLeave}`);
  let at = 17;
  const lists: NodeId[][] = [];
  for (let l = 0; l < 4; l++) {
    if (at + 4 > p.length) throw new Error("snapshot payload truncated");
    const n = p.readUInt32LE(at);
    at += 4;
    if (at + 8 * n > p.length) throw new Error("snapshot payload truncated");
    const ids: NodeId[] = [];
    for (let i = 0; i < n; i++, at += 8) ids.push(readU64Id(p, at));
    lists.push(ids);
  }
  if (at !== p.length) throw new Error(`snapshot payload has ${p.length - at} trailing bytes`);
  return {
    index: readU64(p, 0),
    term: readU64(p, 8),
    confState: { voters: lists[0]!, learners: lists[1]!, votersOutgoing: lists[2]!, learnersNext: lists[3]!, autoLeave: autoLeave === 1 },
  };
}

/** Appends records to one growing buffer while keeping the CRC chain; used for every write. */
export class RecordWriter {
  private buf: Buffer;
  private length = 0;

  /** `into`, when given and large enough, is written over instead of a new allocation. */
  constructor(
    capacityBytes: number,
    private chain: number,
    into?: Buffer,
  ) {
    this.buf = into !== undefined && into.length >= capacityBytes ? into : Buffer.allocUnsafe(Math.max(capacityBytes, 64));
  }

  get chainCrc(): number {
    return this.chain;
  }

  get bytes(): number {
    return this.length;
  }

  /** Writes a record whose payload `fill` writes at the given offset; returns the record's offset. */
  append(type: RecordType, payloadBytesMax: number, fill: (buf: Buffer, off: number) => number): number {
    this.reserve(HEADER_BYTES + payloadBytesMax);
    const off = this.length;
    const payloadLength = fill(this.buf, off + HEADER_BYTES);
    assert(payloadLength <= payloadBytesMax, "record payload overran its reservation");
    this.chain = sealRecord(this.buf, off, type, payloadLength, this.chain);
    this.length = off + HEADER_BYTES + payloadLength;
    return off;
  }

  entry(e: Entry): number {
    return this.append(RecordType.Entry, ENTRY_PAYLOAD_OVERHEAD_BYTES + e.data.byteLength, (b, o) => writeEntryPayload(b, o, e));
  }

  /**
   * Copies records sealed before (already part of the chain) in front of what follows: the
   * chain is not touched. Returns their offset.
   */
  sealed(records: Buffer): number {
    this.reserve(records.length);
    const off = this.length;
    records.copy(this.buf, off);
    this.length = off + records.length;
    return off;
  }

  hardState(hs: HardState): number {
    return this.append(RecordType.HardState, HARD_STATE_PAYLOAD_BYTES, (b, o) => writeHardStatePayload(b, o, hs));
  }

  metadata(m: WalMetadata): number {
    return this.append(RecordType.Metadata, METADATA_PAYLOAD_BYTES, (b, o) => writeMetadataPayload(b, o, m));
  }

  snapshot(s: SnapshotMarker): number {
    return this.append(RecordType.Snapshot, snapshotPayloadBytes(s), (b, o) => writeSnapshotPayload(b, o, s));
  }

  /** The crcReset record is verified against its own payload, so the chain restarts from it. */
  crcReset(): number {
    const prev = this.chain;
    return this.append(RecordType.CrcReset, CRC_RESET_PAYLOAD_BYTES, (b, o) => {
      b.writeUInt32LE(prev, o);
      return CRC_RESET_PAYLOAD_BYTES;
    });
  }

  finish(): Buffer {
    return this.buf.subarray(0, this.length);
  }

  private reserve(extra: number): void {
    if (this.length + extra <= this.buf.length) return;
    const next = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.length + extra));
    this.buf.copy(next, 0, 0, this.length);
    this.buf = next;
  }
}
