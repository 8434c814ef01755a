/**
 * Reads the records of one segment and classifies how the data ends. Pure (works on a buffer),
 * so the corruption rules are unit-testable and shared by open, read-back and dump tools.
 *
 * How the data may end:
 *  - clean: EOF, or a zero header followed only by zeros (the preallocated tail);
 *  - failure at offset X, marked `torn` when it looks like a write cut short and nothing was
 *    written after it:
 *      * the file ends inside the record (a truncated write), or
 *      * the header is invalid but every non-zero byte from X on lies inside the 16 header bytes
 *        (a header cut short), or
 *      * the header is valid, the record CRC is not, and the record's last bytes are zero with only
 *        zeros after them (the payload was cut short), or
 *      * a zero header followed only by commit-only hard states of the same term and vote (a power
 *        cut kept a later unsynced write and lost an earlier one: lost_write.ts says why nothing
 *        acknowledged can be in it).
 *    Any other failure with non-zero data after the failing record is never torn: that is
 *    corruption in the middle, and the node must not start (etcd would take a zero header for the
 *    end of the log whatever follows). A process crash (SIGKILL) never leaves a hole,
 *    because the kernel completes a write, or a prefix of it, in the page cache. Whether a torn failure may be repaired is the
 *    caller's decision (only in the last segment, and only after its header records).
 */
import { crc32Range } from "./crc32_range.js";
import { lostUnsyncedWrite } from "./lost_write.js";
import { HEADER_BYTES, RECORD_PAYLOAD_BYTES_MAX, RecordType, isKnownRecordType, recordCrcOf } from "./record.js";
import { firstNonZero, isZero, nonZeroEnd } from "./zeros.js";

export { nonZeroEnd } from "./zeros.js";

export interface DecodedRecord {
  type: RecordType;
  /** Byte offset of the record header in the segment. */
  offset: number;
  /** Header plus payload. */
  totalBytes: number;
  payload: Buffer;
  /** Chain value this record was verified against (needed to re-verify it alone later). */
  seedCrc: number;
  /** This record's CRC, the chain value for the next record. */
  crc: number;
}

export interface ScanFailure {
  offset: number;
  reason: string;
  torn: boolean;
  /** One past the last non-zero byte at or after `offset` (the extent a repair must zero). */
  nonZeroEnd: number;
}

export interface ScanResult {
  records: DecodedRecord[];
  /** Offset just after the last valid record: where the next record goes. */
  endOffset: number;
  /** The chain value after the last valid record (undefined if no record was read). */
  chainCrc: number | undefined;
  failure: ScanFailure | undefined;
}

/**
 * Scans buf from offset 0. `seedCrc` is the chain value expected in the first crcReset record
 * (undefined when this is the first segment read, whose predecessor is unknown).
 */
export function scanSegment(buf: Buffer, seedCrc: number | undefined): ScanResult {
  const records: DecodedRecord[] = [];
  let chain = seedCrc;
  let off = 0;
  const fail = (reason: string, torn: (z: number) => boolean): ScanResult => {
    const z = nonZeroEnd(buf, off);
    return { records, endOffset: off, chainCrc: records.length > 0 ? chain : undefined, failure: { offset: off, reason, torn: torn(z), nonZeroEnd: z } };
  };
  const done = (): ScanResult => ({ records, endOffset: off, chainCrc: records.length > 0 ? chain : undefined, failure: undefined });

  while (off < buf.length) {
    if (off + HEADER_BYTES > buf.length) {
      if (nonZeroEnd(buf, off) === off) return done();
      return fail("unexpected end of file inside a record header", () => true);
    }
    if (isZero(buf, off, off + HEADER_BYTES)) {
      const z = nonZeroEnd(buf, off);
      if (z === off) return done();
      const lost = lostUnsyncedWrite(buf, off, records);
      if (lost !== undefined) {
        return fail(`lost unsynced write: a hole before ${lost.laterRecords} later commit-only hard state record(s)`, () => true);
      }
      return fail(`unexpected non-zero data at offset ${firstNonZero(buf, off)} after the end of records`, () => false);
    }
    if (crc32Range(buf, off, off + 12) !== buf.readUInt32LE(off + 12)) {
      return fail("record header crc mismatch", (z) => z <= off + HEADER_BYTES);
    }
    const length = buf.readUInt32LE(off);
    const type = buf.readUInt8(off + 4);
    if (!isKnownRecordType(type) || buf.readUInt8(off + 5) !== 0 || buf.readUInt16LE(off + 6) !== 0 || length > RECORD_PAYLOAD_BYTES_MAX) {
      return fail(`invalid record header (type ${type}, length ${length})`, () => false);
    }
    const end = off + HEADER_BYTES + length;
    if (end > buf.length) return fail("unexpected end of file inside a record", () => true);
    const payload = buf.subarray(off + HEADER_BYTES, end);
    if (type === RecordType.CrcReset) {
      if (length !== 4) return fail(`crc record of ${length} bytes`, () => false);
      const prev = payload.readUInt32LE(0);
      if (chain !== undefined && prev !== chain) {
        return fail(`crc mismatch: segment continues chain ${prev.toString(16)}, previous segment ended at ${chain.toString(16)}`, () => false);
      }
      chain = prev;
    } else if (chain === undefined) {
      return fail("segment does not start with a crc record", () => false);
    }
    const crc = recordCrcOf(buf, off, length, chain);
    if (crc !== buf.readUInt32LE(off + 8)) return fail("crc mismatch", (z) => z < end);
    records.push({ type, offset: off, totalBytes: end - off, payload, seedCrc: chain, crc });
    chain = crc;
    off = end;
  }
  return done();
}
