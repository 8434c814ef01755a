/**
 * The member's snapshots of its backend, in one place:
 * - take: every --snapshot-count applies, commit the backend and save raft's snapshot marker, so
 *   the WAL before it may go (the backend file itself is the state; the marker carries no data);
 * - image: a consistent copy of the backend as one SQLite file, for a follower too far behind (the
 *   merged MsgSnap, etcd's createMergedSnapshotMessage), written by a worker thread and streamed
 *   from disk by the transport (never read into memory);
 * - client: a client's Maintenance.Snapshot, streamed in etcd 3.4's format (etcd_snapshot.ts);
 * - receive: an incoming image is written to a temporary file as its chunks arrive and fsynced
 *   once whole and verified (the transport checks its CRC);
 * - stage + install: the received image is renamed beside the snapshot markers and the directory
 *   fsynced before raft persists the marker, then it is moved into place as the backend (every
 *   store recovers); nothing is copied or read whole;
 * - recoverAtStart: a crash between staging and installing leaves the backend behind the WAL's
 *   snapshot: the staged image is installed before the log is replayed.
 */
import type { NodeId } from "../raft/types.js";
import { randomBytes } from "node:crypto";
import { existsSync, readdirSync, rmSync } from "node:fs";
import { type FileHandle, open, rename, rm } from "node:fs/promises";
import { join } from "node:path";
import type { Registry } from "prom-client";
import type { Backend } from "../backend/backend.js";
import type { ConfState, Message, Snapshot } from "../raft/types.js";
import type { SnapshotChunk } from "../etcd_format/index.js";
import { streamBackendSnapshot } from "./etcd_snapshot.js";
import type { SnapshotDbTimings } from "./disk_metrics.js";
import type { Logger } from "./logger.js";
import { formatId } from "./member.js";
import type { RaftStorage } from "./raft_storage.js";
import { snapshotMetrics, type SnapshotMetrics } from "./snapshot_metrics.js";
import { fileSnapshotBody, type SnapshotBody } from "./transport/snapshot_body.js";
import type { SnapshotSink } from "./transport/snapshot_sink.js";

/**
 * The data raft carries for a snapshot received to a file: this prefix and the reception's id
 * (the file itself stays out of raft's memory). The id is random, so a message can only name a
 * file this member received.
 */
const RECEIVED_PREFIX = Buffer.from("etcetera-received-snapshot:");
const OUTGOING = "outgoing-";
const INCOMING = "incoming-";
const TEMP_SUFFIX = ".db.tmp";
const IMAGE_SUFFIX = ".snap.db";

export interface SnapshotsOptions {
  backend: Backend;
  /** Where the snapshot markers, staged images and temporary images live (--data-dir/member/snap). */
  snapDir: string;
  storage: Pick<RaftStorage, "snapshotAt">;
  /** The backend's consistent index (the last entry applied to it). */
  consistentIndex(): number;
  logger: Logger;
  /** Where etcd_disk_backend_snapshot_duration_seconds goes (a private registry when not given). */
  registry?: Registry;
  /** How long writing a received image took (etcd_snap_db_*). */
  timings?: SnapshotDbTimings;
}

export class Snapshots {
  private seq = 0;
  /** Received images not yet staged, by reception id. */
  /** Images received and fsynced, not yet taken by raft: the reception's id → file and snapshot index. */
  private readonly received = new Map<string, { path: string; index: number }>();
  private readonly metrics: SnapshotMetrics;
  private installingNow = false;

  constructor(private readonly o: SnapshotsOptions) {
    this.metrics = snapshotMetrics(o.registry);
    // Images being sent or received when the member stopped are of no use now.
    for (const f of readdirSync(o.snapDir)) {
      if (((f.startsWith(OUTGOING) || f.startsWith(INCOMING)) && f.endsWith(TEMP_SUFFIX)) || f.endsWith(`${IMAGE_SUFFIX}.tmp`)) rmSync(join(o.snapDir, f), { force: true });
    }
  }

  /** True while a received snapshot is being installed (etcd_server_snapshot_apply_in_progress_total). */
  get installing(): boolean {
    return this.installingNow;
  }

