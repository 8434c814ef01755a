/**
 * A short chaos run (~60 s of faults, every kind in turn, the power cut on lazyfs) against the harness's target —
 * etcetera, or real etcd with E2E_TARGET=etcd — with a fixed seed (override with SEED=...), then
 * short runs with TEST-ONLY bugs that must be reported as violations: a client answering reads
 * from a stale cache, and a server whose followers serve linearizable reads locally.
 * Needs real member processes: it joins CI with the e2e suites.
 */
import { describe, expect, it } from "vitest";
import { formatReport, runChaos } from "./chaos_runner.js";
import { FAULT_KINDS } from "./faults.js";
import { testSeed } from "../seed.js";

const SEED = process.env.SEED !== undefined && process.env.SEED !== "" ? Number(process.env.SEED) : 20240607;
/** A fresh seed on every local run widens what is explored; CI takes a fixed one (test/seed.ts). */
const RANDOM_SEED = testSeed("chaos random fault order");
const log = (l: string) => console.log(l);

describe("chaos", () => {
  it(`stays linearizable, keeps watch promises and loses no acknowledged write under every fault kind (seed=${SEED})`, { timeout: 240_000 }, async () => {
    const report = await runChaos({ seed: SEED, durationS: 60, faults: FAULT_KINDS, faultOrder: "cycle", log });
    console.log(formatReport(report));
    expect(new Set(report.faults.map((f) => f.kind))).toEqual(new Set(FAULT_KINDS));
    expect(report.faults.filter((f) => f.leader).length).toBeGreaterThan(0);
    expect(report.operations.ok).toBeGreaterThan(500);
    expect(report.linearizable, report.violations.join("\n\n")).toBe("yes");
    expect(report.watch.violations).toEqual([]);
    expect(report.watch.laggingWatchers).toEqual([]);
    expect(report.lostWrites, report.lostExamples.join("\n")).toBe(0);
    expect(report.passed).toBe(true);
  });

  it(`stays linearizable with a random seed too (seed=${RANDOM_SEED}; replay: SEED=${RANDOM_SEED} npx vitest run test/reliability/chaos.test.ts)`, { timeout: 200_000 }, async () => {
    const report = await runChaos({ seed: RANDOM_SEED, durationS: 40, faults: FAULT_KINDS, faultOrder: "random", log });
    console.log(formatReport(report));
    expect(report.linearizable, report.violations.join("\n\n")).toBe("yes");
    expect(report.watch.violations).toEqual([]);
    expect(report.lostWrites, report.lostExamples.join("\n")).toBe(0);
    expect(report.passed).toBe(true);
  });

  it(`has teeth: reads served from a stale client cache are reported (seed=${SEED})`, { timeout: 120_000 }, async () => {
    const report = await runChaos({ seed: SEED, durationS: 8, faults: ["reset"], staleReadRate: 0.2, log });
    console.log(formatReport(report));
    expect(report.staleReadsInjected).toBeGreaterThan(0);
    expect(report.linearizable).toBe("no");
    expect(report.reportFiles.length).toBeGreaterThan(0);
    expect(report.passed).toBe(false);
  });

  it(`has teeth: a server whose followers serve linearizable reads locally is reported (seed=${SEED})`, { timeout: 120_000 }, async () => {
    // The bug is planted in every member (ETCETERA_TEST_BUG=follower-local-read, src/server/test_bugs.ts);
    // Slow links of a follower keep it behind a leader it still follows (the leader and the other
    // follower are a quorum without it), so its local reads miss acknowledged writes for the whole
    // fault. Partitions of any member alone were not enough on a loaded machine (2 of 3 runs at
    // load 30 saw no stale read): a cut-off follower gives up its leader after one election timeout
    // (pre-vote) and then refuses reads, and a cut-off leader answers nothing, so the window was ~1 s.
    const report = await runChaos({ seed: SEED, durationS: 16, faults: ["delay", "partition"], faultOrder: "cycle", faultTargets: "followers", serverBug: "follower-local-read", log });
    console.log(formatReport(report));
    expect(report.injectedBugs).toEqual(["server:follower-local-read"]);
    expect(report.linearizable).toBe("no");
    expect(report.reportFiles.length).toBeGreaterThan(0);
    expect(report.passed).toBe(false);
  });
});
