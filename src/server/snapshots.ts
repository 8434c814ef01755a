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
 *
 * Incremental snapshots (issue 19, snapshot_delta.ts): when the follower answered the leader's
 * base request (its consistent index, revision, compaction), `image` sends only what changed
 * since, if the follower's base qualifies; otherwise, or when a delta for the same base was sent
 * before and did not take (refused, cut, or failed), the full image. A received delta is checked
 * three times against the backend it applies to: on arrival (its checksum, the base's identity and
 * HashKV, before it is acknowledged and handed to raft), at stage (identity, before raft persists
 * its marker; the backend is made durable at the base then, so a cut after the marker finds the
 * base the delta needs), and at install, inside the one transaction that applies it.
 */
import type { NodeId } from "../raft/types.js";
import { randomBytes } from "node:crypto";
import { existsSync, readdirSync, rmSync } from "node:fs";
import { type FileHandle, open, rename, rm } from "node:fs/promises";
import { join } from "node:path";
import type { Registry } from "prom-client";
import type { Backend } from "../backend/backend.js";
import { applyDelta, DeltaBaseMismatchError, planDelta, writeDelta } from "./snapshot_delta.js";
import { type DeltaHeader, isDelta, type SnapshotBase, verifyDelta } from "./snapshot_delta_format.js";
import type { ConfState, Message, Snapshot } from "../raft/types.js";
import type { SnapshotChunk } from "../etcd_format/index.js";
import { streamBackendSnapshot } from "./etcd_snapshot.js";
import type { SnapshotDbTimings } from "./disk_metrics.js";
import type { Logger } from "./logger.js";
import { formatId } from "./member.js";
import type { RaftStorage } from "./raft_storage.js";
import { snapshotMetrics, type SnapshotMetrics } from "./snapshot_metrics.js";
import { fileSnapshotBody, type SnapshotBody, type SnapshotKind } from "./transport/snapshot_body.js";
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
const DELTA_SUFFIX = ".snap.delta";

/** The kv store's side of incremental snapshots (KvStore's deltaBase, index keep, hashAtCompaction). */
export interface DeltaStore {
  /** This member's backend as a delta's base. */
  base(): SnapshotBase;
  /** The key index's Keep at `rev` (the leader's side of the base's HashKV). */
  keep(rev: number): Set<number>;
  /** HashKV at `rev`, computed at compaction revision `compactRev` (the follower's side). */
  hashAt(rev: number, compactRev: number): Promise<number>;
}

export type { SnapshotKind } from "./transport/snapshot_body.js";

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
  /** Incremental snapshots; without it every snapshot sent is a full image and no delta is taken. */
  delta?: DeltaStore;
  /**
   * TEST-ONLY: a pause after each page of a delta's install, so a test can kill the member inside
   * the install's transaction (etcdserver reads it only with ETCETERA_TEST_BUGS_ALLOWED=1).
   */
  testDeltaPageDelayMs?: number;
}

export class Snapshots {
  private seq = 0;
  /** Received images not yet staged, by reception id. */
  /** Images received and fsynced, not yet taken by raft: the reception's id → file and snapshot index. */
  private readonly received = new Map<string, { path: string; index: number; delta?: DeltaHeader }>();
  /** Per follower, the base (consistent index) of the last delta sent to it: the same base again means it did not take. */
  private readonly deltaSentFor = new Map<NodeId, number>();
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
   * as its data, a body reading from a temporary file (removed when the body is released): the
   * changes since `base` when the follower's backend qualifies for a delta (snapshot_delta.ts),
   * else a consistent image of the backend. Either may hold entries past the snapshot's index: it
   * is the backend as applied when the copy began.
   */
  async image(m: Message, base?: SnapshotBase): Promise<{ message: Message; body: SnapshotBody }> {
    const path = join(this.o.snapDir, `${OUTGOING}${m.to.toString(16)}-${process.pid}-${this.seq++}${TEMP_SUFFIX}`);
    const message = { ...m, snapshot: { metadata: m.snapshot!.metadata, data: new Uint8Array(0) } };
    if (base !== undefined && this.o.delta !== undefined) {
      const delta = await this.delta(m, base, path);
      if (delta !== undefined) {
        delta.kind = { incremental: true, baseRevision: base.revision };
        return { message, body: delta };
      }
    }
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
    body.kind = { incremental: false };
    this.o.logger.info(
      { to: formatId(m.to), index: m.snapshot?.metadata.index, sizeBytes: body.sizeBytes, tookSeconds: Number(seconds.toFixed(3)), incremental: false },
      "created database snapshot image to send",
    );
    return { message, body };
  }

