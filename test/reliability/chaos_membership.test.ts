/**
 * A short seeded chaos run of the "membership" fault alone (membership_fault.ts: a learner added,
 * promoted and removed while an original member is SIGKILLed or partitioned) against the
 * harness's target, etcetera or real etcd with E2E_TARGET=etcd: linearizable, no acknowledged
 * write lost, and every change carried through (the cluster back to its three voters each time).
 */
import { describe, expect, it } from "vitest";
import { formatReport, runChaos } from "./chaos_runner.js";

const SEED = process.env.SEED !== undefined && process.env.SEED !== "" ? Number(process.env.SEED) : 20261201;
const log = (l: string) => console.log(l);

describe("chaos: membership changes during kills and partitions", () => {
  it(`stays linearizable and loses no acknowledged write while learners are added, promoted and removed (seed=${SEED})`, { timeout: 300_000 }, async () => {
    const report = await runChaos({ seed: SEED, durationS: 25, faults: ["membership"], faultOrder: "cycle", log });
    console.log(formatReport(report));
    const changes = report.faults.filter((f) => f.kind === "membership");
    expect(changes.length).toBeGreaterThan(0);
    expect(changes.filter((f) => f.error !== undefined).map((f) => `${f.detail} ${f.error}`)).toEqual([]);
    for (const f of changes) expect(f.detail).toMatch(/learner x\d+ \([0-9a-f]+\) added; .*; removed at/);
    expect(changes.some((f) => f.detail.includes("promoted at")), "at least one learner promoted").toBe(true);
    // The learner's peer traffic goes through its own proxy, and a partition cuts it there too.
    for (const f of changes) expect(Number(/its proxy: (\d+) connections/.exec(f.detail)?.[1]), f.detail).toBeGreaterThan(0);
    for (const f of changes.filter((c) => c.detail.includes("; partition "))) expect(Number(/, (\d+) bytes dropped/.exec(f.detail)?.[1]), f.detail).toBeGreaterThan(0);
    expect(report.operations.ok).toBeGreaterThan(200);
    expect(report.linearizable, report.violations.join("\n\n")).toBe("yes");
    expect(report.lostWrites, report.lostExamples.join("\n")).toBe(0);
    expect(report.passed).toBe(true);
  });
});
