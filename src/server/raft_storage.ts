/**
 * The member's durable Raft state: the WAL (entries, hard state, snapshot markers), the snapshot
 * files, and the raft Storage over them (etcd's raft.MemoryStorage beside wal.WAL and
 * snap.Snapshotter). Unlike etcd's MemoryStorage, only a bounded tail of recent entries stays in
 * memory (WalStorage); older ones are read back from the WAL when a slow follower needs them, so
 * memory does not grow with --snapshot-count.
 */
import { formatGoDuration } from "../go_duration.js";
import type { NodeId } from "../raft/types.js";
import { mkdirSync } from "node:fs";
import type { Registry } from "prom-client";
import type { ConfState, Entry, HardState, Snapshot } from "../raft/types.js";
import { WalStorage, type Snapshotter, type WAL } from "../wal/index.js";
import type { Logger } from "./logger.js";

export interface RaftStorageOptions {
  walDir: string;
  snapDir: string;
  memberId: NodeId;
  clusterId: NodeId;
  maxWals: number;
  maxSnapshots: number;
  /** Entries kept in the raft log behind a snapshot, for slow followers (etcd's SnapshotCatchUpEntries). */
  snapshotCatchUpEntries: number;
  logger: Logger;
  registry?: Registry;
  /** TEST-ONLY: see WalOptions.unsafeNoSync (ETCETERA_TEST_BUG=wal-no-sync). */
  unsafeNoSync?: boolean;
  /** WalOptions.segmentSizeBytes (TEST-ONLY below the default: wal_segment_size.ts). */
  segmentSizeBytes?: number;
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
    readonly memory: WalStorage,
    readonly wal: WAL,
    readonly snapshotter: Snapshotter,
    private readonly opts: RaftStorageOptions,
  ) {}

  static async open(opts: RaftStorageOptions): Promise<OpenedRaftStorage> {
    mkdirSync(opts.snapDir, { recursive: true });
    const opened = await WalStorage.open({
      walDir: opts.walDir,
      snapDir: opts.snapDir,
      metadata: { memberId: opts.memberId, clusterId: opts.clusterId },
      wal: {
        logger: opts.logger,
        registry: opts.registry,
        maxWals: opts.maxWals,
        unsafeNoSync: opts.unsafeNoSync,
        segmentSizeBytes: opts.segmentSizeBytes,
        // etcd logs the WAL's durations as zap.Duration: Go's text ("1.234567s", "1s").
        durationText: formatGoDuration,
      },
      logger: opts.logger,
    });
    if (opened.metadata.memberId !== opts.memberId) {
      throw new Error(
        `member id mismatch: the WAL in ${opts.walDir} belongs to member ${opened.metadata.memberId.toString(16)}, ` +
          `this member is ${opts.memberId.toString(16)} (wrong --name, --initial-cluster or --data-dir?)`,
      );
    }
    const storage = new RaftStorage(opened.storage, opened.wal, opened.snapshotter, opts);
    if (!opened.created) {
      const hs = opened.storage.initialState().hardState;
      opts.logger.info(
        {
          snapshotIndex: opened.snapshot?.metadata.index ?? 0,
          commitIndex: hs.commit,
          term: hs.term,
          lastIndex: opened.storage.lastIndex(),
        },
        "restarting local member from its WAL",
      );
    }
    return { storage, existed: !opened.created, snapshot: opened.snapshot };
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
      // The hard state committing the snapshot is synced with it (etcd's storage.Sync after
      // SaveSnap, etcd issue 10219): a restart takes only a marker at or below the durable commit
      // index (ValidSnapshotEntries), and this commit-only hard state was not synced, so a power
      // cut after the install kept the marker but not the commit: the member came back on its old
      // log beside the installed backend and refused every heartbeat ("tocommit(N) is out of
      // range [lastIndex(M)]") for good.
      const hs = hardState ?? this.wal.hardState();
      if (hs.commit < snapshot.metadata.index) throw new Error(`invariant: snapshot ${snapshot.metadata.index} persisted with a hard state committing only ${hs.commit}`);
      await this.wal.save(hs, entries, { sync: true });
    } else if (hardState !== undefined || entries.length > 0) await this.wal.save(hardState, entries);
    // In memory only once durable: raft reads these to replicate, and must never see more than disk.
    if (snapshot !== undefined) this.memory.applySnapshot(snapshot);
    if (hardState !== undefined) this.memory.setHardState(hardState);
    if (entries.length > 0) this.memory.append(entries);
  }

  /**
   * A local snapshot at `index` (already applied, backend committed): write the snapshot file and
   * marker, compact the in-memory log behind it, release old WAL segments and snapshot files.
   */
  async snapshotAt(index: number, confState: ConfState, data: Uint8Array, o: { backendDurableIndex: number }): Promise<Snapshot> {
    // Issue 20's ordering: from the marker on, the WAL may drop every entry up to `index`, so the
    // backend must already hold them durably.
    if (o.backendDurableIndex < index) {
      throw new Error(`invariant: snapshot at ${index} would release raft entries the backend holds durably only up to ${o.backendDurableIndex}`);
    }
    const snap = this.memory.createSnapshot(index, confState, data);
    await this.snapshotter.save(snap);
    await this.wal.saveSnapshotMarker({ index, term: snap.metadata.term, confState });
    const compactTo = index - this.opts.snapshotCatchUpEntries;
    if (compactTo > this.memory.firstIndex()) this.memory.compact(compactTo);
    // Entries still in the raft log must stay readable from the WAL (WalStorage's release rule).
    await this.wal.releaseTo(Math.min(index, this.memory.firstIndex() - 1));
    await this.snapshotter.purge(this.opts.maxSnapshots);
    return snap;
  }

  async close(): Promise<void> {
    await this.wal.close();
  }
}
