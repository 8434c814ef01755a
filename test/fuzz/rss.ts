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
  /** VmRSS less V8's committed new space (see sampleAfterGc). */
  readonly rssKiB: number;
  readonly liveKiB: number;
}

/**
 * The leak check: warm up, force full collections and sample, run the measured phase in two
 * halves, collecting and sampling after each. After a forced GC both figures hold only what the
 * server keeps alive, so their growth over the phase is retention, not garbage timing (without
 * forced GCs, V8's heap sizing moves RSS by ±30 MiB over such phases and hides a 1 KB/request
 * leak). Both bounds must hold and must have teeth at their leak rates over the measured phase.
 *
 * A growth past the bound is a leak only if the second half grew too, by more than half the
 * bound: a leak retains in both halves alike (its second half alone passes half the bound by the
 * same 1.5 times the whole phase passes the bound), while a process still reaching its plateau
 * takes a one-time step. Seen in CI: RSS after GC 112 MiB after the warm-up, where it had been
 * 129-136 MiB in every other run, then 131 MiB at the end, with the live set flat (-122 KiB).
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
  const firstHalf = Math.ceil(phases.measured / 2);
  await driver.run(firstHalf);
  const mid = await sample();
  await driver.run(phases.measured - firstHalf);
  const after = await sample();
  const checks = [
    { report: leakReport(bounds.live, before.liveKiB, after.liveKiB, phases.measured), midKiB: mid.liveKiB },
    { report: leakReport(bounds.rss, before.rssKiB, after.rssKiB, phases.measured), midKiB: mid.rssKiB },
  ];
  for (const { report: r, midKiB } of checks) {
    const secondHalfKiB = r.afterKiB - midKiB;
    console.log(`[fuzz] ${r.what}: ${midKiB} KiB after the first half; second half grew ${secondHalfKiB} KiB (half the bound: ${r.boundKiB / 2} KiB)`);
    if (r.growthKiB > r.boundKiB && secondHalfKiB > r.boundKiB / 2) throw leakError(r);
  }
  return checks.map((c) => c.report);
}
