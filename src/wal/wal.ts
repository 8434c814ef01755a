/**
 * The write-ahead log: a directory of preallocated segment files holding the records of
 * `record.ts`. Raft may only acknowledge what the WAL has made durable, so `save` resolves only
 * after fdatasync. Concurrent saves are group-committed: while one write+fdatasync is in flight,
 * new saves queue up and all of them go out in the next single write and single fdatasync.
 *
 * Conflict truncation is logical, as in etcd: the WAL is append-only, and an entry whose index is
 * at or below the last one replaces that suffix when the log is replayed (and in the in-memory
 * location index). This is correct across segment boundaries by construction.
 *
 * Failure policy (etcd's, whose WAL calls lg.Fatal): after any write or fdatasync error the WAL
 * is poisoned, every pending and future save rejects with that error, and fsync is never retried
 * (a failed fsync may have dropped dirty pages: retrying could report durability falsely).
 */
import fs from "node:fs";
import path from "node:path";
import type { Gauge, Histogram, Registry } from "prom-client";
import { EMPTY_HARD_STATE, type Entry, type HardState, emptyConfState } from "../raft/types.js";
import { type DecodedRecord, scanSegment } from "./decoder.js";
import {
  WalCorruptionError,
  WalFileNotFoundError,
  WalSnapshotMismatchError,
  WalSnapshotNotFoundError,
  assert,
} from "./errors.js";
import { EntryLocations } from "./locations.js";
import { type WalLogger, silentLogger } from "./logger.js";
import { SegmentPipeline, removeStaleTmpFiles } from "./pipeline.js";
import {
  HARD_STATE_PAYLOAD_BYTES,
  HEADER_BYTES,
  RECORD_PAYLOAD_BYTES_MAX,
  ENTRY_PAYLOAD_OVERHEAD_BYTES,
  RecordType,
  RecordWriter,
  type SnapshotMarker,
  type WalMetadata,
  entryRecordBytes,
  readEntryPayload,
  readHardStatePayload,
  readMetadataPayload,
  readSnapshotPayload,
  recordCrcOf,
  snapshotPayloadBytes,
} from "./record.js";
import { type SegmentName, fsyncDir, listSegments, readSegmentData, searchIndex, segmentFileName, writeZeros } from "./segment.js";

export type { SnapshotMarker, WalMetadata } from "./record.js";

export interface WalOptions {
  /** Target size of a segment; files are preallocated to it. Default 64 MiB (etcd's SegmentSizeBytes). */
  segmentSizeBytes?: number;
  logger?: WalLogger;
  /** Registers etcd_disk_wal_fsync_duration_seconds and etcd_disk_wal_write_bytes_total. */
  registry?: Registry;
  /** Segments kept by releaseTo even when released (etcd --max-wals). Default 5; 0 = keep all. */
  maxWals?: number;
  /** Upper bound of one group-commit write (a single larger save still goes out whole). Default 16 MiB. */
  batchBytesMax?: number;
  /** Bound on bytes queued behind the in-flight write; beyond it save() rejects. Default 256 MiB. */
  pendingBytesMax?: number;
  /** An fdatasync slower than this logs "slow fdatasync". Default 1000 ms (etcd's warnSyncDuration). */
  warnSyncDurationMs?: number;
  /**
   * The text of a duration in the WAL's log fields; the member passes Go's (etcd logs them as
   * zap.Duration: "1.234567s", "1s"). Default: milliseconds with three decimals.
   */
  durationText?: (ms: number) => string;
  /**
   * TEST-ONLY (the power-loss suite's mutation test, ETCETERA_TEST_BUG=wal-no-sync): entries that
   * must be durable are written without O_DSYNC, so an acknowledged write lives only in the page
   * cache. Never set for a real member.
   */
  unsafeNoSync?: boolean;
}

/** etcd's warnSyncDuration. */
export const WARN_SYNC_DURATION_MS = 1000;
export const DEFAULT_SEGMENT_SIZE_BYTES = 64 * 1024 * 1024;
export const DEFAULT_MAX_WALS = 5;

interface SegmentFile extends SegmentName {
  path: string;
  readFd: number | undefined;
}

interface PendingWrite {
  hardState: HardState | undefined;
  entries: Entry[];
  marker: SnapshotMarker | undefined;
  bytes: number;
  mustSync: boolean;
  resolve: () => void;
  reject: (err: Error) => void;
}

/** Counters for benchmarks and tests (monotonic since open). */
export interface WalStats {
  writes: number;
  syncs: number;
  entries: number;
  bytes: number;
  cuts: number;
}

export interface WalOpenResult {
  wal: WAL;
  metadata: WalMetadata;
  hardState: HardState;
  /** Entries after the snapshot index, conflicts already resolved. */
  entries: Entry[];
}

interface Replay {
  metadata: WalMetadata;
  hardState: HardState;
  entries: Entry[];
  lastIndex: number;
  markerIndex: number;
  chainCrc: number;
  tailOffset: number;
  locations: EntryLocations;
}

function isEmptyHardState(hs: HardState): boolean {
  return hs.term === 0 && hs.vote === 0n && hs.commit === 0;
}

function sameMetadata(a: WalMetadata, b: WalMetadata): boolean {
  return a.memberId === b.memberId && a.clusterId === b.clusterId;
}

