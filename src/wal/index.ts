/**
 * etcetera's durable Raft state: the write-ahead log, snapshot files and a WAL-backed raft
 * Storage. Public API (see each file for details):
 *
 * WAL (wal.ts) — segmented, preallocated, CRC-chained log with group-commit fdatasync.
 *   WAL.exists(dir): boolean
 *   WAL.create(dir, metadata: WalMetadata, opts?: WalOptions): Promise<WAL>
 *   WAL.open(dir, snap: {index, term}, opts?): Promise<{ wal, metadata, hardState, entries }>
 *       replays from the snapshot marker; repairs a torn tail (logged); other damage throws
 *       WalCorruptionError (file + byte offset); WalSnapshotNotFoundError / WalSnapshotMismatchError
 *       / WalFileNotFoundError as etcd's ErrSnapshotNotFound / ErrSnapshotMismatch / ErrFileNotFound.
 *   WAL.validSnapshotMarkers(dir): Promise<SnapshotMarker[]>   markers with index ≤ committed
 *   wal.save(hardState | undefined, entries): Promise<void>     durable on resolve; group-committed;
 *       entries at/below the last index replace that suffix; commit-only saves skip fdatasync
 *   wal.saveSnapshotMarker({index, term, confState}): Promise<void>
 *   wal.releaseTo(index): Promise<void>     delete segments wholly before index (≤ newest marker),
 *       keeping at least opts.maxWals (default 5, 0 = all) files
 *   wal.readEntries(lo, hi, maxSizeBytes): Entry[]   (sync) read back from disk, verified
 *   wal.entryTerm(i): number | undefined   wal.lastIndex()   wal.hardState()   wal.stats
 *   wal.close(): Promise<void>
 *   WalOptions: { segmentSizeBytes = 64 MiB, logger (pino-like), registry (prom-client),
 *                 maxWals = 5, batchBytesMax = 16 MiB, pendingBytesMax = 256 MiB,
 *                 warnSyncDurationMs = 1000 }
 *
 * Snapshotter (snapshotter.ts) — `<term>-<index>.snap` files, atomic and checksummed.
 *   new Snapshotter(dir, { logger? })
 *   save(snap): Promise<void>   loadNewest(): Snapshot | undefined
 *   loadNewestAvailable(markers): Snapshot | undefined   purge(maxSnapshots): Promise<void>
 *
 * WalStorage (storage.ts) — raft Storage with a bounded in-memory tail; older entries read back.
 *   WalStorage.open({ walDir, snapDir, metadata, wal?, storage?, logger? })
 *       : Promise<{ storage, wal, snapshotter, metadata, snapshot, created }>
 *   new WalStorage(wal, { snapshot?, hardState?, entries? }, { tailEntriesMax?, tailBytesMax? })
 *   append(entries)  setHardState(hs)  applySnapshot(snap)  compact(i)
 *   createSnapshot(i, confState, data)  save(hs, entries): Promise<void>  + the Storage interface
 *
 * Metrics: createFsyncHistogram(registry) → etcd_disk_wal_fsync_duration_seconds (buckets
 * 0.001·2^n, n = 0..13); etcd_disk_wal_write_bytes_total is registered beside it.
 * Logger: WalLogger is pino's (obj, msg) call shape; pass a pino logger directly.
 */
export { WAL, DEFAULT_MAX_WALS, DEFAULT_SEGMENT_SIZE_BYTES, WARN_SYNC_DURATION_MS } from "./wal.js";
export type { WalOptions, WalOpenResult, WalStats, WalMetadata, SnapshotMarker } from "./wal.js";
export { Snapshotter, snapshotFileName } from "./snapshotter.js";
export type { SnapshotterOptions } from "./snapshotter.js";
export { WalStorage } from "./storage.js";
export { readWalMetadata } from "./metadata.js";
export type { WalStorageInit, WalStorageOpenOptions, WalStorageOpenResult, WalStorageOptions } from "./storage.js";
export { createFsyncHistogram, FSYNC_BUCKETS_SECONDS, FSYNC_HISTOGRAM_NAME } from "./metrics.js";
export type { WalLogger } from "./logger.js";
export {
  SnapshotCorruptionError,
  WalCorruptionError,
  WalFileNotFoundError,
  WalSnapshotMismatchError,
  WalSnapshotNotFoundError,
} from "./errors.js";
