/**
 * etcd's etcd_server_* metrics (names, help texts and types as etcd 3.4 exports them). State
 * gauges are read at scrape time, so the request path pays nothing for them; only events that
 * etcd counts (leader changes, failed proposals, failed read indexes) are counted as they happen.
 */
import { Counter, Gauge, type Registry } from "prom-client";
import { gauge } from "../mvcc/metrics.js";

/** What the member exposes to its metrics; read at scrape time. */
export interface ServerMetricsSource {
  hasLeader(): boolean;
  isLeader(): boolean;
  isLearner(): boolean;
  committedIndex(): number;
  appliedIndex(): number;
  pendingProposals(): number;
  applyingSnapshot(): boolean;
}

export interface ServerMetricsOptions {
  memberIdHex: string;
  version: string;
  /** --quota-backend-bytes as applied (0 when the quota is disabled). */
  quotaBackendBytes: number;
}

/** The counters the member increments itself. */
export interface ServerCounters {
  leaderChanges: Counter;
  proposalsFailed: Counter;
  readIndexesFailed: Counter;
  /** /health answers (etcd_server_health_success / _failures). */
  healthSuccess: Counter;
  healthFailures: Counter;
  leaseExpired: Counter;
  slowApply: Counter;
  slowReadIndexes: Counter;
}

function labelGauge(registry: Registry, name: string, help: string, label: string, value: string): void {
  new Gauge({ name, help, labelNames: [label], registers: [registry] }).set({ [label]: value }, 1);
}

export function registerServerMetrics(registry: Registry, src: ServerMetricsSource, o: ServerMetricsOptions): ServerCounters {
  const bit = (b: boolean): number => (b ? 1 : 0);
  gauge(registry, "etcd_server_has_leader", "Whether or not a leader exists. 1 is existence, 0 is not.", () => bit(src.hasLeader()));
  gauge(registry, "etcd_server_is_leader", "Whether or not this member is a leader. 1 if is, 0 otherwise.", () => bit(src.isLeader()));
  gauge(registry, "etcd_server_is_learner", "Whether or not this member is a learner. 1 if is, 0 otherwise.", () => bit(src.isLearner()));
  gauge(registry, "etcd_server_proposals_committed_total", "The total number of consensus proposals committed.", () => src.committedIndex());
  gauge(registry, "etcd_server_proposals_applied_total", "The total number of consensus proposals applied.", () => src.appliedIndex());
  gauge(registry, "etcd_server_proposals_pending", "The current number of pending proposals to commit.", () => src.pendingProposals());
  gauge(registry, "etcd_server_snapshot_apply_in_progress_total", "1 if the server is applying the incoming snapshot. 0 if none.", () => bit(src.applyingSnapshot()));
  new Gauge({ name: "etcd_server_quota_backend_bytes", help: "Current backend storage quota size in bytes.", registers: [registry] }).set(o.quotaBackendBytes);
  labelGauge(registry, "etcd_server_id", "Server or member ID in hexadecimal format. 1 for 'server_id' label with current ID.", "server_id", o.memberIdHex);
  labelGauge(registry, "etcd_server_version", "Which version is running. 1 for 'server_version' label with current version.", "server_version", o.version);
  // etcd sets the cluster version once the members agree on one; etcetera's members are all one version.
  labelGauge(registry, "etcd_cluster_version", "Which version is running. 1 for 'cluster_version' label with current cluster version", "cluster_version", o.version.replace(/^(\d+\.\d+).*$/, "$1"));
  // etcd's label holds the Go runtime's version; here the runtime is Node's ("node-v20.19.0").
  labelGauge(registry, "etcd_server_go_version", "Which Go version server is running with. 1 for 'server_go_version' label with current version.", "server_go_version", `node-${process.version}`);
  return {
    leaderChanges: new Counter({ name: "etcd_server_leader_changes_seen_total", help: "The number of leader changes seen.", registers: [registry] }),
    proposalsFailed: new Counter({ name: "etcd_server_proposals_failed_total", help: "The total number of failed proposals seen.", registers: [registry] }),
    readIndexesFailed: new Counter({ name: "etcd_server_read_indexes_failed_total", help: "The total number of failed read indexes seen.", registers: [registry] }),
    healthSuccess: new Counter({ name: "etcd_server_health_success", help: "The total number of successful health checks", registers: [registry] }),
    healthFailures: new Counter({ name: "etcd_server_health_failures", help: "The total number of failed health checks", registers: [registry] }),
    slowApply: new Counter({ name: "etcd_server_slow_apply_total", help: "The total number of slow apply requests (likely overloaded from slow disk).", registers: [registry] }),
    slowReadIndexes: new Counter({
      name: "etcd_server_slow_read_indexes_total",
      help: "The total number of pending read indexes not in sync with leader's or timed out read index requests.",
      registers: [registry],
    }),
    leaseExpired: new Counter({ name: "etcd_debugging_server_lease_expired_total", help: "The total number of expired leases.", registers: [registry] }),
  };
}
