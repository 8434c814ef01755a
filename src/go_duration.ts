/** Go's duration text, for log fields and messages etcd writes with zap.Duration or Duration.String(). */

/**
 * Go's time.Duration.String() of a duration in milliseconds, to the nanosecond ("5m0s", "1h0m0s",
 * "500ms", "2.5s", "858.807µs", "1ns").
 */
export function formatGoDuration(ms: number): string {
  const ns = Math.round(ms * 1e6);
  if (ns === 0) return "0s";
  const sign = ns < 0 ? "-" : "";
  let rest = Math.abs(ns);
  if (rest < 1e3) return `${sign}${rest}ns`;
  if (rest < 1e6) return `${sign}${trimFraction(rest / 1e3)}µs`;
  if (rest < 1e9) return `${sign}${trimFraction(rest / 1e6)}ms`;
  const h = Math.floor(rest / 3.6e12);
  rest -= h * 3.6e12;
  const m = Math.floor(rest / 6e10);
  rest -= m * 6e10;
  const s = `${trimFraction(rest / 1e9)}s`;
  if (h > 0) return `${sign}${h}h${m}m${s}`;
  if (m > 0) return `${sign}${m}m${s}`;
  return `${sign}${s}`;
}

function trimFraction(n: number): string {
  return String(Number(n.toFixed(9)));
}
