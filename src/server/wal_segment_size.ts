/**
 * TEST-ONLY: the raft WAL's segment size, from ETCETERA_WAL_SEGMENT_SIZE_BYTES (etcd's tests set
 * wal.SegmentSizeBytes the same way; etcd has no flag for it). The power-loss suite cuts the
 * power during a segment cut, which at the default 64 MiB comes once per ~30,000 small puts: too
 * rare for CI. Smaller segments are as safe, only slower; the member logs a warning when set.
 */
import { DEFAULT_SEGMENT_SIZE_BYTES } from "../wal/wal.js";
import type { Logger } from "./logger.js";

export const WAL_SEGMENT_SIZE_ENV = "ETCETERA_WAL_SEGMENT_SIZE_BYTES";

/** The segment size the environment asks for, or the default; throws on a malformed value. */
export function walSegmentSizeFromEnv(env: Readonly<Record<string, string | undefined>>): { bytes: number; fromEnv: boolean } {
  const raw = env[WAL_SEGMENT_SIZE_ENV];
  if (raw === undefined || raw === "") return { bytes: DEFAULT_SEGMENT_SIZE_BYTES, fromEnv: false };
  const bytes = Number(raw);
  if (!Number.isSafeInteger(bytes) || bytes < 1024) throw new Error(`${WAL_SEGMENT_SIZE_ENV}=${raw}: want an integer number of bytes ≥ 1024`);
  return { bytes, fromEnv: true };
}

/** The segment size for RaftStorage.open, warning in the log when the environment changed it. */
export function walSegmentSizeOption(env: Readonly<Record<string, string | undefined>>, logger: Logger): number {
  const r = walSegmentSizeFromEnv(env);
  if (r.fromEnv) logger.warn({ segmentSizeBytes: r.bytes }, `TEST-ONLY: ${WAL_SEGMENT_SIZE_ENV} sets the raft WAL's segment size`);
  return r.bytes;
}
