/**
 * The lessor's Prometheus metrics, with etcd's names (server/lease/metrics.go). Registered only
 * when a registry is given; a registry that already holds them (a lessor recreated in the same
 * process) is reused rather than failing.
 */
import { Counter, Histogram, type Registry } from "prom-client";

export interface LessorMetrics {
  granted: { inc(): void };
  revoked: { inc(): void };
  renewed: { inc(): void };
  ttl: { observe(value: number): void };
}

const NOOP_METRICS: LessorMetrics = {
  granted: { inc() {} },
  revoked: { inc() {} },
  renewed: { inc() {} },
  ttl: { observe() {} },
};

/** prometheus.ExponentialBuckets(1, 2, 24): 1 second to about 3 months. */
function ttlBuckets(): number[] {
  return Array.from({ length: 24 }, (_, i) => 2 ** i);
}

function counter(registry: Registry, name: string, help: string): Counter {
  const existing = registry.getSingleMetric(name);
  if (existing instanceof Counter) return existing;
  return new Counter({ name, help, registers: [registry] });
}

export function lessorMetrics(registry: Registry | undefined): LessorMetrics {
  if (registry === undefined) return NOOP_METRICS;
  const ttlName = "etcd_debugging_lease_ttl_total";
  const existingTtl = registry.getSingleMetric(ttlName);
  const ttl =
    existingTtl instanceof Histogram
      ? existingTtl
      : new Histogram({ name: ttlName, help: "Bucketed histogram of lease TTLs.", buckets: ttlBuckets(), registers: [registry] });
  return {
    granted: counter(registry, "etcd_debugging_lease_granted_total", "The total number of granted leases."),
    revoked: counter(registry, "etcd_debugging_lease_revoked_total", "The total number of revoked leases."),
    renewed: counter(registry, "etcd_debugging_lease_renewed_total", "The number of renewed leases seen by the leader."),
    ttl,
  };
}