/** Unsynced writes up to this size are kept in memory or made synchronously (see writeBatch). */
const SMALL_UNSYNCED_WRITE_BYTES = 4096;
/**
 * Unsynced bytes the next durable write rewrites together with its own (see `unsynced`); beyond
 * this the durable write is a plain write and an fdatasync of the whole file instead.
 */
const UNSYNCED_REWRITE_BYTES_MAX = 64 * 1024;
/** The durable batches' encoding buffer (scratchFor): kept between these sizes, larger batches get one of their own. */
const SCRATCH_BYTES_MIN = 64 * 1024;
const SCRATCH_BYTES_MAX = 4 * 1024 * 1024;

export class WAL {
  private readonly logger: WalLogger;
  private readonly fsyncHistogram: Histogram | undefined;
  private readonly writeBytes: Gauge | undefined;
  private readonly segmentSizeBytes: number;
  private readonly maxWals: number;
  private readonly batchBytesMax: number;
  private readonly pendingBytesMax: number;
  private readonly warnSyncDurationMs: number;
  private readonly durationText: (ms: number) => string;
  private readonly unsafeNoSync: boolean;
  private readonly pipeline: SegmentPipeline;

  private queue: PendingWrite[] = [];
  private queuedBytes = 0;
  private flushing: Promise<void> | undefined;
  private failed: Error | undefined;
  private closed = false;
  private releasing: Promise<void> = Promise.resolve();

  /** What save() has accepted (used to validate the next save before anything is written). */
  private acceptedLastIndex: number;
  private acceptedHardState: HardState;
  /** What is on disk. */
  private writtenLastIndex: number;
  private writtenHardState: HardState;
  private markerIndex: number;

  readonly stats: WalStats = { writes: 0, syncs: 0, entries: 0, bytes: 0, cuts: 0 };

  private tailDsync: fs.promises.FileHandle | undefined;
  /**
   * The records written to the tail since its last durable write without a sync (commit-only
   * hard states), in file order, ending at tailOffset. An O_DSYNC write makes only its own range
   * durable, so a power cut could keep a later durable batch and lose an unsynced record before
   * it: a hole in the middle of the log, which the decoder refuses as corruption (the member
   * would not start). The next durable write therefore covers these bytes too.
   */
  private unsynced: Buffer[] = [];
  private unsyncedBytes = 0;
  /**
   * How many of the unsynced bytes (the newest, ending at tailOffset) are not in the file yet:
   * commit-only hard states kept in memory until the next durable write, which writes them with
   * its own bytes, as etcd's WAL keeps them in its bufio until its next sync. Only while every
   * unsynced byte fits the durable write's rewrite (so that write always covers them); the
   * segment cut and close write them out first.
   */
  private deferredBytes = 0;
  /** See scratchFor. */
  private scratch: Buffer | undefined;

  private constructor(
    readonly dir: string,
    private readonly metadata: WalMetadata,
    private segments: SegmentFile[],
    private tail: fs.promises.FileHandle,
    private tailOffset: number,
    private chainCrc: number,
    private readonly locations: EntryLocations,
    replay: Pick<Replay, "hardState" | "lastIndex" | "markerIndex">,
    opts: WalOptions,
    metrics: { fsync: Histogram; writeBytes: Gauge } | undefined,
  ) {
    this.logger = opts.logger ?? silentLogger;
    this.fsyncHistogram = metrics?.fsync;
    this.writeBytes = metrics?.writeBytes;
    this.segmentSizeBytes = segmentSizeOf(opts);
    this.maxWals = opts.maxWals ?? DEFAULT_MAX_WALS;
    this.batchBytesMax = opts.batchBytesMax ?? 16 * 1024 * 1024;
    this.pendingBytesMax = opts.pendingBytesMax ?? 256 * 1024 * 1024;
    this.warnSyncDurationMs = opts.warnSyncDurationMs ?? WARN_SYNC_DURATION_MS;
    this.durationText = opts.durationText ?? ((ms) => `${ms.toFixed(3)}ms`);
    this.unsafeNoSync = opts.unsafeNoSync === true;
    assert(Number.isInteger(this.maxWals) && this.maxWals >= 0, "maxWals must be a non-negative integer");
    this.acceptedLastIndex = this.writtenLastIndex = replay.lastIndex;
    this.acceptedHardState = this.writtenHardState = replay.hardState;
    this.markerIndex = replay.markerIndex;
    // Prepared on the first write, not at open: read-only opens (checks, tools) pay nothing.
    this.pipeline = new SegmentPipeline(dir, this.segmentSizeBytes);
  }

  /** True if dir holds at least one WAL segment (etcd's wal.Exist). */
  static exists(dir: string): boolean {
    try {
      return fs.readdirSync(dir).some((f) => f.endsWith(".wal"));
    } catch {
      return false;
    }
  }

