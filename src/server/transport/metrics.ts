/**
 * Peer transport metrics under etcd's names (etcd's rafthttp/metrics.go), so dashboards built for
 * etcd work. Labels are member ids in etcd's 16-hex-digit form.
 */
import { Counter, Gauge, Histogram, Registry } from "prom-client";

export interface TransportMetrics {
  readonly sentBytes: Counter<"To">;
  readonly receivedBytes: Counter<"From">;
  readonly sentFailures: Counter<"To">;
  readonly receivedFailures: Counter<"From">;
  readonly activePeers: Gauge<"Local" | "Remote">;
  readonly disconnectedPeers: Counter<"Local" | "Remote">;
  readonly snapshotSendSuccess: Counter<"To">;
  readonly snapshotSendFailures: Counter<"To">;
  readonly snapshotSendSeconds: Histogram<"To">;
  readonly snapshotReceiveSuccess: Counter<"From">;
  readonly snapshotReceiveFailures: Counter<"From">;
  readonly snapshotReceiveSeconds: Histogram<"From">;
  /** etcetera's (issue 19): bytes of snapshot data, full images and deltas alike. */
  readonly snapshotSendBytes: Counter<"To">;
  readonly snapshotReceiveBytes: Counter<"From">;
  /** etcetera's: the successful sends/receives that were incremental (a delta, not the whole image). */
  readonly snapshotSendIncremental: Counter<"To">;
  readonly snapshotReceiveIncremental: Counter<"From">;
}

/** etcd's: prometheus.ExponentialBuckets(0.1, 2, 13). */
const SNAPSHOT_SECONDS_BUCKETS = [0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 51.2, 102.4, 204.8, 409.6];

/** One set per registry: several transports in one process (tests) share it without clashing. */
const byRegistry = new WeakMap<Registry, TransportMetrics>();

export function transportMetrics(registry: Registry): TransportMetrics {
  const existing = byRegistry.get(registry);
  if (existing !== undefined) return existing;
  const registers = [registry];
  const m: TransportMetrics = {
    sentBytes: new Counter({ name: "etcd_network_peer_sent_bytes_total", help: "The total number of bytes sent to peers.", labelNames: ["To"], registers }),
    receivedBytes: new Counter({ name: "etcd_network_peer_received_bytes_total", help: "The total number of bytes received from peers.", labelNames: ["From"], registers }),
    sentFailures: new Counter({ name: "etcd_network_peer_sent_failures_total", help: "The total number of send failures from peers.", labelNames: ["To"], registers }),
    receivedFailures: new Counter({ name: "etcd_network_peer_received_failures_total", help: "The total number of receive failures from peers.", labelNames: ["From"], registers }),
    activePeers: new Gauge({ name: "etcd_network_active_peers", help: "The current number of active peer connections.", labelNames: ["Local", "Remote"], registers }),
    disconnectedPeers: new Counter({ name: "etcd_network_disconnected_peers_total", help: "The total number of disconnected peers.", labelNames: ["Local", "Remote"], registers }),
    snapshotSendSuccess: new Counter({ name: "etcd_network_snapshot_send_success", help: "Total number of successful snapshot sends", labelNames: ["To"], registers }),
    snapshotSendFailures: new Counter({ name: "etcd_network_snapshot_send_failures", help: "Total number of snapshot send failures", labelNames: ["To"], registers }),
    snapshotSendSeconds: new Histogram({
      name: "etcd_network_snapshot_send_total_duration_seconds",
      help: "Total latency distributions of v3 snapshot sends",
      labelNames: ["To"],
      buckets: SNAPSHOT_SECONDS_BUCKETS,
      registers,
    }),
    snapshotReceiveSuccess: new Counter({ name: "etcd_network_snapshot_receive_success", help: "Total number of successful snapshot receives", labelNames: ["From"], registers }),
    snapshotReceiveFailures: new Counter({ name: "etcd_network_snapshot_receive_failures", help: "Total number of snapshot receive failures", labelNames: ["From"], registers }),
    snapshotReceiveSeconds: new Histogram({
      name: "etcd_network_snapshot_receive_total_duration_seconds",
      help: "Total latency distributions of v3 snapshot receives",
      labelNames: ["From"],
      buckets: SNAPSHOT_SECONDS_BUCKETS,
      registers,
    }),
    snapshotSendBytes: new Counter({ name: "etcd_network_snapshot_send_total_bytes", help: "Total bytes of snapshot data sent (full images and incremental deltas).", labelNames: ["To"], registers }),
    snapshotReceiveBytes: new Counter({ name: "etcd_network_snapshot_receive_total_bytes", help: "Total bytes of snapshot data received (full images and incremental deltas).", labelNames: ["From"], registers }),
    snapshotSendIncremental: new Counter({ name: "etcd_network_snapshot_send_incremental_success", help: "Successful snapshot sends that were incremental (only the changes since the follower's revision).", labelNames: ["To"], registers }),
    snapshotReceiveIncremental: new Counter({ name: "etcd_network_snapshot_receive_incremental_success", help: "Successful snapshot receives that were incremental.", labelNames: ["From"], registers }),
  };
  byRegistry.set(registry, m);
  return m;
}
