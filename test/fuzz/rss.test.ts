/**
 * The fuzz suites' leak check (rss.ts) against a simulated server: a steady leak at the rate it
 * must catch fails it, a one-time step while the process reaches its plateau does not.
 */
import { describe, expect, it } from "vitest";
import { leakCheck, type LeakBounds, type MemorySample } from "./rss.js";

const BOUNDS: LeakBounds = {
  live: { what: "live (simulated)", boundKiB: 4 * 1024, leakBytesPerRequest: 1000 },
  rss: { what: "rss (simulated)", boundKiB: 16 * 1024, leakBytesPerRequest: 1000 },
};
const PHASES = { warmUp: 1000, measured: 26_000 };

/** A server whose memory after GC is `base` plus `leakBytes` per request plus `step(requests)` KiB of RSS. */
function simulated(leakBytes: number, step: (requests: number) => number) {
  let requests = 0;
  const sample = async (): Promise<MemorySample> => {
    const leakedKiB = Math.round((requests * leakBytes) / 1024);
    return { liveKiB: 24_000 + leakedKiB, rssKiB: 112_000 + leakedKiB + step(requests) };
  };
  const driver = {
    async run(n: number): Promise<void> {
      requests += n;
    },
  };
  return { sample, driver };
}

describe("leakCheck", () => {
  it("catches a steady leak of 1,000 bytes per request", async () => {
    const s = simulated(1000, () => 0);
    await expect(leakCheck(s.sample, BOUNDS, s.driver, PHASES)).rejects.toThrow(/grew \d+ KiB over 26000 requests/);
  });

  it("passes a server without a leak", async () => {
    const s = simulated(0, () => 0);
    const reports = await leakCheck(s.sample, BOUNDS, s.driver, PHASES);
    expect(reports.map((r) => r.growthKiB)).toEqual([0, 0]);
  });

  it("passes an 18 MiB one-time RSS step in the first half of the measured phase (a process reaching its plateau)", async () => {
    const s = simulated(0, (requests) => (requests > PHASES.warmUp + 5000 ? 18 * 1024 : 0));
    const reports = await leakCheck(s.sample, BOUNDS, s.driver, PHASES);
    expect(reports[1]!.growthKiB).toBe(18 * 1024);
  });

  it("fails the same step in the second half (it cannot be told from a leak there)", async () => {
    const s = simulated(0, (requests) => (requests > PHASES.warmUp + 20_000 ? 18 * 1024 : 0));
    await expect(leakCheck(s.sample, BOUNDS, s.driver, PHASES)).rejects.toThrow(/rss \(simulated\): grew 18432 KiB/);
  });
});
