/**
 * V8 tuning applied at start, before the member has run (or allocated) much.
 *
 * Tier-up: V8 optimizes a function once it has spent an "interrupt budget" of bytecode. A member
 * spreads each request over many small functions, so with the default budget it ran at ~0.7× its
 * steady speed for its first ~10,000 requests (a serializable range at one client on a fresh
 * 3-member cluster: 1,370 → 1,800 req/s over eight 1,000-request runs). An 8× smaller budget
 * (8,192) got there within ~3,000 requests (1,000 → 2,150). Steady-state code is the same.
 *
 * Heap growth: under a steady write load V8 lets the old generation grow to several times its
 * live size before collecting it (its growing factor reaches 4× at high allocation rates), and
 * keeps the pages afterwards. A member of a 3-member cluster after 100k puts at 1,000 clients
 * holds ~40 MB of live heap but had 250–267 MB RSS (etcd 3.4 beside it: 170–190 MB). Capping the
 * factor at 1.3× (--heap-growing-percent=30) measured 184–190 MB, for 12–20% fewer puts/s at
 * 1,000 clients (still 1.1–1.2× etcd's) and no measurable change at one client. Memory is what
 * operators size members by, so the cap is the default; ETCETERA_HEAP_GROWING_PERCENT changes it
 * (0 = V8's own policy).
 */
import v8 from "node:v8";
import { envSwitch } from "./env_switch.js";

export const DEFAULT_HEAP_GROWING_PERCENT = 30;
export const INTERRUPT_BUDGET = 8192;

/**
 * Applies the tier-up budget, then the heap growing percent from the environment. Returns the
 * growing percent applied (0 = V8's default policy), or an error text for a bad value.
 */
export function tuneV8(env: NodeJS.ProcessEnv): { percent: number } | { error: string } {
  // ETCETERA_V8_INTERRUPT_BUDGET=0 keeps V8's own budget (for comparisons); 1, empty or unset is ours.
  const budget = envSwitch(env, "ETCETERA_V8_INTERRUPT_BUDGET");
  if (typeof budget !== "boolean") return budget;
  if (budget) v8.setFlagsFromString(`--interrupt-budget=${INTERRUPT_BUDGET}`);
  const raw = env.ETCETERA_HEAP_GROWING_PERCENT;
  const percent = raw === undefined || raw === "" ? DEFAULT_HEAP_GROWING_PERCENT : Number(raw);
  if (!Number.isInteger(percent) || percent < 0 || percent > 1000) {
    return { error: `ETCETERA_HEAP_GROWING_PERCENT must be an integer in [0, 1000], got ${JSON.stringify(raw)}` };
  }
  if (percent > 0) v8.setFlagsFromString(`--heap-growing-percent=${percent}`);
  return { percent };
}
