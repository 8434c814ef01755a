/**
 * Snapshot files (etcd's snap.Snapshotter): one file per snapshot, `<term:016x>-<index:016x>.snap`,
 * holding the raft metadata (index, term, conf state) and the application's data (for etcetera a
 * pointer to / image of the backend), written atomically and checksummed.
 *
 * File layout (little-endian):
 *   0   8  magic "etcsnap1"
 *   8   4  CRC-32 (node:zlib) of everything from offset 16 to the end
 *  12   4  metadata length M
 *  16   M  metadata: index u64, term u64, conf state (the WAL snapshot-record encoding)
 *  16+M    data (the rest of the file)
 *
 * Loading follows etcd: the newest file that reads back intact wins; a damaged newer file is
 * logged ("failed to read a snap file"), renamed to `<name>.broken` and skipped. One deviation:
 * if snapshot files exist but none is intact, loading throws SnapshotCorruptionError naming the
 * newest one and renames nothing (etcd would carry on without a snapshot, and then replay the
 * WAL from index 0, which usually fails later with a less helpful error or, worse, succeeds on
 * a log whose application state was in that snapshot).
 */
import fs from "node:fs";
import path from "node:path";
import { crc32 } from "node:zlib";
import { type Snapshot, isEmptySnapshot } from "../raft/types.js";
import { SnapshotCorruptionError } from "./errors.js";
import { type WalLogger, silentLogger } from "./logger.js";
import type { SnapshotTimings } from "./metrics.js";
import { readSnapshotPayload, snapshotPayloadBytes, writeSnapshotPayload } from "./record.js";
import { fsyncDir } from "./segment.js";

const MAGIC = Buffer.from("etcsnap1", "latin1");
const PREFIX_BYTES = 16;
const SNAP_SUFFIX = ".snap";
const NAME = /^([0-9a-f]{16})-([0-9a-f]{16})\.snap$/;

export interface SnapshotterOptions {
  logger?: WalLogger;
  /** Durations of each save's steps, for metrics. */
  timings?: SnapshotTimings;
}

export function snapshotFileName(term: number, index: number): string {
  return `${term.toString(16).padStart(16, "0")}-${index.toString(16).padStart(16, "0")}${SNAP_SUFFIX}`;
}

export function encodeSnapshotFile(snap: Snapshot): Buffer {
  const marker = { index: snap.metadata.index, term: snap.metadata.term, confState: snap.metadata.confState };
  const metaBytes = snapshotPayloadBytes(marker);
  const buf = Buffer.allocUnsafe(PREFIX_BYTES + metaBytes + snap.data.byteLength);
  MAGIC.copy(buf, 0);
  buf.writeUInt32LE(metaBytes, 12);
  writeSnapshotPayload(buf, PREFIX_BYTES, marker);
  buf.set(snap.data, PREFIX_BYTES + metaBytes);
  buf.writeUInt32LE(crc32(buf.subarray(PREFIX_BYTES)), 8);
  return buf;
}

/** Decodes and verifies a snapshot file's bytes; throws SnapshotCorruptionError naming `file`. */
export function decodeSnapshotFile(file: string, buf: Buffer): Snapshot {
  if (buf.length < PREFIX_BYTES) throw new SnapshotCorruptionError(file, `file of ${buf.length} bytes is too short`);
  if (!buf.subarray(0, 8).equals(MAGIC)) throw new SnapshotCorruptionError(file, "bad magic");
  if (crc32(buf.subarray(PREFIX_BYTES)) !== buf.readUInt32LE(8)) throw new SnapshotCorruptionError(file, "crc mismatch");
  const metaBytes = buf.readUInt32LE(12);
  if (PREFIX_BYTES + metaBytes > buf.length) throw new SnapshotCorruptionError(file, "metadata runs past the end of the file");
  let marker;
  try {
    marker = readSnapshotPayload(buf.subarray(PREFIX_BYTES, PREFIX_BYTES + metaBytes));
  } catch (err) {
    throw new SnapshotCorruptionError(file, `undecodable metadata (${(err as Error).message})`);
  }
  const expected = snapshotFileName(marker.term, marker.index);
  if (path.basename(file) !== expected) throw new SnapshotCorruptionError(file, `holds snapshot ${marker.term}/${marker.index}, name should be ${expected}`);
  return {
    metadata: { index: marker.index, term: marker.term, confState: marker.confState },
    data: new Uint8Array(buf.subarray(PREFIX_BYTES + metaBytes)),
  };
}

