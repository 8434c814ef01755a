/**
 * V8 tuning applied at start, before the member has run (or allocated) much.
 *
 * Tier-up: V8 optimizes a function once it has spent an "interrupt budget" of bytecode. A member
 * spreads each request over many small functions, so with the default budget it ran at ~0.7× its
 * steady speed for its first ~10,000 requests (a serializable range at one client on a fresh
 * 3-member cluster: 1,370 → 1,800 req/s over eight 1,000-request runs). An 8× smaller budget
 * (8,192) got there within ~3,000 requests (1,000 → 2,150). Steady-state code is the same.
 *
 * Heap growth:
 * Under a steady write load V8 lets the old generation grow to several times its live size
 * before collecting it (its growing factor reaches 4× at high allocation rates), and keeps the
 * pages afterwards. A member with 100k keys holds ~40 MB of live heap yet reached ~300 MB RSS.
 * Capping the factor trades CPU for memory: measured on a 3-member cluster after 50k puts at
 * 1,000 clients, the leader's RSS was 249 MB with V8's policy, 228 MB at 200 (3×) and 200 MB at
 * 100 (2×), but its CPU per put rose by 5% and 20%. Throughput is the scarcer resource on a small
 * machine, so V8's policy stays the default and ETCETERA_HEAP_GROWING_PERCENT opts in.
 */
import v8 from "node:v8";

export const DEFAULT_HEAP_GROWING_PERCENT = 0;
export const INTERRUPT_BUDGET = 8192;

/**
 * Applies the tier-up budget, then the heap growing percent from the environment. Returns the
 * growing percent applied (0 = V8's default policy), or an error text for a bad value.
 */
export function tuneV8(env: NodeJS.ProcessEnv): { percent: number } | { error: string } {
  // ETCETERA_V8_INTERRUPT_BUDGET=0 keeps V8's own budget (for comparisons).
  if (env.ETCETERA_V8_INTERRUPT_BUDGET !== "0") v8.setFlagsFromString(`--interrupt-budget=${INTERRUPT_BUDGET}`);
  const raw = env.ETCETERA_HEAP_GROWING_PERCENT;
  const percent = raw === undefined || raw === "" ? DEFAULT_HEAP_GROWING_PERCENT : Number(raw);
  if (!Number.isInteger(percent) || percent < 0 || percent > 1000) {
    return { error: `ETCETERA_HEAP_GROWING_PERCENT must be an integer in [0, 1000], got ${JSON.stringify(raw)}` };
  }
  if (percent > 0) v8.setFlagsFromString(`--heap-growing-percent=${percent}`);
  return { percent };
}
