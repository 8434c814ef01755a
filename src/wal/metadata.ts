/**
 * The member and cluster ids a WAL was created with, read before the member opens it (etcd reads
 * them from the WAL's metadata on restart: a member that joined a running cluster got its id from
 * that cluster, so --initial-cluster cannot tell it again).
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { scanSegment } from "./decoder.js";
import { RecordType, readMetadataPayload, type WalMetadata } from "./record.js";
import { listSegments, readSegmentData } from "./segment.js";

/** undefined when `walDir` holds no WAL. */
export async function readWalMetadata(walDir: string): Promise<WalMetadata | undefined> {
  if (!existsSync(walDir)) return undefined;
  const segments = listSegments(walDir);
  if (segments.length === 0) return undefined;
  // Every segment's header repeats the metadata; the newest is the one the WAL opens from.
  const last = segments[segments.length - 1]!;
  const { buf } = await readSegmentData(join(walDir, last.file));
  const record = scanSegment(buf, undefined).records.find((r) => r.type === RecordType.Metadata);
  if (record === undefined) throw new Error(`${join(walDir, last.file)}: no metadata record in the segment header`);
  return readMetadataPayload(record.payload);
}
