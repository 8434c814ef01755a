/** The WAL's Prometheus metrics, named and bucketed as etcd's (server/storage/wal/metrics.go). */
import { Counter, Histogram, type Registry } from "prom-client";

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

export function createWriteBytesCounter(registry: Registry): Counter {
  const existing = registry.getSingleMetric(WRITE_BYTES_NAME);
  if (existing) return existing as Counter;
  return new Counter({ name: WRITE_BYTES_NAME, help: "Total number of bytes written in WAL.", registers: [registry] });
}
