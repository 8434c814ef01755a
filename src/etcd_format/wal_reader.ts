/**
 * Reads etcd 3.4's WAL (member/wal): segments named `%016x-%016x.wal` (sequence, first index),
 * each a run of records framed by an 8-byte little-endian length whose top byte, when its high bit
 * is set, holds the count of padding bytes (0x80|pad: etcd pads every record to 8 bytes so a length
 * is never torn). A record is walpb.Record{type, crc, data}; its crc is CRC-32C chained over the
 * data of every record before it (Go's crc32.Update), and every segment starts with a crc record
 * carrying the chain's value so far. Types: metadata (etcdserverpb.Metadata), entry
 * (raftpb.Entry), state (raftpb.HardState), crc, snapshot (walpb.Snapshot).
 *
 * What etcd's ReadAll does, this does, with one difference: etcd repairs a torn tail of the last
 * segment when it opens the WAL for writing; here every torn or corrupt byte is refused with the
 * file and offset (an import never starts from a log it had to guess at). A segment ends at its
 * first zero length (the preallocated rest of the file), as etcd's decoder does; the rest of the
 * file must then be zeros. etcd's decoder stops at a zero length whatever follows, and ReadAll in
 * write mode zeroes what follows (wal.go: "this zero record may be followed by non-zero records
 * from a torn write"): that is a repair too, so here non-zero bytes after the end are refused. A
 * single flipped bit makes one: a 16-byte record without padding has the length 0x10.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { crc32cUpdate } from "../mvcc/crc32c.js";
import { EtcdFileError } from "./file_error.js";
import { asSafeNumber, expectBytes, expectVarint, ProtoFieldError, protoFields } from "./proto_fields.js";
import {
  decodeEtcdEntry,
  decodeEtcdHardState,
  decodeEtcdWalMetadata,
  decodeEtcdWalSnapshot,
  type EtcdEntry,
  type EtcdHardState,
  type EtcdWalMetadata,
  type EtcdWalSnapshot,
} from "./raft_records.js";

/** walpb record types (wal/wal.go). */
export const WAL_METADATA_TYPE = 1;
export const WAL_ENTRY_TYPE = 2;
export const WAL_STATE_TYPE = 3;
export const WAL_CRC_TYPE = 4;
export const WAL_SNAPSHOT_TYPE = 5;

const FRAME_BYTES = 8;
/** etcd's wal.SegmentSizeBytes: the last segment is always preallocated to it (a cut truncates only the segment it leaves). */
export const ETCD_SEGMENT_SIZE_BYTES = 64 * 1000 * 1000;

export interface EtcdWalReadOptions {
  /** The snapshot marker to read from (index 0: from the start). */
  readonly from?: EtcdWalSnapshot;
  /** The size the last segment must have (etcd's SegmentSizeBytes): shorter is a truncated file. */
  readonly segmentSizeBytes?: number;
}
const WAL_NAME = /^([0-9a-f]{16})-([0-9a-f]{16})\.wal$/;

export interface EtcdWalSegment {
  readonly name: string;
  readonly seq: bigint;
  readonly index: number;
}

export interface EtcdWal {
  readonly metadata: EtcdWalMetadata;
  /** The last hard state saved (zero when none). */
  readonly hardState: EtcdHardState;
  /** Entries after `from.index`, a later entry at an index replacing the tail from there (a new leader's log). */
  readonly entries: readonly EtcdEntry[];
  /** Every snapshot marker read, in order. */
  readonly snapshots: readonly EtcdWalSnapshot[];
  /** The segments read (file names). */
  readonly segments: readonly string[];
  /**
   * The last segment is shorter than etcd preallocates because etcd's own wal.Repair cut a torn
   * tail off it; the copy of the segment from before the repair (`<segment>.broken`, which etcd
   * leaves beside it and ignores from then on). Undefined otherwise.
   */
  readonly repairedBy?: string;
}