  /**
   * Saves raft's snapshot at the applied `index`. The backend is made durable first (committed
   * and fsynced): the marker lets the WAL release every entry up to `index`, so from then on the
   * backend file is the only copy of them (issue 20: before, a power cut after a snapshot left a
   * backend far behind a WAL that no longer held the entries between).
   *
   * The backend is committed synchronously, at the call (the raft loop calls it between applies
   * and goes on without waiting): what it holds at `index` is what the fsyncs make durable, and
   * the entries applied meanwhile are not counted (RaftStorage.snapshotAt asserts it before it
   * releases anything).
   */
  async take(index: number, term: number, confState: ConfState): Promise<void> {
    const startedMs = performance.now();
    // sync() commits synchronously, at this call, everything applied so far; the fsyncs follow.
    const committedIndex = this.o.consistentIndex();
    await this.o.backend.sync();
    const backendSyncMs = performance.now() - startedMs;
    const savedAt = performance.now();
    await this.o.storage.snapshotAt(index, confState, new Uint8Array(0), { backendDurableIndex: committedIndex });
    const saveMs = performance.now() - savedAt;
    this.o.logger.info({ index, term, backendSyncMs: Number(backendSyncMs.toFixed(1)), saveMs: Number(saveMs.toFixed(1)) }, "saved snapshot");
  }

  /** Streams the backend as etcd's snapshot file (bbolt, then its SHA-256) through `send`. */
  async client(send: (chunk: SnapshotChunk) => Promise<void>): Promise<void> {
    const started = Date.now();
    const r = await streamBackendSnapshot(this.o.backend, send);
    this.o.logger.info({ sizeBytes: r.sizeBytes, revision: r.revision, tookMs: Date.now() - started }, "sent client snapshot");
  }

  /**
   * The merged MsgSnap for `m` (etcd's createMergedSnapshotMessage): raft's snapshot metadata and,
   * as its data, a body reading a consistent image of the backend from a temporary file (removed
   * when the body is released). The image may hold entries past the snapshot's index: it is the
   * backend as applied when the copy began.
   */
  async image(m: Message): Promise<{ message: Message; body: SnapshotBody }> {
    const path = join(this.o.snapDir, `${OUTGOING}${m.to.toString(16)}-${process.pid}-${this.seq++}${TEMP_SUFFIX}`);
    const started = performance.now();
    try {
      await this.o.backend.snapshot(path);
    } catch (e) {
      await rm(path, { force: true });
      throw e;
    }
    const seconds = (performance.now() - started) / 1000;
    this.metrics.backendSnapshotSeconds.observe(seconds);
    const body = await fileSnapshotBody(path, () => rm(path, { force: true }));
    this.o.logger.info(
      { to: formatId(m.to), index: m.snapshot?.metadata.index, sizeBytes: body.sizeBytes, tookSeconds: Number(seconds.toFixed(3)), incremental: false },
      "created database snapshot image to send",
    );
    return { message: { ...m, snapshot: { metadata: m.snapshot!.metadata, data: new Uint8Array(0) } }, body };
  }

  /**
   * Where an incoming snapshot's data goes: a temporary file written as chunks arrive (each
   * write asynchronous; the transport waits for one before reading the next), fsynced once
   * whole. The MsgSnap handed to raft then carries the reception's id, not the data.
   */
  async receive(from: NodeId, m: Message, totalBytes: number): Promise<SnapshotSink> {
    const id = randomBytes(12).toString("hex");
    const path = join(this.o.snapDir, `${INCOMING}${id}${TEMP_SUFFIX}`);
    const startMs = performance.now();
    const fh: FileHandle = await open(path, "wx");
    let position = 0;
    let closed = false;
    let removed = false;
    let writing: Promise<unknown> = Promise.resolve();
    const close = async (): Promise<void> => {
      if (closed) return;
      closed = true;
      await fh.close();
    };
    this.o.logger.info({ from: formatId(from), index: m.snapshot?.metadata.index, sizeBytes: totalBytes }, "receiving database snapshot");
    return {
      write: async (chunk) => {
        if (closed) throw new Error("snapshot file closed");
        const at = position;
        position += chunk.byteLength;
        const w = fh.write(chunk, 0, chunk.byteLength, at);
        writing = w.catch(() => undefined);
        const { bytesWritten } = await w;
        if (bytesWritten !== chunk.byteLength) throw new Error(`short write to ${path}: ${bytesWritten} of ${chunk.byteLength} bytes`);
      },
      commit: async () => {
        if (position !== totalBytes) throw new Error(`snapshot file ${path} holds ${position} of ${totalBytes} bytes`);
        await writing;
        const syncStartMs = performance.now();
        await fh.sync();
        this.o.timings?.fsync((performance.now() - syncStartMs) / 1000);
        await close();
        this.o.timings?.save((performance.now() - startMs) / 1000);
        this.received.set(id, { path, index: m.snapshot!.metadata.index });
        const data = Buffer.concat([RECEIVED_PREFIX, Buffer.from(id)]);
        return { ...m, snapshot: { metadata: m.snapshot!.metadata, data } };
      },
      abort: async () => {
        if (removed) return;
        removed = true;
        this.received.delete(id);
        await writing;
        await close().catch(() => undefined);
        await rm(path, { force: true });
      },
    };
  }

