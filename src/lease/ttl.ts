/** Lease TTL bounds, as etcd computes them. */

/** etcd's lease.MaxLeaseTTL (seconds): larger TTLs are rejected with "too large lease TTL". */
export const MAX_LEASE_TTL_SEC = 9_000_000_000;

/**
 * etcd's minimum lease TTL (etcdserver/server.go): minTTL = ((3 * electionTicks) / 2) heartbeats,
 * with Go's integer division, rounded up to whole seconds. A lease must outlive a leader election,
 * or every leader change would expire it. Shorter requested TTLs are raised to it, silently.
 */
export function minLeaseTtlSec(electionTicks: number, heartbeatMs: number): number {
  if (!Number.isInteger(electionTicks) || electionTicks <= 0) throw new RangeError(`electionTicks must be a positive integer, got ${electionTicks}`);
  if (!(heartbeatMs > 0)) throw new RangeError(`heartbeatMs must be positive, got ${heartbeatMs}`);
  const minTtlMs = Math.floor((3 * electionTicks) / 2) * heartbeatMs;
  return Math.ceil(minTtlMs / 1000);
}

/** With etcd's defaults (--election-timeout 1000 ms = 10 ticks of --heartbeat-interval 100 ms): 2 s. */
export const DEFAULT_MIN_LEASE_TTL_SEC = minLeaseTtlSec(10, 100);