export class Snapshotter {
  private readonly logger: WalLogger;
  private readonly timings: SnapshotTimings | undefined;

  constructor(
    readonly dir: string,
    opts: SnapshotterOptions = {},
  ) {
    this.logger = opts.logger ?? silentLogger;
    this.timings = opts.timings;
  }

  /**
   * Writes the snapshot atomically: temp file, fsync, rename, fsync of the directory. An empty
   * snapshot (index 0) is not written, as in etcd.
   */
  async save(snap: Snapshot): Promise<void> {
    if (isEmptySnapshot(snap)) return;
    await fs.promises.mkdir(this.dir, { recursive: true });
    const name = snapshotFileName(snap.metadata.term, snap.metadata.index);
    const final = path.join(this.dir, name);
    const tmp = `${final}.tmp`;
    const started = performance.now();
    const fh = await fs.promises.open(tmp, "w");
    try {
      const encoded = encodeSnapshotFile(snap);
      const encodedAt = performance.now();
      this.timings?.marshal((encodedAt - started) / 1000);
      await fh.writeFile(encoded);
      const syncStart = performance.now();
      await fh.sync();
      this.timings?.fsync((performance.now() - syncStart) / 1000);
    } finally {
      await fh.close();
    }
    await fs.promises.rename(tmp, final);
    await fsyncDir(this.dir);
    this.timings?.save((performance.now() - started) / 1000);
    this.logger.info({ path: final, index: snap.metadata.index, term: snap.metadata.term, took: `${(performance.now() - started).toFixed(3)}ms` }, "saved snapshot");
  }

  /** The newest intact snapshot, or undefined if there is none (see the file comment for damage). */
  loadNewest(): Snapshot | undefined {
    return this.loadMatching(() => true);
  }

  /**
   * The newest intact snapshot that also has a marker in the WAL (etcd 3.5's
   * LoadNewestAvailable): a snapshot file written just before a crash, whose WAL marker never
   * made it to disk, is not one the WAL can replay from.
   */
  loadNewestAvailable(markers: readonly { index: number; term: number }[]): Snapshot | undefined {
    const wanted = new Set(markers.map((m) => snapshotFileName(m.term, m.index)));
    return this.loadMatching((name) => wanted.has(name));
  }

  /** Deletes the oldest snapshot files beyond `maxSnapshots` (0 keeps all) and stale temp files. */
  async purge(maxSnapshots: number): Promise<void> {
    if (!fs.existsSync(this.dir)) return;
    for (const f of fs.readdirSync(this.dir)) if (f.endsWith(`${SNAP_SUFFIX}.tmp`)) await fs.promises.rm(path.join(this.dir, f), { force: true });
    if (maxSnapshots <= 0) return;
    const names = this.snapNames();
    const doomed = names.slice(maxSnapshots); // names are newest first
    for (const name of doomed) {
      await fs.promises.rm(path.join(this.dir, name), { force: true });
      this.logger.info({ path: path.join(this.dir, name) }, "purged snapshot file");
    }
    if (doomed.length > 0) await fsyncDir(this.dir);
  }

  /** Snapshot file names, newest (highest term, then index) first. */
  snapNames(): string[] {
    if (!fs.existsSync(this.dir)) return [];
    return fs
      .readdirSync(this.dir)
      .filter((f) => NAME.test(f))
      .sort()
      .reverse();
  }

  private loadMatching(match: (name: string) => boolean): Snapshot | undefined {
    const names = this.snapNames().filter(match);
    const broken: { file: string; err: SnapshotCorruptionError }[] = [];
    for (const name of names) {
      const file = path.join(this.dir, name);
      try {
        const snap = decodeSnapshotFile(file, fs.readFileSync(file));
        for (const b of broken) this.renameBroken(b.file);
        return snap;
      } catch (err) {
        if (!(err instanceof SnapshotCorruptionError)) throw err;
        this.logger.warn({ path: file, error: err.message }, "failed to read a snap file");
        broken.push({ file, err });
      }
    }
    if (broken.length > 0) {
      const b = broken[0]!;
      throw new SnapshotCorruptionError(b.file, `${b.err.reason}; no intact snapshot file remains (${broken.length} damaged) - refusing to start without it`);
    }
    return undefined;
  }

  private renameBroken(file: string): void {
    const brokenPath = `${file}.broken`;
    fs.renameSync(file, brokenPath);
    this.logger.warn({ path: file, "broken-path": brokenPath }, "renamed to a broken snap file");
  }
}