  /** The delta for `base` written to `path` as a body, or undefined (and why, logged) when the full image must go. */
  private async delta(m: Message, base: SnapshotBase, path: string): Promise<SnapshotBody | undefined> {
    const to = formatId(m.to);
    const fallback = (reason: string): undefined => {
      this.deltaSentFor.delete(m.to);
      this.o.logger.info({ to, index: m.snapshot?.metadata.index, baseRevision: base.revision, baseIndex: base.consistentIndex, reason }, "sending a full database image, not a delta");
      return undefined;
    };
    if (this.deltaSentFor.get(m.to) === base.consistentIndex) return fallback("a delta for this base was sent before and did not take (refused, cut or failed)");
    const started = performance.now();
    const delta = this.o.delta!;
    let written: { sizeBytes: number; kvRows: number; imageBytes: number; target: DeltaHeader["target"] } | string;
    try {
      written = await this.o.backend.withReadTransaction(async (reader) => {
        const plan = await planDelta(reader, base, (rev) => delta.keep(rev));
        if (plan.kind === "full") return plan.reason;
        const sizeBytes = await writeDelta(reader, path, plan.header);
        return { sizeBytes, kvRows: plan.kvRows, imageBytes: plan.imageBytes, target: plan.header.target };
      });
    } catch (e) {
      await rm(path, { force: true });
      return fallback(`the delta could not be written: ${(e as Error).message}`);
    }
    if (typeof written === "string") return fallback(written);
    const seconds = (performance.now() - started) / 1000;
    this.metrics.backendSnapshotSeconds.observe(seconds);
    this.deltaSentFor.set(m.to, base.consistentIndex);
    const body = await fileSnapshotBody(path, () => rm(path, { force: true }));
    // The follower hashes its whole base before it acknowledges: about the image's bytes to read.
    body.ackWaitBytes = written.imageBytes;
    this.o.logger.info(
      {
        to,
        index: m.snapshot?.metadata.index,
        sizeBytes: body.sizeBytes,
        tookSeconds: Number(seconds.toFixed(3)),
        incremental: true,
        baseRevision: base.revision,
        baseIndex: base.consistentIndex,
        revision: written.target.revision,
        consistentIndex: written.target.consistentIndex,
        kvRows: written.kvRows,
      },
      "created database snapshot image to send",
    );
    return body;
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
    /** The data's first bytes: a delta's magic or a database image's header. */
    let head = Buffer.alloc(0);
    let kind: SnapshotKind = { incremental: false };
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
        if (head.byteLength < 16) head = Buffer.concat([head, chunk.subarray(0, 16 - head.byteLength)]);
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
        let delta: DeltaHeader | undefined;
        if (isDelta(head)) {
          delta = await this.checkReceivedDelta(path);
          kind = { incremental: true, baseRevision: delta.base.revision };
        }
        this.received.set(id, { path, index: m.snapshot!.metadata.index, delta });
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
      kind: () => kind,
    };
  }

  /**
   * A delta just received, before it is acknowledged and handed to raft: whole and intact (its
   * checksum), and made for this backend (identity and HashKV of the base). A refusal goes back
   * to the leader, which then sends the full image.
   */
  private async checkReceivedDelta(path: string): Promise<DeltaHeader> {
    const delta = this.o.delta;
    if (delta === undefined) throw new Error("received an incremental snapshot, which this member does not take");
    const header = await verifyDelta(path);
    const b = header.base;
    const mine = delta.base();
    if (mine.consistentIndex !== b.consistentIndex || mine.maxRev !== b.maxRev || mine.revision !== b.revision) {
      throw new DeltaBaseMismatchError(`delta base mismatch: the backend is at index ${mine.consistentIndex}, revision ${mine.revision}; the delta is for index ${b.consistentIndex}, revision ${b.revision}`);
    }
    if (b.hashCompactRevision < mine.compactRevision) throw new DeltaBaseMismatchError(`delta base mismatch: hashed at compaction ${b.hashCompactRevision}, below this backend's ${mine.compactRevision}`);
    const hash = await delta.hashAt(b.revision, b.hashCompactRevision);
    if (hash !== b.hash) throw new DeltaBaseMismatchError(`delta base mismatch: HashKV at revision ${b.revision} is ${hash} here, ${b.hash} on the leader`);
    return header;
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
    let path = this.imagePath(snap.metadata.index);
    const data = Buffer.from(snap.data.buffer, snap.data.byteOffset, snap.data.byteLength);
    let source: string;
    let delta: DeltaHeader | undefined;
    if (data.subarray(0, RECEIVED_PREFIX.byteLength).equals(RECEIVED_PREFIX)) {
      const id = data.subarray(RECEIVED_PREFIX.byteLength).toString();
      const received = this.received.get(id);
      if (received === undefined) throw new Error(`raft accepted snapshot ${snap.metadata.index} received as ${id}, but no such image was received`);
      this.received.delete(id);
      source = received.path;
      delta = received.delta;
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
    if (delta !== undefined) {
      // Raft took the delta: its marker, once persisted, makes the backend's base the only way to
      // the snapshot's state. The base must still be this backend's (nothing applied since it was
      // checked on arrival) and be durable before the marker is.
      const base = this.o.delta!.base();
      if (base.consistentIndex !== delta.base.consistentIndex || base.maxRev !== delta.base.maxRev) {
        await rm(source, { force: true });
        throw new DeltaBaseMismatchError(
          `raft accepted the delta of snapshot ${snap.metadata.index} for base index ${delta.base.consistentIndex}, but the backend moved to index ${base.consistentIndex} since it arrived`,
        );
      }
      await this.o.backend.sync();
      path = this.deltaPath(snap.metadata.index);
    }
    await rename(source, path);
    await fsyncPath(this.o.snapDir);
    for (const [id, stale] of this.received) {
      this.received.delete(id);
      await rm(stale.path, { force: true });
    }
    this.o.logger.info({ index: snap.metadata.index, term: snap.metadata.term, incremental: delta !== undefined, baseRevision: delta?.base.revision }, "staged received database snapshot");
    return { metadata: snap.metadata, data: new Uint8Array(0) };
  }

  /**
   * Brings the backend to the staged snapshot of `index`: a delta is applied to it in place, in
   * one transaction (then made durable, then its file removed); an image replaces it, moved into
   * place. Every store recovers; returns the consistent index.
   */
  async install(index: number): Promise<number> {
    const started = performance.now();
    this.installingNow = true;
    const deltaPath = this.deltaPath(index);
    const incremental = existsSync(deltaPath);
    let baseRevision: number | undefined;
    try {
      if (incremental) {
        this.o.logger.info({ index, deltaPath }, "applying incremental database snapshot");
        await this.o.backend.applyInPlace(async (db) => {
          baseRevision = (await applyDelta(db, deltaPath, { pageDelayMs: this.o.testDeltaPageDelayMs })).base.revision;
        });
        await this.o.backend.sync();
        await rm(deltaPath, { force: true });
        await fsyncPath(this.o.snapDir);
      } else {
        await this.o.backend.installImage(this.imagePath(index));
      }
    } finally {
      this.installingNow = false;
    }
    this.o.logger.info({ index, tookSeconds: Number(((performance.now() - started) / 1000).toFixed(3)), incremental, baseRevision }, "installed database snapshot");
    return this.o.consistentIndex();
  }

  /** Brings the backend to the snapshot the WAL starts from, when a crash came before it was installed. */
  async recoverAtStart(snap: Snapshot): Promise<void> {
    const ci = this.o.consistentIndex();
    this.removeStagedImagesUpTo(ci);
    if (ci >= snap.metadata.index) return;
    const dbPath = this.imagePath(snap.metadata.index);
    const deltaPath = this.deltaPath(snap.metadata.index);
    if (!existsSync(dbPath) && existsSync(deltaPath)) {
      // A cut after the delta's marker and before its transaction committed (or was made durable):
      // the backend is at the delta's base (made durable at stage), and the delta applies again.
      this.o.logger.warn({ snapshotIndex: snap.metadata.index, consistentIndex: ci, deltaPath }, "backend is behind the snapshot; applying the snapshot's staged delta");
      await this.install(snap.metadata.index);
      return;
    }
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
      const m = /^([0-9a-f]{16})\.snap\.(db|delta)$/.exec(f);
      if (m !== null && Number.parseInt(m[1]!, 16) <= index) rmSync(join(this.o.snapDir, f), { force: true });
    }
  }

  private imagePath(index: number): string {
    return join(this.o.snapDir, `${index.toString(16).padStart(16, "0")}${IMAGE_SUFFIX}`);
  }

  private deltaPath(index: number): string {
    return join(this.o.snapDir, `${index.toString(16).padStart(16, "0")}${DELTA_SUFFIX}`);
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
