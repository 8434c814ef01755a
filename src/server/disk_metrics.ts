/**
 * The member's disk metrics beyond the WAL's (src/wal/metrics.ts), with etcd 3.4's names, help
 * texts and buckets: the backend's commit, snapshot and defrag durations (mvcc/backend/metrics.go),
 * etcd_disk_defrag_inflight, and the received snapshot image's save and fsync
 * (etcd_snap_db_*, etcdserver/api/snap/metrics.go).
 */
import { Gauge, Histogram, type Registry } from "prom-client";
import type { BackendTimings } from "../backend/backend.js";
import { snapshotMetrics } from "./snapshot_metrics.js";

/** prometheus.ExponentialBuckets(start, 2, count). */
function exponential(start: number, count: number): number[] {
  return Array.from({ length: count }, (_, i) => start * 2 ** i);
}

function histogram(registry: Registry, name: string, help: string, buckets: number[]): Histogram {
  return new Histogram({ name, help, buckets, registers: [registry] });
}

export function backendTimings(registry: Registry): BackendTimings {
  const commit = histogram(registry, "etcd_disk_backend_commit_duration_seconds", "The latency distributions of commit called by backend.", exponential(0.001, 14));
  // One histogram for every backend snapshot: the raft images snapshots.ts times, and the client snapshots timed here.
  const snapshot = snapshotMetrics(registry).backendSnapshotSeconds;
  const defrag = histogram(registry, "etcd_disk_backend_defrag_duration_seconds", "The latency distribution of backend defragmentation.", exponential(0.1, 13));
  const inflight = new Gauge({ name: "etcd_disk_defrag_inflight", help: "Whether or not defrag is active on the member. 1 means active, 0 means not.", registers: [registry] });
  return {
    commit: (s) => commit.observe(s),
    snapshot: (s) => snapshot.observe(s),
    defrag: (s) => defrag.observe(s),
    defragInflight: (active) => inflight.set(active ? 1 : 0),
  };
}

/** A received snapshot image written to disk (etcd's snap.SaveDBFrom). */
export interface SnapshotDbTimings {
  fsync(seconds: number): void;
  save(seconds: number): void;
}

export function snapshotDbTimings(registry: Registry): SnapshotDbTimings {
  const fsync = histogram(registry, "etcd_snap_db_fsync_duration_seconds", "The latency distributions of fsyncing .snap.db file", exponential(0.001, 14));
  const save = histogram(registry, "etcd_snap_db_save_total_duration_seconds", "The total latency distributions of v3 snapshot save", exponential(0.1, 10));
  return { fsync: (s) => fsync.observe(s), save: (s) => save.observe(s) };
}
