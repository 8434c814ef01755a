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

const READ_CHUNK_BYTES = 1024 * 1024;
/** Zeros kept after the last non-zero chunk: the decoder needs to see where the data ends. */
const ZERO_MARGIN_BYTES = READ_CHUNK_BYTES;

export interface SegmentData {
  /** The file's bytes, without the all-zero chunks of its preallocated tail beyond a margin. */
  buf: Buffer;
  /** The file's real size. */
  fileBytes: number;
}

/**
 * Reads a segment without holding its preallocated zero tail in memory (a fresh 64 MiB segment
 * is almost all zeros). Everything dropped is zero, so a scan of `buf` sees what a scan of the
 * whole file sees — except a record whose own trailing zeros run past the margin, which the
 * caller detects (a torn record at the end of a short buffer) and re-reads whole.
 */
export async function readSegmentData(file: string): Promise<SegmentData> {
  const fh = await fs.promises.open(file, "r");
  try {
    const { size } = await fh.stat();
    const kept: Buffer[] = [];
    let zeroRun = 0;
    // One read buffer for the whole file; only non-zero chunks are copied out and kept.
    const chunk = Buffer.allocUnsafe(Math.min(READ_CHUNK_BYTES, size));
    for (let at = 0; at < size; ) {
      const want = Math.min(chunk.length, size - at);
      let got = 0;
      while (got < want) {
        const { bytesRead } = await fh.read(chunk, got, want - got, at + got);
        if (bytesRead === 0) break;
        got += bytesRead;
      }
      if (got < want) throw new Error(`${file}: short read at offset ${at + got}`);
      at += got;
      if (chunk.subarray(0, got).equals(ZERO_CHUNK.subarray(0, got))) {
        zeroRun += got;
        continue;
      }
      if (zeroRun > 0) kept.push(Buffer.alloc(zeroRun));
      zeroRun = 0;
      kept.push(Buffer.from(chunk.subarray(0, got)));
    }
    if (zeroRun > 0) kept.push(Buffer.alloc(Math.min(zeroRun, ZERO_MARGIN_BYTES)));
    return { buf: Buffer.concat(kept), fileBytes: size };
  } finally {
    await fh.close();
  }
}
