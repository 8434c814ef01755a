/**
 * The compactors' clock (etcd uses clockwork.Clock so its tests need not wait on wall-clock time):
 * `now` in milliseconds and a one-shot timer. The member passes `realClock`; unit tests pass a fake
 * clock they advance by hand.
 */
export interface CompactorClock {
  /** Milliseconds on a monotonic scale. */
  now(): number;
  /** Calls `fn` once after `ms`; the returned function cancels it. */
  after(ms: number, fn: () => void): () => void;
}

export const realClock: CompactorClock = {
  now: () => performance.now(),
  after: (ms, fn) => {
    const t = setTimeout(fn, ms);
    // A compactor never keeps the process alive on its own.
    t.unref();
    return () => clearTimeout(t);
  },
};

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