/** The WAL's segments in sequence order; refuses gaps in the sequence (etcd's isValidSeq). */
export function etcdWalSegments(walDir: string): EtcdWalSegment[] {
  const segs: EtcdWalSegment[] = [];
  for (const name of readdirSync(walDir).sort()) {
    const m = WAL_NAME.exec(name);
    if (!m) continue; // etcd ignores other files (its *.tmp preallocations)
    segs.push({ name, seq: BigInt("0x" + m[1]!), index: asSafeNumber(BigInt("0x" + m[2]!), `index in ${name}`) });
  }
  for (let i = 1; i < segs.length; i++) {
    if (segs[i]!.seq !== segs[i - 1]!.seq + 1n) throw new EtcdFileError(join(walDir, segs[i]!.name), 0, `WAL sequence jumps from ${segs[i - 1]!.name}: a segment is missing`);
  }
  return segs;
}

/** The newest segment that may hold the marker of a snapshot at `index` and everything after (etcd's searchIndex). */
function firstSegmentFor(segs: readonly EtcdWalSegment[], index: number): number {
  for (let i = segs.length - 1; i >= 0; i--) if (segs[i]!.index <= index) return i;
  return -1;
}

interface RawRecord {
  readonly type: number;
  readonly crc: number;
  readonly data: Uint8Array;
  readonly offset: number;
}

const ZEROS = Buffer.alloc(64 * 1024);

/**
 * etcd 3.4 repairs a torn last record of its last segment when it starts (wal.Repair: the records
 * from there were never synced, so never acknowledged); an import reads no log it would have to
 * cut itself, and says how to have etcd do it.
 */
const TORN_HINT = "; if etcd lost power while writing it, start etcd 3.4 on this data dir once (it repairs a torn last record, keeping <segment>.broken), then etcetera imports the repaired WAL";

/** The offset of the first non-zero byte of `buf` from `from` on, or -1 (memcmp in 64 KiB chunks: the rest of a 64 MB segment). */
function firstNonZero(buf: Buffer, from: number): number {
  for (let at = from; at < buf.length; at += ZEROS.length) {
    const end = Math.min(at + ZEROS.length, buf.length);
    if (buf.compare(ZEROS, 0, end - at, at, end) !== 0) {
      for (let i = at; i < end; i++) if (buf[i] !== 0) return i;
    }
  }
  return -1;
}

/** The records of one segment, up to its end or its first zero length (zeros after it). */
function* segmentRecords(file: string, buf: Buffer, isLast: boolean): Generator<RawRecord> {
  let off = 0;
  while (off < buf.length) {
    if (off + FRAME_BYTES > buf.length) {
      if (firstNonZero(buf, off) < 0) return;
      throw new EtcdFileError(file, off, `torn record length: ${buf.length - off} bytes left of an 8-byte frame`);
    }
    const lenField = buf.readBigUInt64LE(off);
    if (lenField === 0n) {
      const junk = firstNonZero(buf, off + FRAME_BYTES);
      if (junk >= 0) throw new EtcdFileError(file, junk, `non-zero byte after the segment's end (a zero record length at ${off}): a torn write etcd would zero on open, or a damaged length`);
      return;
    }
    const recBytes = Number(lenField & 0x00ffffffffffffffn);
    const padBytes = lenField >= 1n << 63n ? Number((lenField >> 56n) & 7n) : 0;
    if (lenField >= 1n << 63n && (lenField >> 56n) >> 3n !== 0x10n) throw new EtcdFileError(file, off, `record length 0x${lenField.toString(16)} has a bad padding byte`);
    if (lenField < 1n << 63n && lenField >= 1n << 56n) throw new EtcdFileError(file, off, `record length 0x${lenField.toString(16)} has bits set in its padding byte without the padding flag`);
    if (recBytes > buf.length - off - FRAME_BYTES || recBytes + padBytes > buf.length - off - FRAME_BYTES) {
      throw new EtcdFileError(file, off, `record of ${recBytes}+${padBytes} bytes overruns the file (${buf.length - off - FRAME_BYTES} bytes left): torn write${isLast ? TORN_HINT : ""}`);
    }
    const body = buf.subarray(off + FRAME_BYTES, off + FRAME_BYTES + recBytes);
    let type: number | undefined;
    let crc = 0;
    let data: Uint8Array = new Uint8Array(0);
    try {
      for (const f of protoFields(body)) {
        if (f.field === 1) type = asSafeNumber(expectVarint(f, "Record.type"), "Record.type");
        else if (f.field === 2) {
          const v = expectVarint(f, "Record.crc");
          if (v > 0xffffffffn) throw new ProtoFieldError(`Record.crc ${v} exceeds 32 bits`);
          crc = Number(v);
        } else if (f.field === 3) data = expectBytes(f, "Record.data");
      }
    } catch (err) {
      if (err instanceof ProtoFieldError) throw new EtcdFileError(file, off, `walpb.Record does not decode: ${err.message}`);
      throw err;
    }
    if (type === undefined) throw new EtcdFileError(file, off, "walpb.Record without a type");
    yield { type, crc, data, offset: off };
    off += FRAME_BYTES + recBytes + padBytes;
  }
}

