/**
 * A short seeded chaos run with only the "follower far behind" fault (far_behind_fault.ts, issue
 * 19): each round stops a follower, writes until the live members' raft logs were compacted past
 * it, restarts it and waits until it caught up by a snapshot (received by it, sent by a live member,
 * per their metrics), while the workload runs; the run stays linearizable, keeps its
 * watch promises and loses no acknowledged write. Against the harness's target: etcetera, or real
 * etcd with E2E_TARGET=etcd. The fault also runs in the full chaos test (chaos.test.ts, every kind).
 */
import { describe, expect, it } from "vitest";
import { TARGET_ETCD } from "../e2e/harness.js";
import { formatReport, runChaos } from "./chaos_runner.js";
import { testSeed } from "../seed.js";

const log = (l: string) => console.log(l);

describe("chaos: a follower far behind catches up by a snapshot during writes", () => {
  const seed = testSeed("chaos far behind");
  it(`stays linearizable with 0 lost writes (seed=${seed}; replay: SEED=${seed} npx vitest run test/reliability/far_behind.test.ts)`, { timeout: 300_000 }, async () => {
    const report = await runChaos({ seed, durationS: 15, faults: ["farbehind"], faultOrder: "cycle", log });
    console.log(formatReport(report));
    const rounds = report.faults.filter((f) => f.kind === "farbehind");
    expect(rounds.length).toBeGreaterThan(0);
    for (const f of rounds) {
      expect(f.error, f.detail).toBeUndefined();
      expect(f.detail).toMatch(/caught up to revision/);
      // Every round must have taken the snapshot path, not the log (the point of the fault): the
      // follower received a snapshot and a live member counted one sent to it (the fault's
      // account of its final attempt comes first in the detail).
      const target = TARGET_ETCD ? "etcd" : "etcetera";
      expect(Number(/snapshots received: (\d+)/.exec(f.detail)?.[1] ?? "0"), `${target}: ${f.detail}`).toBeGreaterThanOrEqual(1);
      expect(Number(/snapshots sent to it: (\d+)/.exec(f.detail)?.[1] ?? "0"), `${target}: ${f.detail}`).toBeGreaterThanOrEqual(1);
    }
    expect(report.operations.ok).toBeGreaterThan(100);
    expect(report.linearizable, report.violations.join("\n\n")).toBe("yes");
    expect(report.watch.violations).toEqual([]);
    expect(report.lostWrites, report.lostExamples.join("\n")).toBe(0);
    expect(report.passed).toBe(true);
  });
});