  /**
   * Creates a WAL whose first segment holds the metadata and the empty snapshot marker {0, 0}.
   * Built in `<dir>.tmp` and renamed into place, so a crash never leaves a half-made WAL.
   */
  static async create(dir: string, metadata: WalMetadata, opts: WalOptions = {}): Promise<WAL> {
    if (WAL.exists(dir)) throw new Error(`wal: ${dir} already holds a WAL`);
    const segmentSizeBytes = segmentSizeOf(opts);
    const tmpDir = `${dir}.tmp`;
    await fs.promises.rm(tmpDir, { recursive: true, force: true });
    await fs.promises.mkdir(tmpDir, { recursive: true });
    const w = new RecordWriter(256, 0);
    w.crcReset();
    w.metadata(metadata);
    w.snapshot({ index: 0, term: 0, confState: emptyConfState() });
    const header = w.finish();
    const fh = await fs.promises.open(path.join(tmpDir, segmentFileName(0, 0)), "w+");
    try {
      await writeZeros(fh, 0, Math.max(segmentSizeBytes, header.length));
      await writeFully(fh, header, 0);
      await fh.datasync();
    } finally {
      await fh.close();
    }
    await fsyncDir(tmpDir);
    if (fs.existsSync(dir)) {
      if (fs.readdirSync(dir).length > 0) throw new Error(`wal: ${dir} exists and is not empty`);
      await fs.promises.rmdir(dir);
    }
    await fs.promises.rename(tmpDir, dir);
    await fsyncDir(path.dirname(path.resolve(dir)));
    const { wal } = await WAL.open(dir, { index: 0, term: 0 }, opts);
    return wal;
  }

  /**
   * Replays the WAL from the snapshot marker `snap` onward and opens it for appending.
   * A torn last record of the last segment is zeroed away (logged); any other damage throws
   * WalCorruptionError naming the file and byte offset.
   */
  static async open(dir: string, snap: { index: number; term: number }, opts: WalOptions = {}): Promise<WalOpenResult> {
    const logger = opts.logger ?? silentLogger;
    removeStaleTmpFiles(dir);
    const names = listSegments(dir);
    if (names.length === 0) throw new WalFileNotFoundError(`no segments in ${dir}`);
    const start = searchIndex(names, snap.index);
    if (start < 0) throw new WalFileNotFoundError(`no segment in ${dir} covers index ${snap.index}`);
    const segments: SegmentFile[] = names.map((n) => ({ ...n, path: path.join(dir, n.file), readFd: undefined }));
    const replay = await replaySegments(segments.slice(start), snap, logger);
    const last = segments[segments.length - 1]!;
    const tail = await fs.promises.open(last.path, "r+");
    // prom-client is loaded only when metrics are wanted: it costs a few hundred ms at start-up.
    const metrics = opts.registry ? await loadMetrics(opts.registry) : undefined;
    const wal = new WAL(dir, replay.metadata, segments, tail, replay.tailOffset, replay.chainCrc, replay.locations, replay, opts, metrics);
    logger.info({ dir, snapshotIndex: snap.index, entries: replay.entries.length, lastIndex: replay.lastIndex, segments: segments.length }, "opened WAL");
    return { wal, metadata: replay.metadata, hardState: replay.hardState, entries: replay.entries };
  }

  /**
   * The snapshot markers whose index is committed according to the last hard state (etcd's
   * ValidSnapshotEntries), read without modifying anything; the snapshotter uses them to pick a
   * snapshot the WAL can replay from.
   */
  static async validSnapshotMarkers(dir: string): Promise<SnapshotMarker[]> {
    const names = listSegments(dir);
    const markers: SnapshotMarker[] = [];
    let hardState: HardState = EMPTY_HARD_STATE;
    let chain: number | undefined;
    for (let i = 0; i < names.length; i++) {
      const file = path.join(dir, names[i]!.file);
      const scan = await scanSegmentFile(file, chain);
      if (scan.failure && !(i === names.length - 1 && scan.failure.torn)) {
        throw new WalCorruptionError(file, scan.failure.offset, scan.failure.reason);
      }
      for (const r of scan.records) {
        if (r.type === RecordType.Snapshot) markers.push(decodeOrThrow(file, r, readSnapshotPayload));
        if (r.type === RecordType.HardState) hardState = decodeOrThrow(file, r, readHardStatePayload);
      }
      chain = scan.chainCrc;
    }
    return markers.filter((m) => m.index <= hardState.commit);
  }

  /** The last entry index accepted by save() (after conflict truncation), or a later marker's index. */
  lastIndex(): number {
    return this.acceptedLastIndex;
  }

  /** The last hard state made durable. */
  hardState(): HardState {
    return this.writtenHardState;
  }

  /**
   * Appends entries (then the hard state) and resolves once durable: one write and one
   * fdatasync for a whole group of concurrent saves. A save that changes only the commit index
   * needs no fdatasync (etcd's raft.MustSync) and resolves once written. Entries at or below the
   * last index replace that suffix. `sync` makes even a commit-only hard state durable (after a
   * snapshot marker: see RaftStorage.persist).
   */
  save(hardState: HardState | undefined, entries: Entry[], opts: { sync?: boolean } = {}): Promise<void> {
    const unusable = this.unusable();
    if (unusable) return Promise.reject(unusable);
    const hs = hardState && !isEmptyHardState(hardState) ? hardState : undefined;
    if (!hs && entries.length === 0) return Promise.resolve();
    const prevHs = this.acceptedHardState;
    const lastIndex = this.validateEntries(entries);
    if (hs) this.validateHardState(hs, lastIndex);
    let bytes = hs ? HEADER_BYTES + HARD_STATE_PAYLOAD_BYTES : 0;
    for (const e of entries) bytes += entryRecordBytes(e);
    const mustSync = opts.sync === true || entries.length > 0 || (hs !== undefined && (hs.term !== prevHs.term || hs.vote !== prevHs.vote));
    return this.enqueue({ hardState: hs, entries, marker: undefined, bytes, mustSync }, () => {
      this.acceptedLastIndex = lastIndex;
      if (hs) this.acceptedHardState = { ...hs };
    });
  }

