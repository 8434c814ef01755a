/** The member's snapshot metrics under etcd's names (the transfer's are in transport/metrics.ts). */
import { Histogram, Registry } from "prom-client";

export interface SnapshotMetrics {
  /** etcd's mvcc/backend snapshotTransferSec: creating the image sent to a follower. */
  readonly backendSnapshotSeconds: Histogram;
}

const byRegistry = new WeakMap<Registry, SnapshotMetrics>();

export function snapshotMetrics(registry: Registry = new Registry()): SnapshotMetrics {
  const existing = byRegistry.get(registry);
  if (existing !== undefined) return existing;
  const m: SnapshotMetrics = {
    backendSnapshotSeconds: new Histogram({
      name: "etcd_disk_backend_snapshot_duration_seconds",
      help: "The latency distribution of backend snapshots.",
      // etcd: prometheus.ExponentialBuckets(.01, 2, 17), 10 ms to about 655 s.
      buckets: Array.from({ length: 17 }, (_, i) => 0.01 * 2 ** i),
      registers: [registry],
    }),
  };
  byRegistry.set(registry, m);
  return m;
}
