/**
 * Segment files: `<seq:016x>-<index:016x>.wal` as in etcd, where `seq` counts segments from 0
 * and `index` is the raft index the segment's first new entry will have (the last entry index
 * at the time of the cut, plus one; 0 for the very first segment).
 */
import fs from "node:fs";
import path from "node:path";
import { WalCorruptionError } from "./errors.js";

export interface SegmentName {
  seq: number;
  index: number;
  file: string;
}

const NAME = /^([0-9a-f]{16})-([0-9a-f]{16})\.wal$/;

export function segmentFileName(seq: number, index: number): string {
  return `${seq.toString(16).padStart(16, "0")}-${index.toString(16).padStart(16, "0")}.wal`;
}

export function parseSegmentName(file: string): SegmentName | undefined {
  const m = NAME.exec(file);
  if (!m) return undefined;
  const seq = Number.parseInt(m[1]!, 16);
  const index = Number.parseInt(m[2]!, 16);
  if (!Number.isSafeInteger(seq) || !Number.isSafeInteger(index)) return undefined;
  return { seq, index, file };
}

/** The segments in dir sorted by seq; throws if the sequence has a hole (a lost file). */
export function listSegments(dir: string): SegmentName[] {
  const names = fs
    .readdirSync(dir)
    .map(parseSegmentName)
    .filter((n): n is SegmentName => n !== undefined)
    .sort((a, b) => a.seq - b.seq);
  for (let i = 1; i < names.length; i++) {
    if (names[i]!.seq !== names[i - 1]!.seq + 1) {
      throw new WalCorruptionError(path.join(dir, names[i]!.file), 0, `segment sequence gap: ${names[i - 1]!.file} is followed by ${names[i]!.file}`);
    }
  }
  return names;
}

/**
 * etcd's searchIndex: the position of the last segment whose first index is ≤ index (scanning
 * from the newest, because after a conflict a later segment can start below an earlier one).
 */
export function searchIndex(names: readonly SegmentName[], index: number): number {
  for (let i = names.length - 1; i >= 0; i--) if (names[i]!.index <= index) return i;
  return -1;
}

/** fsync a directory so that creates, renames and unlinks in it are durable. */
export async function fsyncDir(dir: string): Promise<void> {
  const fh = await fs.promises.open(dir, "r");
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}

const ZERO_CHUNK = Buffer.alloc(1024 * 1024);

/**
 * Preallocates a file by writing zeros (fallocate is not reachable from Node; a sparse
 * ftruncate would make every later fdatasync allocate blocks and journal metadata), then
 * syncs it, so appends later overwrite allocated blocks and fdatasync flushes data only.
 */
export async function writeZeros(fh: fs.promises.FileHandle, from: number, to: number): Promise<void> {
  for (let at = from; at < to; ) {
    const n = Math.min(ZERO_CHUNK.length, to - at);
    const { bytesWritten } = await fh.write(ZERO_CHUNK, 0, n, at);
    at += bytesWritten;
  }
}
