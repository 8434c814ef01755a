/**
 * A run whose cluster did not come up is tried again on a fresh cluster (fresh ports, fresh
 * data dirs), up to a bound, and the target is never dropped for later rows: one failed start
 * once cost the published table a third of etcetera's range rounds (issue 13). A run that
 * started and then failed is not retried: that is a result, and the table refuses to compare
 * cells with unequal round counts (summary.ts), so it cannot hide.
 */
import type { RunRecord } from "./summary.js";

export const START_ATTEMPTS_MAX = 3;

/**
 * Calls `attempt(n)` (n = 1, 2, ...) until a run is not a start failure or `max` attempts are
 * spent; the record says how many attempts it took and what the earlier ones failed with.
 */
export async function withStartRetries(
  attempt: (n: number) => Promise<RunRecord>,
  max = START_ATTEMPTS_MAX,
  onRetry: (rec: RunRecord, n: number) => void = () => {},
): Promise<RunRecord> {
  if (!(max >= 1)) throw new Error(`attempts must be at least 1, got ${max}`);
  const earlier: string[] = [];
  for (let n = 1; ; n++) {
    const rec = await attempt(n);
    if (rec.startFailed !== true || n >= max) {
      return earlier.length > 0 ? { ...rec, attempts: n, earlierStartErrors: earlier } : { ...rec, attempts: n };
    }
    earlier.push((rec.error ?? "").split("\n")[0] as string);
    onRetry(rec, n);
  }
}