  /** Writes a snapshot marker (always synced). A marker beyond the last index moves it there. */
  saveSnapshotMarker(snap: SnapshotMarker): Promise<void> {
    const unusable = this.unusable();
    if (unusable) return Promise.reject(unusable);
    assert(Number.isSafeInteger(snap.index) && snap.index >= 0 && Number.isSafeInteger(snap.term) && snap.term >= 0, "snapshot marker index and term must be non-negative safe integers");
    const marker: SnapshotMarker = { index: snap.index, term: snap.term, confState: snap.confState };
    return this.enqueue({ hardState: undefined, entries: [], marker, bytes: HEADER_BYTES + snapshotPayloadBytes(marker), mustSync: true }, () => {
      this.acceptedLastIndex = Math.max(this.acceptedLastIndex, snap.index);
    });
  }

  /**
   * Deletes segments wholly before `index` (capped at the newest durable snapshot marker, so the
   * WAL always stays replayable from it), keeping at least `maxWals` segment files.
   */
  releaseTo(index: number): Promise<void> {
    const run = this.releasing.then(() => this.releaseNow(index));
    this.releasing = run.catch(() => {});
    return run;
  }

  /** Flushes what is queued, then closes every file. Saves after close() reject. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    while (this.flushing) await this.flushing;
    await this.releasing;
    // Every handle is released even when one fails to close (a dead disk or mount answers EIO or
    // ENOTCONN): a FileHandle left to the garbage collector fails there instead, as an uncaught
    // exception at some later moment. The first failure is reported once all are closed.
    const failures: unknown[] = [];
    const release = async (close: () => Promise<void> | void): Promise<void> => {
      try {
        await close();
      } catch (err) {
        failures.push(err);
      }
    };
    // The newest commit index reaches the file on a clean stop (a crash may lose it: raft learns
    // it again from the leader, and the apply skips what the backend holds).
    if (this.failed === undefined) await release(() => this.writeOutDeferred());
    await release(() => this.pipeline.close());
    await release(() => this.tail.close());
    const dsync = this.tailDsync;
    this.tailDsync = undefined;
    if (dsync !== undefined) await release(() => dsync.close());
    for (const s of this.segments) await release(() => this.closeReadFd(s));
    if (failures.length > 0) throw failures[0];
  }

  /** Term of entry i if the WAL holds it (written, not released), else undefined. No I/O. */
  entryTerm(i: number): number | undefined {
    return this.locations.termOf(i);
  }

  /**
   * Reads entries [lo, hi) back from the segments (synchronously: raft's Storage is sync; only a
   * lagging follower gets here). At least one entry; stops before data exceeds maxSizeBytes.
   * Every record is re-verified (header CRC, chained CRC, index, term).
   */
  readEntries(lo: number, hi: number, maxSizeBytes: number): Entry[] {
    const out: Entry[] = [];
    let dataBytes = 0;
    let i = lo;
    while (i < hi) {
      const first = this.locations.get(i);
      assert(first !== undefined, () => `entry ${i} is not in the WAL`);
      // Coalesce a run of adjacent records of one segment into one positioned read.
      let count = 1;
      let spanBytes = first.totalBytes;
      for (let next = this.locations.get(i + count); i + count < hi && next && spanBytes < 4 * 1024 * 1024; next = this.locations.get(i + count)) {
        if (next.seq !== first.seq || next.offset !== first.offset + spanBytes) break;
        spanBytes += next.totalBytes;
        count++;
      }
      const seg = this.segmentBySeq(first.seq);
      const buf = Buffer.allocUnsafe(spanBytes);
      const n = fs.readSync(this.readFd(seg), buf, 0, spanBytes, first.offset);
      if (n !== spanBytes) throw new WalCorruptionError(seg.path, first.offset + n, "unexpected end of file while reading entries back");
      let at = 0;
      for (let k = 0; k < count; k++, i++) {
        const loc = k === 0 ? first : this.locations.get(i)!;
        const e = verifyEntryRecord(seg.path, buf, at, loc.offset, loc.seedCrc, i, loc.term);
        at += loc.totalBytes;
        dataBytes += e.data.byteLength;
        if (out.length > 0 && dataBytes > maxSizeBytes) return out;
        out.push(e);
      }
    }
    return out;
  }

  private unusable(): Error | undefined {
    if (this.failed) return this.failed;
    if (this.closed) return new Error("wal: closed");
    return undefined;
  }

  /** Raft's log invariants, checked before anything reaches the disk. Returns the new last index. */
  private validateEntries(entries: Entry[]): number {
    if (entries.length === 0) return this.acceptedLastIndex;
    const first = entries[0]!;
    assert(Number.isSafeInteger(first.index) && first.index >= 1, () => `entry index ${first.index} is not a positive safe integer`);
    assert(first.index <= this.acceptedLastIndex + 1, () => `missing log entries: appending ${first.index} after last index ${this.acceptedLastIndex}`);
    assert(first.index > this.acceptedHardState.commit, () => `entry ${first.index} would overwrite committed index ${this.acceptedHardState.commit}`);
    for (let k = 0; k < entries.length; k++) {
      const e = entries[k]!;
      assert(e.index === first.index + k, () => `entries are not contiguous at ${e.index}`);
      assert(Number.isSafeInteger(e.term) && e.term >= 0 && (k === 0 || e.term >= entries[k - 1]!.term), () => `entry ${e.index} has term ${e.term} below its predecessor`);
      assert(e.data.byteLength + ENTRY_PAYLOAD_OVERHEAD_BYTES <= RECORD_PAYLOAD_BYTES_MAX, () => `entry ${e.index} of ${e.data.byteLength} bytes is too large`);
    }
    return entries[entries.length - 1]!.index;
  }

