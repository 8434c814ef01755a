/** The WAL's Prometheus metrics, named and bucketed as etcd's (server/storage/wal/metrics.go). */
import { Gauge, Histogram, type Registry } from "prom-client";

export const FSYNC_HISTOGRAM_NAME = "etcd_disk_wal_fsync_duration_seconds";
export const WRITE_BYTES_NAME = "etcd_disk_wal_write_bytes_total";

/** etcd's prometheus.ExponentialBuckets(0.001, 2, 14): 1 ms … 8.192 s. */
export const FSYNC_BUCKETS_SECONDS: readonly number[] = Array.from({ length: 14 }, (_, n) => 0.001 * 2 ** n);

/** Creates (or returns the already registered) fsync histogram in `registry`. */
export function createFsyncHistogram(registry: Registry): Histogram {
  const existing = registry.getSingleMetric(FSYNC_HISTOGRAM_NAME);
  if (existing) return existing as Histogram;
  return new Histogram({
    name: FSYNC_HISTOGRAM_NAME,
    help: "The latency distributions of fsync called by WAL.",
    buckets: [...FSYNC_BUCKETS_SECONDS],
    registers: [registry],
  });
}

/** A gauge, not a counter, despite its _total: etcd 3.4 declares it a prometheus.Gauge and dashboards read it so. */
export function createWriteBytesGauge(registry: Registry): Gauge {
  const existing = registry.getSingleMetric(WRITE_BYTES_NAME);
  if (existing) return existing as Gauge;
  return new Gauge({ name: WRITE_BYTES_NAME, help: "Total number of bytes written in WAL.", registers: [registry] });
}

/** How long the snapshotter's steps took, in seconds (etcd's snap/metrics.go). */
export interface SnapshotTimings {
  /** Encoding the snapshot file (etcd_debugging_snap_save_marshalling_duration_seconds). */
  marshal(seconds: number): void;
  /** The file's fsync (etcd_snap_fsync_duration_seconds). */
  fsync(seconds: number): void;
  /** The whole save (etcd_debugging_snap_save_total_duration_seconds). */
  save(seconds: number): void;
}

function histogram(registry: Registry, name: string, help: string, buckets: readonly number[]): Histogram {
  const existing = registry.getSingleMetric(name);
  if (existing) return existing as Histogram;
  return new Histogram({ name, help, buckets: [...buckets], registers: [registry] });
}

export function createSnapshotTimings(registry: Registry): SnapshotTimings {
  const marshal = histogram(registry, "etcd_debugging_snap_save_marshalling_duration_seconds", "The marshalling cost distributions of save called by snapshot.", FSYNC_BUCKETS_SECONDS);
  const fsync = histogram(registry, "etcd_snap_fsync_duration_seconds", "The latency distributions of fsync called by snap.", FSYNC_BUCKETS_SECONDS);
  const save = histogram(registry, "etcd_debugging_snap_save_total_duration_seconds", "The total latency distributions of save called by snapshot.", FSYNC_BUCKETS_SECONDS);
  return { marshal: (s) => marshal.observe(s), fsync: (s) => fsync.observe(s), save: (s) => save.observe(s) };
}
