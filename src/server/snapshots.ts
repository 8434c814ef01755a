/**
 * The member's snapshots of its backend, in one place:
 * - take: every --snapshot-count applies, commit the backend and save raft's snapshot marker, so
 *   the WAL before it may go (the backend file itself is the state; the marker carries no data);
 * - image: a consistent copy of the backend as one SQLite file, for a follower too far behind (the
 *   merged MsgSnap, etcd's createMergedSnapshotMessage);
 * - client: a client's Maintenance.Snapshot, streamed in etcd 3.4's format (etcd_snapshot.ts);
 * - stage + install: a received image is written durably beside the snapshot markers before raft
 *   persists the marker, then the backend is restored from it (every store recovers);
 * - recoverAtStart: a crash between staging and installing leaves the backend behind the WAL's
 *   snapshot: the staged image is installed before the log is replayed.
 */
import { closeSync, existsSync, fsyncSync, openSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { rm } from "node:fs/promises";
import { join } from "node:path";
import type { Backend } from "../backend/backend.js";
import type { ConfState, Message, Snapshot } from "../raft/types.js";
import type { SnapshotChunk } from "../etcd_format/index.js";
import { streamBackendSnapshot } from "./etcd_snapshot.js";
import type { Logger } from "./logger.js";
import { formatId } from "./member.js";
import type { RaftStorage } from "./raft_storage.js";

export interface SnapshotsOptions {
  backend: Backend;
  /** Where the snapshot markers, staged images and temporary images live (--data-dir/member/snap). */
  snapDir: string;
  storage: Pick<RaftStorage, "snapshotAt">;
  /** The backend's consistent index (the last entry applied to it). */
  consistentIndex(): number;
  logger: Logger;
}

export class Snapshots {
  private seq = 0;

  constructor(private readonly o: SnapshotsOptions) {}

  /**
   * Saves raft's snapshot at the applied `index`. The backend is made durable first (committed
   * and fsynced): the marker lets the WAL release every entry up to `index`, so from then on the
   * backend file is the only copy of them (issue 20: before, a power cut after a snapshot left a
   * backend far behind a WAL that no longer held the entries between).
   */
  async take(index: number, term: number, confState: ConfState): Promise<void> {
    await this.o.backend.sync();
    await this.o.storage.snapshotAt(index, confState, new Uint8Array(0));
    this.o.logger.info({ index, term }, "saved snapshot");
  }

  /** Runs `use` on a consistent image of the backend in a temporary file, removed afterwards. */
  async withImage<T>(purpose: string, use: (path: string) => Promise<T>): Promise<T> {
    const path = join(this.o.snapDir, `${purpose}-${process.pid}-${Date.now()}-${this.seq++}.db`);
    try {
      await this.o.backend.snapshot(path);
      return await use(path);
    } finally {
      await rm(path, { force: true });
    }
  }

  /** Streams the backend as etcd's snapshot file (bbolt, then its SHA-256) through `send`. */
  async client(send: (chunk: SnapshotChunk) => Promise<void>): Promise<void> {
    const started = Date.now();
    const r = await streamBackendSnapshot(this.o.backend, send);
    this.o.logger.info({ sizeBytes: r.sizeBytes, revision: r.revision, tookMs: Date.now() - started }, "sent client snapshot");
  }

  /** A MsgSnap with the whole backend image in place of raft's (empty) snapshot data. */
  async merged(m: Message): Promise<Message> {
    const data = await this.withImage(`outgoing-${m.to.toString(16)}`, async (path) => readFileSync(path));
    this.o.logger.info({ to: formatId(m.to), index: m.snapshot?.metadata.index, sizeBytes: data.length }, "sending database snapshot");
    return { ...m, snapshot: { metadata: m.snapshot!.metadata, data } };
  }

  /**
   * Writes a received image beside the snapshot markers, durably, and returns the marker raft
   * persists: written under a temporary name and fsynced, renamed, the directory fsynced, so the
   * image exists whole under its name before raft's marker can point at it (a cut before leaves
   * no marker; one after finds the image for recoverAtStart).
   */
  stage(snap: Snapshot): Snapshot {
    const path = this.imagePath(snap.metadata.index);
    const tmp = `${path}.tmp`;
    writeFileSync(tmp, snap.data);
    fsyncPath(tmp);
    renameSync(tmp, path);
    fsyncPath(this.o.snapDir);
    this.o.logger.info({ index: snap.metadata.index, term: snap.metadata.term, sizeBytes: snap.data.length }, "received database snapshot");
    return { metadata: snap.metadata, data: new Uint8Array(0) };
  }

  /** Replaces the backend with the staged image of `index` (every store reloads from it); returns its consistent index. */
  install(index: number): number {
    this.o.backend.restore(this.imagePath(index));
    return this.o.consistentIndex();
  }

  /** Brings the backend to the snapshot the WAL starts from, when a crash came before it was installed. */
  recoverAtStart(snap: Snapshot): void {
    const ci = this.o.consistentIndex();
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
    this.install(snap.metadata.index);
  }

  private imagePath(index: number): string {
    return join(this.o.snapDir, `${index.toString(16).padStart(16, "0")}.snap.db`);
  }
}

/** fsync a file, or a directory so that a rename in it is durable. */
function fsyncPath(path: string): void {
  const fd = openSync(path, "r");
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}
