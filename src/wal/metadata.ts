/**
 * The member and cluster ids a WAL was created with, read before the member opens it (etcd reads
 * them from the WAL's metadata on restart: a member that joined a running cluster got its id from
 * that cluster, so --initial-cluster cannot tell it again).
 */
import { existsSync, promises as fsp } from "node:fs";
import { join } from "node:path";
import { scanSegment } from "./decoder.js";
import { RecordType, readMetadataPayload, type WalMetadata } from "./record.js";
import { listSegments } from "./segment.js";

/** Enough for a segment's header records (crc, metadata, then the snapshot marker). */
const HEADER_READ_BYTES = 4096;

/** undefined when `walDir` holds no WAL. */
export async function readWalMetadata(walDir: string): Promise<WalMetadata | undefined> {
  if (!existsSync(walDir)) return undefined;
  const segments = listSegments(walDir);
  if (segments.length === 0) return undefined;
  // Every segment's header repeats the metadata; the newest is the one the WAL opens from.
  const last = segments[segments.length - 1]!;
  // Only the header is read: the whole segment is scanned (and checked) when the WAL opens, and
  // reading it twice cost a 100k-entry restart ~150 ms. A scan of this prefix may end inside a
  // later record; the metadata record before that cut is whole and CRC-checked.
  const fh = await fsp.open(join(walDir, last.file), "r");
  let buf: Buffer;
  try {
    const head = Buffer.alloc(HEADER_READ_BYTES);
    const { bytesRead } = await fh.read(head, 0, HEADER_READ_BYTES, 0);
    buf = head.subarray(0, bytesRead);
  } finally {
    await fh.close();
  }
  const record = scanSegment(buf, undefined).records.find((r) => r.type === RecordType.Metadata);
  if (record === undefined) throw new Error(`${join(walDir, last.file)}: no metadata record in the segment header`);
  return readMetadataPayload(record.payload);
}
