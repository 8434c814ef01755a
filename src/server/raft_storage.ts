/**
 * The member's durable Raft state: the WAL (entries, hard state, snapshot markers), the snapshot
 * files, and the in-memory raft Storage rebuilt from them at start (etcd's raft.MemoryStorage
 * beside wal.WAL and snap.Snapshotter). Entries since the last compaction of the raft log stay in
 * memory, as in etcd; the WAL is what makes them survive a crash.
 */
import { mkdirSync } from "node:fs";
import type { Registry } from "prom-client";
import { MemoryStorage } from "../raft/index.js";
import type { ConfState, Entry, HardState, Snapshot } from "../raft/types.js";
import { Snapshotter, WAL } from "../wal/index.js";
import type { Logger } from "./logger.js";

export interface RaftStorageOptions {
  walDir: string;
  snapDir: string;
  memberId: number;
  clusterId: number;
  maxWals: number;
  maxSnapshots: number;
  /** Entries kept in the raft log behind a snapshot, for slow followers (etcd's SnapshotCatchUpEntries). */
  snapshotCatchUpEntries: number;
  logger: Logger;
  registry?: Registry;
}

export interface OpenedRaftStorage {
  storage: RaftStorage;
  /** True when a WAL existed: the member restarts from its own log instead of bootstrapping. */
  existed: boolean;
  /** The newest snapshot (index 0 when none). */
  snapshot: Snapshot | undefined;
}

export class RaftStorage {
  private constructor(
    readonly memory: MemoryStorage,
    readonly wal: WAL,
    readonly snapshotter: Snapshotter,
    private readonly opts: RaftStorageOptions,
  ) {}

  static async open(opts: RaftStorageOptions): Promise<OpenedRaftStorage> {
    mkdirSync(opts.snapDir, { recursive: true });
    const walLogger = opts.logger;
    const snapshotter = new Snapshotter(opts.snapDir, { logger: walLogger });
    const memory = new MemoryStorage();
    if (!WAL.exists(opts.walDir)) {
      const wal = await WAL.create(
        opts.walDir,
        { memberId: opts.memberId, clusterId: opts.clusterId },
        { logger: walLogger, registry: opts.registry, maxWals: opts.maxWals },
      );
      return { storage: new RaftStorage(memory, wal, snapshotter, opts), existed: false, snapshot: undefined };
    }
    // Only a snapshot whose marker the WAL holds durably: a crash between writing the snapshot file
    // and its marker leaves a newer file the WAL cannot start from (etcd 3.5's loadNewestAvailable).
    const snapshot = snapshotter.loadNewestAvailable(await WAL.validSnapshotMarkers(opts.walDir));
    const marker = snapshot ? { index: snapshot.metadata.index, term: snapshot.metadata.term } : { index: 0, term: 0 };
    const opened = await WAL.open(opts.walDir, marker, { logger: walLogger, registry: opts.registry, maxWals: opts.maxWals });
    if (opened.metadata.memberId !== opts.memberId) {
      throw new Error(
        `member id mismatch: the WAL in ${opts.walDir} belongs to member ${opened.metadata.memberId.toString(16)}, ` +
          `this member is ${opts.memberId.toString(16)} (wrong --name, --initial-cluster or --data-dir?)`,
      );
    }
    if (snapshot) memory.applySnapshot(snapshot);
    memory.setHardState(opened.hardState);
    if (opened.entries.length > 0) memory.append(opened.entries);
    opts.logger.info(
      {
        snapshotIndex: marker.index,
        commitIndex: opened.hardState.commit,
        term: opened.hardState.term,
        lastIndex: memory.lastIndex(),
        entries: opened.entries.length,
      },
      "restarting local member from its WAL",
    );
    return { storage: new RaftStorage(memory, opened.wal, snapshotter, opts), existed: true, snapshot };
  }

  /** Step 1 of a Ready: durable before any message of it leaves (except the leader's, see rawnode). */
  async persist(hardState: HardState | undefined, entries: Entry[], snapshot: Snapshot | undefined): Promise<void> {
    if (snapshot !== undefined) {
      // The snapshot file first: a WAL marker must never point at a snapshot that is not on disk.
      await this.snapshotter.save(snapshot);
      await this.wal.saveSnapshotMarker({
        index: snapshot.metadata.index,
        term: snapshot.metadata.term,
        confState: snapshot.metadata.confState,
      });
    }
    if (hardState !== undefined || entries.length > 0) await this.wal.save(hardState, entries);
    // In memory only once durable: raft reads these to replicate, and must never see more than disk.
    if (snapshot !== undefined) this.memory.applySnapshot(snapshot);
    if (hardState !== undefined) this.memory.setHardState(hardState);
    if (entries.length > 0) this.memory.append(entries);
  }

  /**
   * A local snapshot at `index` (already applied, backend committed): write the snapshot file and
   * marker, compact the in-memory log behind it, release old WAL segments and snapshot files.
   */
  async snapshotAt(index: number, confState: ConfState, data: Uint8Array): Promise<Snapshot> {
    const snap = this.memory.createSnapshot(index, confState, data);
    await this.snapshotter.save(snap);
    await this.wal.saveSnapshotMarker({ index, term: snap.metadata.term, confState });
    const compactTo = index - this.opts.snapshotCatchUpEntries;
    if (compactTo > this.memory.firstIndex()) this.memory.compact(compactTo);
    await this.wal.releaseTo(index);
    await this.snapshotter.purge(this.opts.maxSnapshots);
    return snap;
  }

  async close(): Promise<void> {
    await this.wal.close();
  }
}