  private validateHardState(hs: HardState, lastIndex: number): void {
    const prev = this.acceptedHardState;
    assert(hs.term >= prev.term, () => `hard state term went back from ${prev.term} to ${hs.term}`);
    assert(hs.commit >= prev.commit, () => `hard state commit went back from ${prev.commit} to ${hs.commit}`);
    assert(hs.commit <= lastIndex, () => `hard state commit ${hs.commit} is beyond the last index ${lastIndex}`);
  }

  private enqueue(w: Omit<PendingWrite, "resolve" | "reject">, onAccepted: () => void): Promise<void> {
    if (this.queuedBytes + w.bytes > this.pendingBytesMax && this.queue.length > 0) {
      return Promise.reject(new Error(`wal: too many pending writes (${this.queuedBytes} bytes queued)`));
    }
    onAccepted();
    return new Promise<void>((resolve, reject) => {
      this.queue.push({ ...w, resolve, reject });
      this.queuedBytes += w.bytes;
      if (!this.flushing) this.flushing = this.flushLoop();
    });
  }

  private async flushLoop(): Promise<void> {
    try {
      while (this.queue.length > 0 && !this.failed) {
        const batch = this.takeBatch();
        try {
          await this.writeBatch(batch);
        } catch (err) {
          this.fail(err, batch);
          break;
        }
        for (const w of batch) w.resolve();
        if (this.tailOffset >= this.segmentSizeBytes) {
          try {
            await this.cut();
          } catch (err) {
            this.fail(err, []);
          }
        }
      }
    } finally {
      this.flushing = undefined;
    }
  }

  private takeBatch(): PendingWrite[] {
    let bytes = 0;
    let n = 0;
    while (n < this.queue.length && (n === 0 || bytes + this.queue[n]!.bytes <= this.batchBytesMax)) bytes += this.queue[n++]!.bytes;
    this.queuedBytes -= bytes;
    return this.queue.splice(0, n);
  }

  private async writeBatch(batch: PendingWrite[]): Promise<void> {
    const mustSync = batch.some((p) => p.mustSync);
    const durable = mustSync && !this.unsafeNoSync;
    // A durable write rewrites the unsynced records before it (see `unsynced`): they go first in
    // its buffer, so the write needs no second copy of the batch.
    const rewrite = durable && this.unsyncedBytes <= UNSYNCED_REWRITE_BYTES_MAX ? this.unsyncedBytes : 0;
    const bytes = rewrite + batch.reduce((s, p) => s + p.bytes, 0);
    const w = new RecordWriter(bytes, this.chainCrc, durable ? this.scratchFor(bytes) : undefined);
    if (rewrite > 0) for (const b of this.unsynced) w.sealed(b);
    assert(w.bytes === rewrite, "wal: the rewrite's records do not add up to the unsynced bytes");
    const placed: { e: Entry; offset: number; seed: number; bytes: number }[] = [];
    for (const p of batch) {
      if (p.marker) w.snapshot(p.marker);
      for (const e of p.entries) {
        const seed = w.chainCrc;
        const offset = w.entry(e);
        placed.push({ e, offset: this.tailOffset + offset - rewrite, seed, bytes: entryRecordBytes(e) });
      }
      if (p.hardState) w.hardState(p.hardState);
    }
    const written = w.finish();
    const buf = written.subarray(rewrite);
    // What goes out without a sync is what recovery may drop behind a hole (lost_write.ts).
    assert(mustSync || placed.length === 0, "wal: an unsynced write holds an entry");
    assert(mustSync || batch.every((p) => p.marker === undefined), "wal: an unsynced write holds a snapshot marker");
    this.pipeline.start();
    if (durable) {
      // One O_DSYNC write is a write and an fdatasync of its range in a single trip through the
      // thread pool: half the hops of write-then-datasync on the commit path.
      const t0 = performance.now();
      await this.writeDurable(written, rewrite);
      this.observeSync(performance.now() - t0);
    } else if (buf.length <= SMALL_UNSYNCED_WRITE_BYTES && !this.unsafeNoSync && this.unsyncedBytes + buf.length <= UNSYNCED_REWRITE_BYTES_MAX) {
      // A record that need not be durable (a commit-index-only hard state, once per commit on the
      // leader) waits in memory for the next durable write, which rewrites the unsynced bytes
      // anyway: no system call on the commit path (it was 3% of the leader's main thread at one
      // client, a page-cache write before every apply; bench/results/oncpu-one-client-2026-12-06.txt).
      this.noteUnsynced(buf);
      this.deferredBytes += buf.length;
    } else if (buf.length <= SMALL_UNSYNCED_WRITE_BYTES) {
      // Past the rewrite's bound: to the page cache in place, with what waited in memory before it.
      this.writeOutDeferred(buf);
      this.noteUnsynced(buf);
    } else {
      this.writeOutDeferred();
      await writeFully(this.tail, buf, this.tailOffset);
      this.noteUnsynced(buf);
    }
    this.stats.writes++;
    // Only now is the batch on disk: publish its effects.
    const seq = this.segments[this.segments.length - 1]!.seq;
    for (const p of placed) this.locations.put(p.e.index, { seq, offset: p.offset, totalBytes: p.bytes, seedCrc: p.seed, term: p.e.term });
    for (const p of batch) {
      if (p.entries.length > 0) this.writtenLastIndex = p.entries[p.entries.length - 1]!.index;
      if (p.marker) {
        this.writtenLastIndex = Math.max(this.writtenLastIndex, p.marker.index);
        this.markerIndex = Math.max(this.markerIndex, p.marker.index);
      }
      if (p.hardState) this.writtenHardState = p.hardState;
    }
    this.tailOffset += buf.length;
    this.chainCrc = w.chainCrc;
    this.stats.entries += placed.length;
    this.stats.bytes += buf.length;
    this.writeBytes?.inc(buf.length);
  }