  /**
   * Removes received images raft can no longer take: raft refuses a snapshot at or below its
   * commit index, so an image received for such an index (the member caught up from the log
   * meanwhile, or a second transfer raced the first) would otherwise stay on disk until the next
   * snapshot is staged. An image raft did take was staged before this runs for that Ready.
   */
  async discardReceivedUpTo(committed: number): Promise<void> {
    for (const [id, r] of this.received) {
      if (r.index > committed) continue;
      this.received.delete(id);
      await rm(r.path, { force: true });
      this.o.logger.info({ index: r.index, committed }, "removed a received database snapshot raft did not take");
    }
  }

  /**
   * Makes the image of a snapshot raft accepted durable under the name recoverAtStart looks for,
   * and returns the marker raft persists: renamed, then the directory fsynced (the file itself
   * was fsynced when received), so the image exists whole under its name before raft's marker
   * can point at it (a cut before leaves no marker; one after finds the image). Images received
   * and not taken by raft are removed. A snapshot whose data arrived in memory (not through
   * receive) is written and fsynced first.
   */
  async stage(snap: Snapshot): Promise<Snapshot> {
    const path = this.imagePath(snap.metadata.index);
    const data = Buffer.from(snap.data.buffer, snap.data.byteOffset, snap.data.byteLength);
    let source: string;
    if (data.subarray(0, RECEIVED_PREFIX.byteLength).equals(RECEIVED_PREFIX)) {
      const id = data.subarray(RECEIVED_PREFIX.byteLength).toString();
      const received = this.received.get(id);
      if (received === undefined) throw new Error(`raft accepted snapshot ${snap.metadata.index} received as ${id}, but no such image was received`);
      this.received.delete(id);
      source = received.path;
    } else {
      source = `${path}.tmp`;
      const fh = await open(source, "w");
      try {
        await fh.writeFile(data);
        await fh.sync();
      } finally {
        await fh.close();
      }
    }
    await rename(source, path);
    await fsyncPath(this.o.snapDir);
    for (const [id, stale] of this.received) {
      this.received.delete(id);
      await rm(stale.path, { force: true });
    }
    this.o.logger.info({ index: snap.metadata.index, term: snap.metadata.term }, "staged received database snapshot");
    return { metadata: snap.metadata, data: new Uint8Array(0) };
  }

  /**
   * Replaces the backend with the staged image of `index`, moved into place (every store reloads
   * from it); returns its consistent index.
   */
  async install(index: number): Promise<number> {
    const started = performance.now();
    this.installingNow = true;
    try {
      await this.o.backend.installImage(this.imagePath(index));
    } finally {
      this.installingNow = false;
    }
    this.o.logger.info({ index, tookSeconds: Number(((performance.now() - started) / 1000).toFixed(3)) }, "installed database snapshot");
    return this.o.consistentIndex();
  }

  /** Brings the backend to the snapshot the WAL starts from, when a crash came before it was installed. */
  async recoverAtStart(snap: Snapshot): Promise<void> {
    const ci = this.o.consistentIndex();
    this.removeStagedImagesUpTo(ci);
    if (ci >= snap.metadata.index) return;
    const dbPath = this.imagePath(snap.metadata.index);
    if (!existsSync(dbPath)) {
      // Only a received snapshot has an image; a local one requires the backend durable at its index.
      throw new Error(
        `${join(this.o.snapDir, "db")} is behind the WAL's snapshot (consistent index ${ci} < snapshot index ${snap.metadata.index}) ` +
          `and no database image ${dbPath} exists to install: the WAL no longer holds the entries between; refusing to start`,
      );
    }
    this.o.logger.warn({ snapshotIndex: snap.metadata.index, consistentIndex: ci, dbPath }, "backend is behind the snapshot; installing the snapshot's database");
    await this.install(snap.metadata.index);
  }

  /**
   * Staged images the backend already holds (installed, or superseded by later applies): before
   * installs moved them into place they were copied and stayed; one a crash left is removed here.
   */
  private removeStagedImagesUpTo(index: number): void {
    for (const f of readdirSync(this.o.snapDir)) {
      const m = /^([0-9a-f]{16})\.snap\.db$/.exec(f);
      if (m !== null && Number.parseInt(m[1]!, 16) <= index) rmSync(join(this.o.snapDir, f), { force: true });
    }
  }

  private imagePath(index: number): string {
    return join(this.o.snapDir, `${index.toString(16).padStart(16, "0")}${IMAGE_SUFFIX}`);
  }
}

/** fsync a file, or a directory so that a rename in it is durable (on libuv's thread pool). */
async function fsyncPath(path: string): Promise<void> {
  const fh = await open(path, "r");
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}
