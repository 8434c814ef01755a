/**
 * Resident memory of a server process, read from /proc/PID/status (VmRSS), and the leak check the
 * fuzz suites share: sample after a warm-up, run a long-enough phase, sample again, and require the
 * growth to stay under a bound that a real leak of the configured rate would exceed.
 */
import { readFileSync } from "node:fs";

/** VmRSS of `pid` in KiB. */
export function rssKiB(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const m = /^VmRSS:\s+(\d+)\s+kB/m.exec(status);
  if (m === null) throw new Error(`no VmRSS for pid ${pid}`);
  return Number(m[1]);
}

export interface LeakBudget {
  /** What the suite measures (for messages). */
  readonly what: string;
  /** Allowed growth between the two samples, KiB: generous, to absorb heap sizing and GC timing. */
  readonly boundKiB: number;
  /**
   * The smallest leak the check must catch, in bytes retained per request (the brief's example:
   * 1 MB per 1,000 requests = 1,000 bytes per request).
   */
  readonly leakBytesPerRequest: number;
}

export interface LeakReport {
  readonly what: string;
  readonly beforeKiB: number;
  readonly afterKiB: number;
  readonly growthKiB: number;
  readonly requests: number;
  readonly boundKiB: number;
  /** The growth the smallest leak to catch would have caused over this phase, KiB. */
  readonly leakWouldGrowKiB: number;
}

/**
 * The teeth of a leak check: over a phase of `requests`, a leak of `leakBytesPerRequest` retains
 * requests * leakBytesPerRequest bytes, and RSS cannot be below what the process retains. The check
 * only means something if that is well above the bound, so a too-short phase is itself a failure
 * (here, not a silent pass): we require at least 1.5 times the bound.
 */
export function assertLeakCheckHasTeeth(budget: LeakBudget, requests: number): void {
  const leakKiB = (requests * budget.leakBytesPerRequest) / 1024;
  if (leakKiB < 1.5 * budget.boundKiB) {
    throw new Error(
      `${budget.what}: a phase of ${requests} requests would only leak ${Math.round(leakKiB)} KiB at ` +
        `${budget.leakBytesPerRequest} B/request, not enough above the ${budget.boundKiB} KiB bound to catch it`,
    );
  }
}

/** Compares two samples against the budget and prints the figures (does not throw). */
export function leakReport(budget: LeakBudget, beforeKiB: number, afterKiB: number, requests: number): LeakReport {
  const report: LeakReport = {
    what: budget.what,
    beforeKiB,
    afterKiB,
    growthKiB: afterKiB - beforeKiB,
    requests,
    boundKiB: budget.boundKiB,
    leakWouldGrowKiB: Math.round((requests * budget.leakBytesPerRequest) / 1024),
  };
  console.log(
    `[fuzz] ${report.what}: ${beforeKiB} KiB -> ${afterKiB} KiB (growth ${report.growthKiB} KiB over ${requests} requests; ` +
      `bound ${report.boundKiB} KiB; a ${budget.leakBytesPerRequest} B/request leak would add ${report.leakWouldGrowKiB} KiB)`,
  );
  return report;
}

function leakError(r: LeakReport): Error {
  return new Error(`${r.what}: grew ${r.growthKiB} KiB over ${r.requests} requests (bound ${r.boundKiB} KiB)`);
}

/** Compares two samples against the budget; returns the figures for the report (throws on a leak). */
export function checkLeak(budget: LeakBudget, beforeKiB: number, afterKiB: number, requests: number): LeakReport {
  assertLeakCheckHasTeeth(budget, requests);
  const report = leakReport(budget, beforeKiB, afterKiB, requests);
  if (report.growthKiB > budget.boundKiB) throw leakError(report);
  return report;
}

/** Something that runs requests against the server and counts them. */
export interface LoadDriver {
  /** Runs `n` more requests (resolves when they are answered). */
  run(n: number): Promise<void>;
}

export interface LeakBounds {
  /** Bound on the growth of the live set after a forced GC (heap used + external). */
  readonly live: LeakBudget;
  /** Bound on the growth of VmRSS after a forced GC. */
  readonly rss: LeakBudget;
}

export interface LeakPhases {
  /** Requests before the first sample (V8 compiles, pools and caches fill). */
  readonly warmUp: number;
  /** Requests between the two samples. */
  readonly measured: number;
}

/** A memory sample of a member after forced full collections. */
export interface MemorySample {
  readonly rssKiB: number;
  readonly liveKiB: number;
}

/**
 * The leak check: warm up, force full collections and sample, run the measured phase, collect and
 * sample again. After a forced GC both figures hold only what the server keeps alive, so their
 * growth over the phase is retention, not garbage timing (without forced GCs, V8's heap sizing
 * moves RSS by ±30 MiB over such phases and hides a 1 KB/request leak). Both bounds must hold and
 * must have teeth at their leak rates over the measured phase.
 */
export async function leakCheck(
  sample: () => Promise<MemorySample>,
  bounds: LeakBounds,
  driver: LoadDriver,
  phases: LeakPhases,
): Promise<LeakReport[]> {
  assertLeakCheckHasTeeth(bounds.live, phases.measured);
  assertLeakCheckHasTeeth(bounds.rss, phases.measured);
  await driver.run(phases.warmUp);
  const before = await sample();
  await driver.run(phases.measured);
  const after = await sample();
  const reports = [
    leakReport(bounds.live, before.liveKiB, after.liveKiB, phases.measured),
    leakReport(bounds.rss, before.rssKiB, after.rssKiB, phases.measured),
  ];
  for (const r of reports) if (r.growthKiB > r.boundKiB) throw leakError(r);
  return reports;
}