  /**
   * Writes a batch at the tail and returns once it and every unsynced record before it are
   * durable. `written` starts with the `rewrite` unsynced bytes when they are small enough to be
   * written again (the same bytes, so the rewrite changes nothing but durability): one O_DSYNC
   * write of both; else it is the batch alone, written and the whole file fdatasynced.
   */
  private async writeDurable(written: Buffer, rewrite: number): Promise<void> {
    const pending = this.unsyncedBytes;
    assert(this.deferredBytes === 0 || pending <= UNSYNCED_REWRITE_BYTES_MAX, "wal: records kept in memory beyond the durable write's rewrite");
    if (pending === 0 || rewrite === pending) {
      // The handle, once open, is taken without an await: the write is then issued in the Ready's
      // own turn, before the leader's appends leave in the microtask after it. Through an await
      // it was issued after them, 82 µs after the Ready at the median, 237 at p90 (their socket
      // writes wake the followers first), and the leader's own write was the later half of a
      // one-client commit more often (bench/results/wal-issue-in-turn-2026-12-07.txt).
      await writeFully(this.tailDsync ?? (await this.dsyncTail()), written, this.tailOffset - rewrite);
    } else {
      assert(rewrite === 0, "wal: a durable write rewrote part of the unsynced bytes");
      await writeFully(this.tail, written, this.tailOffset);
      await this.tail.datasync();
    }
    // Nothing may be written meanwhile (one batch at a time), so the bytes just covered are all there were.
    assert(this.unsyncedBytes === pending, "wal: unsynced bytes changed during a durable write");
    this.unsynced = [];
    this.unsyncedBytes = 0;
    this.deferredBytes = 0;
  }

  /**
   * The buffer a durable batch of `bytes` is encoded into: one kept across batches (a batch's
   * write has completed before the next is encoded, and a durable write keeps no reference to
   * it), so a batch of ~200 puts (~60 KB) does not fault in fresh pages every time (the WAL's
   * page faults were ~2.5% of the core's main thread under put load). Only up to SCRATCH_BYTES_MAX.
   */
  private scratchFor(bytes: number): Buffer | undefined {
    if (bytes > SCRATCH_BYTES_MAX) return undefined;
    if (this.scratch === undefined || this.scratch.length < bytes) this.scratch = Buffer.allocUnsafeSlow(Math.max(bytes, SCRATCH_BYTES_MIN));
    return this.scratch;
  }

  /**
   * Writes the records kept in memory (and `then`, the record that follows them, if given) to the
   * page cache at their place before tailOffset, synchronously: hard-state records, at most the
   * rewrite's bound in all (a segment cut or a clean stop; once per 64 KiB of commit-only states).
   */
  private writeOutDeferred(then?: Buffer): void {
    const deferred = this.deferredBytes;
    if (deferred === 0 && then === undefined) return;
    const parts: Buffer[] = [];
    let bytes = 0;
    for (let i = this.unsynced.length - 1; i >= 0 && bytes < deferred; i--) {
      parts.unshift(this.unsynced[i]!);
      bytes += this.unsynced[i]!.length;
    }
    assert(bytes === deferred, () => `wal: ${deferred} bytes kept in memory do not end the unsynced records (${bytes})`);
    if (then !== undefined) parts.push(then);
    writeFullySync(this.tail.fd, parts.length === 1 ? parts[0]! : Buffer.concat(parts), this.tailOffset - deferred);
    this.deferredBytes = 0;
  }

  private noteUnsynced(buf: Buffer): void {
    if (this.unsafeNoSync) return;
    this.unsynced.push(buf);
    this.unsyncedBytes += buf.length;
  }

  /** A second handle on the tail segment opened O_DSYNC: its writes return durable. */
  private async dsyncTail(): Promise<fs.promises.FileHandle> {
    this.tailDsync ??= await fs.promises.open(
      this.segments[this.segments.length - 1]!.path,
      fs.constants.O_RDWR | fs.constants.O_DSYNC,
    );
    return this.tailDsync;
  }

  private observeSync(tookMs: number): void {
    this.stats.syncs++;
    this.fsyncHistogram?.observe(tookMs / 1000);
    if (tookMs > this.warnSyncDurationMs) {
      const text = this.durationText;
      this.logger.warn({ took: text(tookMs), "expected-duration": text(this.warnSyncDurationMs) }, "slow fdatasync");
    }
  }