/**
 * Reads the WAL from the snapshot marker `options.from` (index 0: from the start), as etcd's ReadAll.
 * Throws EtcdFileError on any damage, a conflicting metadata record, an entry that leaves a gap,
 * or a missing marker for `from`.
 */
export function readEtcdWal(walDir: string, options: EtcdWalReadOptions = {}): EtcdWal {
  const from = options.from ?? { index: 0, term: 0 };
  const segmentSizeBytes = options.segmentSizeBytes ?? ETCD_SEGMENT_SIZE_BYTES;
  const segs = etcdWalSegments(walDir);
  if (segs.length === 0) throw new EtcdFileError(walDir, 0, "no WAL segments (%016x-%016x.wal)");
  const first = firstSegmentFor(segs, from.index);
  if (first < 0) throw new EtcdFileError(join(walDir, segs[0]!.name), 0, `no segment starts at or before the snapshot index ${from.index}`);
  let metadata: EtcdWalMetadata | undefined;
  let metadataBytes: Buffer | undefined;
  let hardState: EtcdHardState = { term: 0, vote: 0n, commit: 0 };
  let hardStateAt = { file: "", offset: 0 };
  const entries: EtcdEntry[] = [];
  const snapshots: EtcdWalSnapshot[] = [];
  let matched = false;
  let chain = 0;
  let repairedBy: string | undefined;
  const read = segs.slice(first);
  for (const seg of read) {
    const file = join(walDir, seg.name);
    const buf = readFileSync(file);
    const isLast = seg === read[read.length - 1];
    if (isLast && buf.length < segmentSizeBytes) {
      // etcd's repair truncates the last segment at its last whole record, after copying it to
      // <segment>.broken; etcd appends to the shorter file from then on. Without that copy a short
      // segment is a file cut short (a copy interrupted): records may be missing, so it is refused.
      if (!existsSync(`${file}.broken`)) {
        throw new EtcdFileError(file, buf.length, `the last segment is ${buf.length} bytes, etcd preallocates it to ${segmentSizeBytes}: truncated (etcd's own repair leaves ${seg.name}.broken beside the segment it cut)`);
      }
      repairedBy = `${file}.broken`;
    }
    let records = 0;
    for (const rec of segmentRecords(file, buf, isLast)) {
      const decode = <T>(what: string, fn: (b: Uint8Array) => T): T => {
        try {
          return fn(rec.data);
        } catch (err) {
          if (err instanceof ProtoFieldError) throw new EtcdFileError(file, rec.offset, `${what} does not decode: ${err.message}`);
          throw err;
        }
      };
      if (records === 0 && rec.type !== WAL_CRC_TYPE) throw new EtcdFileError(file, rec.offset, `segment starts with a record of type ${rec.type}, not a crc record`);
      records++;
      if (rec.type === WAL_CRC_TYPE) {
        // The chain carries across segments: a crc record must hold the value reached so far.
        if (chain !== 0 && rec.crc !== chain) throw new EtcdFileError(file, rec.offset, `crc record holds 0x${rec.crc.toString(16)}, the chain is at 0x${chain.toString(16)}`);
        chain = rec.crc;
        continue;
      }
      chain = crc32cUpdate(chain, rec.data);
      if (rec.crc !== chain) throw new EtcdFileError(file, rec.offset, `record crc 0x${rec.crc.toString(16)} does not match its data (0x${chain.toString(16)})${isLast ? TORN_HINT : ""}`);
      switch (rec.type) {
        case WAL_METADATA_TYPE: {
          const b = Buffer.from(rec.data);
          if (metadataBytes !== undefined && !metadataBytes.equals(b)) throw new EtcdFileError(file, rec.offset, "metadata record conflicts with an earlier one");
          metadataBytes = b;
          metadata = decode("etcdserverpb.Metadata", decodeEtcdWalMetadata);
          break;
        }
        case WAL_ENTRY_TYPE: {
          const e = decode("raftpb.Entry", decodeEtcdEntry);
          if (e.index > from.index) {
            const up = e.index - from.index - 1;
            if (up > entries.length) throw new EtcdFileError(file, rec.offset, `entry ${e.index} leaves a gap after index ${from.index + entries.length}`);
            entries.length = up;
            entries.push(e);
          }
          break;
        }
        case WAL_STATE_TYPE:
          hardState = decode("raftpb.HardState", decodeEtcdHardState);
          hardStateAt = { file, offset: rec.offset };
          break;
        case WAL_SNAPSHOT_TYPE: {
          const s = decode("walpb.Snapshot", decodeEtcdWalSnapshot);
          snapshots.push(s);
          if (s.index === from.index) {
            if (s.term !== from.term) throw new EtcdFileError(file, rec.offset, `snapshot marker ${s.index} has term ${s.term}, the snapshot has term ${from.term}`);
            matched = true;
          }
          break;
        }
        default:
          throw new EtcdFileError(file, rec.offset, `unknown record type ${rec.type}`);
      }
    }
    if (records === 0) throw new EtcdFileError(file, 0, "empty segment: no crc record");
  }
  const lastFile = join(walDir, read[read.length - 1]!.name);
  if (metadata === undefined) throw new EtcdFileError(lastFile, 0, "no metadata record in the WAL");
  if (!matched) throw new EtcdFileError(lastFile, 0, `no snapshot marker for index ${from.index} term ${from.term} in the WAL`);
  // Raft's invariants across records (the record type is outside the crc, so a flipped type bit
  // turns an entry into a hard state or back; these catch what the strict decoding lets through).
  const lastIndex = entries.length > 0 ? entries[entries.length - 1]!.index : from.index;
  const maxTerm = entries.reduce((t, e) => Math.max(t, e.term), from.term);
  if (hardState.term < maxTerm) throw new EtcdFileError(hardStateAt.file || lastFile, hardStateAt.offset, `hard state term ${hardState.term} is below the term ${maxTerm} of an entry in the log`);
  if (hardState.commit > lastIndex) throw new EtcdFileError(hardStateAt.file || lastFile, hardStateAt.offset, `hard state commit ${hardState.commit} is beyond the last entry ${lastIndex}`);
  // Terms never fall along the log, starting from the snapshot's (a hard state whose type byte
  // flipped to an entry reads as Entry{Type: term, Term: vote, Index: commit}).
  for (let i = 0; i < entries.length; i++) {
    const before = i === 0 ? from.term : entries[i - 1]!.term;
    if (entries[i]!.term < before) throw new EtcdFileError(lastFile, 0, `entry ${entries[i]!.index} has term ${entries[i]!.term}, below the term ${before} of the ${i === 0 ? "snapshot" : "entry"} before it`);
  }
  return { metadata, hardState, entries, snapshots, segments: read.map((s) => s.name), ...(repairedBy === undefined ? {} : { repairedBy }) };
}
