/**
 * Tells a lost unsynced write from a zeroed header in synced data.
 *
 * The only records the WAL writes without a sync are commit-only hard states (etcd's
 * raft.MustSync: a new commit index alone need not be durable). Every durable write starts at the
 * end of the last durable one and covers the unsynced records between (wal.ts, writeDurable), and
 * writes are issued one at a time. So after a power cut, a hole (a zero header) followed by more
 * records can only be one of two things:
 *  - unsynced writes of which the page cache kept a later one and dropped an earlier one: the
 *    hole is a commit-only hard state, and so is everything after it (a durable write after it
 *    would have filled it);
 *  - damage to synced data, which must never pass for the end of the log.
 *
 * The records after the hole are recognised without the hole's CRC: a header's own CRC needs no
 * chain, and from the second record on each record's CRC is seeded by the previous one's. They
 * count as a lost write's successors only if the hole is a whole number of hard-state records long
 * and every record after it is a hard state with the term and vote of
 * the last hard state before the hole and a commit that never goes down: dropping them loses a
 * commit index, which raft learns again from the leader, and nothing that was acknowledged.
 * Anything else (an entry, a snapshot marker, a new term or vote, a broken chain, stray bytes)
 * stays corruption. etcd treats any zero length as the end of the log (and zeroes what follows).
 */
import { crc32 } from "node:zlib";
import type { HardState } from "../raft/types.js";
import { HARD_STATE_PAYLOAD_BYTES, HEADER_BYTES, RecordType, readHardStatePayload, recordCrcOf, writeHardStatePayload } from "./record.js";
import { nonZeroEnd } from "./zeros.js";

export interface LostWrite {
  /** Commit-only hard state records found after the hole (all dropped by the repair). */
  readonly laterRecords: number;
  /** One past the last of them: everything from here on is zero. */
  readonly end: number;
}

const HARD_STATE_RECORD_BYTES = HEADER_BYTES + HARD_STATE_PAYLOAD_BYTES;

interface RecordView {
  readonly type: RecordType;
  readonly payload: Buffer;
}

/**
 * `hole` is the offset of a zero header with non-zero data after it; `before` the records read up
 * to it. Returns the lost write's extent, or undefined when the data after the hole is not only
 * commit-only hard states of the same term and vote (then it is corruption).
 *
 * From the hole on, every 40-byte slot (one hard-state record) up to the last non-zero byte must
 * be zero (a lost write), a whole valid record, or a record's prefix followed by zeros (the newest
 * write torn by the cut, or a page written back without the next); consecutive whole records must
 * chain. A slot that starts with zeros and ends in data is refused: that is a zeroed header in
 * front of its payload, or a record split by a lost page, which this cannot check.
 */
export function lostUnsyncedWrite(buf: Buffer, hole: number, before: readonly RecordView[]): LostWrite | undefined {
  const reference = lastHardState(before);
  if (reference === undefined) return undefined;
  const end = nonZeroEnd(buf, hole);
  const expected = Buffer.alloc(HARD_STATE_RECORD_BYTES);
  expected.writeUInt32LE(HARD_STATE_PAYLOAD_BYTES, 0);
  expected.writeUInt8(RecordType.HardState, 4);
  writeHardStatePayload(expected, HEADER_BYTES, { ...reference, commit: 0 });
  let laterRecords = 0;
  let prev: { crc: number; commit: number } | undefined;
  for (let slot = hole; slot < end; slot += HARD_STATE_RECORD_BYTES) {
    const slotEnd = Math.min(slot + HARD_STATE_RECORD_BYTES, buf.length);
    const kept = nonZeroEnd(buf.subarray(0, slotEnd), slot) - slot;
    if (kept === 0) {
      prev = undefined;
      continue;
    }
    if (slotEnd - slot < HARD_STATE_RECORD_BYTES && kept === slotEnd - slot) return undefined;
    laterRecords++;
    const whole = wholeRecord(buf, slot, slotEnd, reference);
    if (whole !== undefined) {
      if (prev !== undefined && (recordCrcOf(buf, slot, HARD_STATE_PAYLOAD_BYTES, prev.crc) !== whole.crc || whole.commit < prev.commit)) return undefined;
      prev = whole;
      continue;
    }
    if (!isRecordPrefix(buf, slot, kept, expected)) return undefined;
    prev = undefined;
  }
  if (laterRecords === 0) return undefined;
  return { laterRecords, end };
}

function lastHardState(records: readonly RecordView[]): HardState | undefined {
  for (let i = records.length - 1; i >= 0; i--) {
    const r = records[i]!;
    if (r.type !== RecordType.HardState) continue;
    try {
      return readHardStatePayload(r.payload);
    } catch {
      return undefined;
    }
  }
  return undefined;
}

/** The slot as a whole commit-only hard state of the reference's term and vote, or undefined. */
function wholeRecord(buf: Buffer, slot: number, slotEnd: number, reference: HardState): { crc: number; commit: number } | undefined {
  if (slotEnd - slot < HARD_STATE_RECORD_BYTES || !isHardStateHeader(buf, slot)) return undefined;
  const hs = readHardStatePayload(buf.subarray(slot + HEADER_BYTES, slotEnd));
  if (hs.term !== reference.term || hs.vote !== reference.vote || hs.commit < reference.commit) return undefined;
  return { crc: buf.readUInt32LE(slot + 8), commit: hs.commit };
}

/**
 * The slot's first `kept` bytes (the rest zero) are the start of such a record: the fixed header
 * bytes, the header CRC once it is all there, and the term and vote as far as they go. The
 * record CRC and the commit cannot be checked without the rest.
 */
function isRecordPrefix(buf: Buffer, slot: number, kept: number, expected: Buffer): boolean {
  for (let i = 0; i < kept; i++) {
    const known = i < 8 || (i >= HEADER_BYTES && i < HEADER_BYTES + 16);
    if (known && buf[slot + i] !== expected[i]) return false;
  }
  return kept < HEADER_BYTES || crc32(buf.subarray(slot, slot + 12)) === buf.readUInt32LE(slot + 12);
}
function isHardStateHeader(buf: Buffer, off: number): boolean {
  return (
    crc32(buf.subarray(off, off + 12)) === buf.readUInt32LE(off + 12) &&
    buf.readUInt32LE(off) === HARD_STATE_PAYLOAD_BYTES &&
    buf.readUInt8(off + 4) === RecordType.HardState &&
    buf.readUInt8(off + 5) === 0 &&
    buf.readUInt16LE(off + 6) === 0
  );
}