  /**
   * Closes the full segment and starts the next: trim the old file's zero tail, write the new
   * segment's header (crc, metadata, hard state) into a prepared file, sync it, rename it into
   * place and sync the directory, so a named segment always has a complete header.
   */
  private async cut(): Promise<void> {
    const prepared = await this.pipeline.take();
    this.writeOutDeferred();
    await this.tail.truncate(this.tailOffset);
    await this.tail.datasync();
    // The old tail is synced whole: nothing unsynced is left for the next durable write to cover.
    this.unsynced = [];
    this.unsyncedBytes = 0;
    const prev = this.segments[this.segments.length - 1]!;
    const seq = prev.seq + 1;
    const index = this.writtenLastIndex + 1;
    const w = new RecordWriter(256, this.chainCrc);
    w.crcReset();
    w.metadata(this.metadata);
    w.hardState(this.writtenHardState);
    const header = w.finish();
    await writeFully(prepared.fh, header, 0);
    await prepared.fh.datasync();
    const file = segmentFileName(seq, index);
    const finalPath = path.join(this.dir, file);
    await fs.promises.rename(prepared.path, finalPath);
    await fsyncDir(this.dir);
    await this.tail.close();
    await this.tailDsync?.close();
    this.tailDsync = undefined;
    this.tail = prepared.fh;
    this.tailOffset = header.length;
    this.chainCrc = w.chainCrc;
    this.segments.push({ seq, index, file, path: finalPath, readFd: undefined });
    this.stats.cuts++;
    this.logger.info({ path: finalPath }, "created a new WAL segment");
  }

  private fail(err: unknown, batch: PendingWrite[]): void {
    const e = err instanceof Error ? err : new Error(String(err));
    this.failed = new Error(`wal: write failed, WAL is unusable until restart: ${e.message}`);
    this.logger.error({ err: e.message, dir: this.dir }, "failed to write WAL");
    for (const w of batch) w.reject(this.failed);
    for (const w of this.queue) w.reject(this.failed);
    this.queue = [];
    this.queuedBytes = 0;
  }

  private async releaseNow(index: number): Promise<void> {
    const limit = Math.min(index, this.markerIndex);
    const keepFrom = searchIndex(this.segments, limit);
    if (keepFrom <= 0) return;
    const n = this.maxWals === 0 ? keepFrom : Math.min(keepFrom, Math.max(0, this.segments.length - this.maxWals));
    if (n === 0) return;
    const doomed = this.segments.slice(0, n);
    for (const s of doomed) {
      this.closeReadFd(s);
      await fs.promises.rm(s.path, { force: true });
      this.logger.info({ path: s.path }, "purged WAL segment");
    }
    this.segments = this.segments.slice(n);
    this.locations.dropSegmentsBefore(this.segments[0]!.seq);
    await fsyncDir(this.dir);
  }

  private segmentBySeq(seq: number): SegmentFile {
    const s = this.segments[seq - this.segments[0]!.seq];
    assert(s !== undefined && s.seq === seq, () => `segment ${seq} is not open`);
    return s;
  }

  private readFd(s: SegmentFile): number {
    if (s.readFd === undefined) s.readFd = fs.openSync(s.path, "r");
    return s.readFd;
  }

  private closeReadFd(s: SegmentFile): void {
    const fd = s.readFd;
    s.readFd = undefined;
    if (fd !== undefined) fs.closeSync(fd);
  }
}

async function loadMetrics(registry: Registry): Promise<{ fsync: Histogram; writeBytes: Gauge }> {
  const m = await import("./metrics.js");
  return { fsync: m.createFsyncHistogram(registry), writeBytes: m.createWriteBytesGauge(registry) };
}

function segmentSizeOf(opts: WalOptions): number {
  const size = opts.segmentSizeBytes ?? DEFAULT_SEGMENT_SIZE_BYTES;
  assert(Number.isSafeInteger(size) && size >= 1024, `segmentSizeBytes must be an integer ≥ 1024, got ${size}`);
  return size;
}

/** Scans a segment file, reading its zero tail only when a record reaches into it. */
async function scanSegmentFile(file: string, chain: number | undefined): Promise<ReturnType<typeof scanSegment>> {
  const { buf, fileBytes } = await readSegmentData(file);
  const scan = scanSegment(buf, chain);
  if (scan.failure?.torn && buf.length < fileBytes) return scanSegment(await fs.promises.readFile(file), chain);
  return scan;
}

async function writeFully(fh: fs.promises.FileHandle, buf: Buffer, position: number): Promise<void> {
  for (let done = 0; done < buf.length; ) {
    const { bytesWritten } = await fh.write(buf, done, buf.length - done, position + done);
    assert(bytesWritten > 0, "write made no progress");
    done += bytesWritten;
  }
}

function writeFullySync(fd: number, buf: Buffer, position: number): void {
  for (let done = 0; done < buf.length; ) {
    const bytesWritten = fs.writeSync(fd, buf, done, buf.length - done, position + done);
    assert(bytesWritten > 0, "write made no progress");
    done += bytesWritten;
  }
}

function decodeOrThrow<T>(file: string, r: DecodedRecord, decode: (p: Buffer) => T): T {
  try {
    return decode(r.payload);
  } catch (err) {
    throw new WalCorruptionError(file, r.offset, `undecodable ${RecordType[r.type]} record (${(err as Error).message})`);
  }
}

