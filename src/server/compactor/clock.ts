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

/** Go's time.Duration.String() for whole or fractional milliseconds ("5m0s", "1h0m0s", "500ms", "2.5s"). */
export function formatGoDuration(ms: number): string {
  if (ms === 0) return "0s";
  const sign = ms < 0 ? "-" : "";
  let rest = Math.abs(ms);
  if (rest < 1000) return `${sign}${trimFraction(rest)}ms`;
  const h = Math.floor(rest / 3_600_000);
  rest -= h * 3_600_000;
  const m = Math.floor(rest / 60_000);
  rest -= m * 60_000;
  const s = `${trimFraction(rest / 1000)}s`;
  if (h > 0) return `${sign}${h}h${m}m${s}`;
  if (m > 0) return `${sign}${m}m${s}`;
  return `${sign}${s}`;
}

function trimFraction(n: number): string {
  return String(Number(n.toFixed(9)));
}
