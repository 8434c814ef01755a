/**
 * etcd 3.4's on-disk formats, for taking over etcd's data and handing it back: the backend's
 * buckets over bbolt (a member's `db`) and the snapshot file (the backend plus a SHA-256).
 */
export * from "./buckets.js";
export * from "./records.js";
export * from "./revision_key.js";
export * from "./snapshot_hash.js";
export { EtcdBackendReader, type EtcdBackendOpenOptions } from "./backend_reader.js";
export {
  writeEtcdBackend,
  writeEtcdBuckets,
  writeEtcdSnapshot,
  type EtcdAuthState,
  type EtcdBackendContent,
  type EtcdBackendWriteOptions,
  type EtcdBackendWriteResult,
} from "./backend_writer.js";
export { streamEtcdSnapshot, type SnapshotChunk, type SnapshotStreamOptions, type SnapshotStreamResult } from "./snapshot_stream.js";
export { snapshotStatus, type SnapshotStatus } from "./snapshot_status.js";
export { EtcdFileError } from "./file_error.js";
export * from "./raft_records.js";
export { readEtcdWal, etcdWalSegments, ETCD_SEGMENT_SIZE_BYTES, type EtcdWal, type EtcdWalReadOptions, type EtcdWalSegment } from "./wal_reader.js";
export { readEtcdSnapFile, readNewestEtcdSnap, etcdSnapNames, etcdV2Cluster, type EtcdSnapFile, type EtcdV2Cluster } from "./snap_reader.js";
