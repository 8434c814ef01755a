/**
 * The `grpc-timeout` request header: up to 8 ASCII digits and a unit
 * (H hours, M minutes, S seconds, m milliseconds, u microseconds, n nanoseconds).
 */

const UNIT_MS: Record<string, number> = {
  H: 3_600_000,
  M: 60_000,
  S: 1_000,
  m: 1,
  u: 1e-3,
  n: 1e-6,
};

/** Longest timer Node can arm (2^31-1 ms); longer deadlines are clamped to it. */
export const TIMER_MS_MAX = 2 ** 31 - 1;

/**
 * Parses a `grpc-timeout` value to milliseconds (rounded up, so a deadline never fires early), or
 * returns undefined for a malformed value. As grpc-go reads it (etcd's server, decodeTimeout): 2
 * to 9 characters, a known unit, and before it what Go's strconv.ParseInt takes, so an optional
 * sign: "-1S" is a deadline already past (0), not a malformed value.
 */
export function parseGrpcTimeout(value: string): number | undefined {
  const n = value.length;
  if (n < 2 || n > 9) return undefined;
  const unit = UNIT_MS[value[n - 1]!];
  if (unit === undefined) return undefined;
  const sign = value[0] === "-" || value[0] === "+" ? 1 : 0;
  if (sign === n - 1) return undefined;
  let amount = 0;
  for (let i = sign; i < n - 1; i++) {
    const d = value.charCodeAt(i) - 0x30;
    if (d < 0 || d > 9) return undefined;
    amount = amount * 10 + d;
  }
  if (value[0] === "-") return 0;
  return Math.min(Math.ceil(amount * unit), TIMER_MS_MAX);
}

/** Formats milliseconds as a `grpc-timeout` value (for clients and tests). */
export function formatGrpcTimeout(ms: number): string {
  if (ms < 1e8) return `${Math.max(0, Math.ceil(ms))}m`;
  return `${Math.ceil(ms / 1000)}S`;
}