/** Re-verifies one entry record read back at file offset `fileOffset` from buf[at..]. */
function verifyEntryRecord(file: string, buf: Buffer, at: number, fileOffset: number, seedCrc: number, index: number, term: number): Entry {
  const length = buf.readUInt32LE(at);
  const ok =
    buf.readUInt8(at + 4) === RecordType.Entry &&
    at + HEADER_BYTES + length <= buf.length &&
    recordCrcOf(buf, at, length, seedCrc) === buf.readUInt32LE(at + 8);
  if (!ok) throw new WalCorruptionError(file, fileOffset, `crc mismatch reading entry ${index} back`);
  const e = readEntryPayload(buf.subarray(at + HEADER_BYTES, at + HEADER_BYTES + length));
  if (e.index !== index || e.term !== term) throw new WalCorruptionError(file, fileOffset, `entry ${e.index}/${e.term} found where ${index}/${term} was written`);
  return e;
}

/** Reads the selected segments in order, checking every rule; repairs a torn tail of the last one. */
async function replaySegments(segments: SegmentFile[], snap: { index: number; term: number }, logger: WalLogger): Promise<Replay> {
  let metadata: WalMetadata | undefined;
  let hardState: HardState = { ...EMPTY_HARD_STATE };
  const entries: Entry[] = [];
  const locations = new EntryLocations();
  let lastIndex = 0;
  let markerIndex = 0;
  let match = false;
  let chain: number | undefined;
  let tailOffset = 0;

  for (let i = 0; i < segments.length; i++) {
    const seg = segments[i]!;
    const isLast = i === segments.length - 1;
    const scan = await scanSegmentFile(seg.path, chain);
    const headerComplete = scan.records.length >= 2;
    if (scan.failure && !(isLast && scan.failure.torn && headerComplete)) {
      throw new WalCorruptionError(seg.path, scan.failure.offset, scan.failure.reason);
    }
    if (scan.records.length >= 2 && scan.records[1]!.type !== RecordType.Metadata) {
      throw new WalCorruptionError(seg.path, scan.records[1]!.offset, "segment header lacks its metadata record");
    }
    if (!headerComplete) throw new WalCorruptionError(seg.path, scan.endOffset, "segment header is incomplete");
    for (const r of scan.records) {
      switch (r.type) {
        case RecordType.Metadata: {
          const m = decodeOrThrow(seg.path, r, readMetadataPayload);
          if (metadata && !sameMetadata(metadata, m)) throw new WalCorruptionError(seg.path, r.offset, "conflicting metadata found");
          metadata = m;
          break;
        }
        case RecordType.Entry: {
          const e = decodeOrThrow(seg.path, r, readEntryPayload);
          lastIndex = e.index;
          if (e.index <= snap.index) break;
          const up = e.index - snap.index - 1;
          if (up > entries.length) {
            throw new WalCorruptionError(seg.path, r.offset, `slice bounds out of range: entry ${e.index} does not follow ${snap.index + entries.length}`);
          }
          entries.length = up;
          entries.push(e);
          locations.put(e.index, { seq: seg.seq, offset: r.offset, totalBytes: r.totalBytes, seedCrc: r.seedCrc, term: e.term });
          break;
        }
        case RecordType.HardState:
          hardState = decodeOrThrow(seg.path, r, readHardStatePayload);
          break;
        case RecordType.Snapshot: {
          const m = decodeOrThrow(seg.path, r, readSnapshotPayload);
          if (m.index === snap.index) {
            if (m.term !== snap.term) throw new WalSnapshotMismatchError(snap.index, snap.term, m.term);
            match = true;
          }
          markerIndex = Math.max(markerIndex, m.index);
          lastIndex = Math.max(lastIndex, m.index);
          break;
        }
        case RecordType.CrcReset:
          break;
      }
    }
    chain = scan.chainCrc;
    tailOffset = scan.endOffset;
    if (scan.failure) await repairTornTail(seg.path, scan.failure.offset, scan.failure.nonZeroEnd, scan.failure.reason, logger);
  }
  if (!match) throw new WalSnapshotNotFoundError(snap.index, snap.term);
  // Raft logs never go down in term. Checked on the final log only: records replaced by a later
  // conflict may legitimately carry a lower term than the snapshot.
  for (let k = 0; k < entries.length; k++) {
    const prevTerm = k === 0 ? snap.term : entries[k - 1]!.term;
    if (entries[k]!.term < prevTerm) {
      const loc = locations.get(entries[k]!.index)!;
      const seg = segments.find((s) => s.seq === loc.seq)!;
      throw new WalCorruptionError(seg.path, loc.offset, `entry ${entries[k]!.index} has term ${entries[k]!.term} below its predecessor's ${prevTerm}`);
    }
  }
  assert(metadata !== undefined && chain !== undefined, "replayed segments without metadata");
  return { metadata, hardState, entries, lastIndex: Math.max(lastIndex, snap.index), markerIndex, chainCrc: chain, tailOffset, locations };
}

/** Zeroes [offset, end) of the last segment: the torn record becomes preallocated space again. */
async function repairTornTail(file: string, offset: number, end: number, reason: string, logger: WalLogger): Promise<void> {
  logger.warn({ path: file, offset, bytes: end - offset, reason }, "repairing torn WAL tail");
  const fh = await fs.promises.open(file, "r+");
  try {
    const size = (await fh.stat()).size;
    await writeZeros(fh, offset, Math.min(end, size));
    await fh.datasync();
  } finally {
    await fh.close();
  }
  logger.info({ path: file, offset }, "repaired");
}
