/**
 * Gives V8's young generation back to the system once the member has gone quiet.
 *
 * Under load V8 grows the young generation's semi-spaces to 16 MB each: 32 MB of new space that a
 * member keeps afterwards. V8 shrinks it only at a garbage collection that finds the allocation
 * rate low, over samples it takes at each collection and adds up until they cover 5 s; an idle
 * member allocates too little to run a collection, so the pages stay. Measured on a single member
 * (2026-12-04): 30,000 puts left 32 MB of new space and 171 MB RSS, unchanged while idle; one
 * scavenge a second from the first quiet second on was refused four times (the samples still
 * covered the load) and shrank the new space to 1 MB at the fifth, 10 s after the last put, RSS
 * 142 MB. The warm-up at start grows it the same way (130 MB RSS idle, 100 MB after). Node takes
 * --max-semi-space-size only from its own command line, and a member is started as `node
 * dist/server.js`.
 *
 * So once a second: if the event loop was nearly idle for the last QUIET_TICKS seconds and the new
 * space is over RELEASE_ABOVE_BYTES, run one scavenge (a minor GC: its cost follows the live young
 * objects, 1–20 ms here, not the heap), again each quiet second until V8 shrinks the space or
 * MAX_ATTEMPTS ran, then not until the member has been busy again. A member under load never
 * pauses for it; the old generation is left to V8 (--heap-growing-percent, src/server/v8_tuning.ts).
 */
import { performance, type EventLoopUtilization } from "node:perf_hooks";
import v8 from "node:v8";
import vm from "node:vm";

/** Seconds the event loop must have been nearly idle before a release is tried (a lull of one second is not quiet). */
export const QUIET_TICKS = 2;
/** Event-loop utilization below which a one-second tick counts as quiet (an idle member's heartbeats and raft ticks use well under 1%). */
export const QUIET_UTILIZATION = 0.05;
/** New space (both semi-spaces) above which it is worth releasing: V8 starts at 1 MB and grows by doubling. */
export const RELEASE_ABOVE_BYTES = 8 * 1024 * 1024;
/** Scavenges tried in one quiet spell before giving up until the next busy one. */
export const MAX_ATTEMPTS = 12;
const TICK_MS = 1000;

/** What the tick decided. */
export type ReleaseStep = "wait" | "scavenge" | "done";

/** The decision of one tick, kept apart from V8 so it can be tested on its own. */
export class ReleasePolicy {
  private quietTicks = 0;
  private attempts = 0;
  private done = false;

  tick(utilization: number, newSpaceBytes: number): ReleaseStep {
    if (utilization >= QUIET_UTILIZATION) {
      // Busy again: the young generation may grow again, so the next quiet spell may release it.
      this.quietTicks = 0;
      this.attempts = 0;
      this.done = false;
      return "wait";
    }
    this.quietTicks++;
    if (this.done || this.quietTicks < QUIET_TICKS) return "wait";
    if (newSpaceBytes <= RELEASE_ABOVE_BYTES || this.attempts >= MAX_ATTEMPTS) {
      this.done = true;
      return "done";
    }
    this.attempts++;
    return "scavenge";
  }
}

type GcFunction = (options: { type: "minor"; execution: "sync" }) => void;

/** V8's gc() without --expose-gc on node's command line: the flag is read when a context is created. */
function exposeGc(): GcFunction | undefined {
  v8.setFlagsFromString("--expose-gc");
  const gc: unknown = vm.runInNewContext("gc");
  return typeof gc === "function" ? (gc as GcFunction) : undefined;
}

function newSpaceBytes(): number {
  return v8.getHeapSpaceStatistics().find((s) => s.space_name === "new_space")?.space_size ?? 0;
}

export interface YoungGenerationRelease {
  stop(): void;
}

/** Starts the once-a-second check; `log` hears each release tried, with the sizes before and after. */
export function releaseYoungGenerationWhenQuiet(log: (fields: { beforeBytes: number; afterBytes: number; ms: number }) => void): YoungGenerationRelease {
  const gc = exposeGc();
  if (gc === undefined) return { stop() {} };
  const policy = new ReleasePolicy();
  let last: EventLoopUtilization = performance.eventLoopUtilization();
  const timer = setInterval(() => {
    const now = performance.eventLoopUtilization();
    const beforeBytes = newSpaceBytes();
    const step = policy.tick(performance.eventLoopUtilization(now, last).utilization, beforeBytes);
    last = now;
    if (step !== "scavenge") return;
    const started = performance.now();
    gc({ type: "minor", execution: "sync" });
    log({ beforeBytes, afterBytes: newSpaceBytes(), ms: performance.now() - started });
  }, TICK_MS);
  timer.unref();
  return { stop: () => clearInterval(timer) };
}
