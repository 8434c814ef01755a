/**
 * Members of a three-member cluster lose power under a write load (issue 20): one member right
 * after its raft snapshot, a majority, and all three at once (the case no SIGKILL test can
 * show: every page cache is gone); a follower (alone, or with the others) in the middle of
 * installing a snapshot it is catching up by; every member around a raft WAL segment cut. Every acknowledged put survives, every member converges to
 * the same HashKV, every backend passes integrity_check.
 *
 * Seeded through test/seed.ts: SEED= replays a run, CI takes a fixed seed, the seed is printed.
 * The long run (200 seeded crashes of all three) is
 * `npm run powerloss -- --cluster --victims all --seeds 200 --cut-at delay,snapshot`; the new
 * moments as `--cut-at snapshot-install,wal-cut`.
 */
import { afterAll, describe, expect, it } from "vitest";
import { testSeed } from "../seed.js";
import { type ClusterCutAt, describeClusterReport, runClusterCrash, stopAll, type Victims } from "./cluster_crash.js";

afterAll(async () => {
  await stopAll();
});

const CASES: { victims: Victims; cutAt: ClusterCutAt; writebackPercent: number }[] = [
  { victims: "all", cutAt: "delay", writebackPercent: 0 },
  { victims: "all", cutAt: "snapshot", writebackPercent: 50 },
  { victims: "one", cutAt: "snapshot", writebackPercent: 50 },
  { victims: "majority", cutAt: "delay", writebackPercent: 50 },
  // A follower catching up by a snapshot loses power during its receive, fsync, rename or install.
  { victims: "one", cutAt: "snapshot-install", writebackPercent: 50 },
  { victims: "all", cutAt: "snapshot-install", writebackPercent: 0 },
  // Every member loses power around a raft WAL segment cut (64 KiB segments: cluster_cuts.ts).
  { victims: "all", cutAt: "wal-cut", writebackPercent: 50 },
];

describe("members of a three-member cluster lose power", () => {
  for (const c of CASES) {
    const name = `${c.victims} cut at ${c.cutAt}${c.writebackPercent > 0 ? `, ${c.writebackPercent}% written back` : ""}`;
    it(`keep every acknowledged put and converge (${name})`, { timeout: 240_000 }, async () => {
      const seed = testSeed(`powerloss cluster ${c.victims} ${c.cutAt} ${c.writebackPercent}`);
      const replay = `SEED=${seed} npx vitest run test/powerloss/cluster_crash.test.ts -t "${name}"`;
      const report = await runClusterCrash({ seed, victims: c.victims, cutAt: c.cutAt, snapshotCount: 200, maxWals: 1, maxDelayMs: 4000, writebackPercent: c.writebackPercent });
      const summary = describeClusterReport(report, replay);
      console.log(summary);
      expect(report.acked, summary).toBeGreaterThan(0);
      for (const v of report.victimReports) {
        expect(v.integrity, summary).toBe("ok");
        expect(v.restart, summary).toBe("started");
      }
      expect(report.convergence, summary).toBeUndefined();
      expect(report.hashes.length, summary).toBe(3);
      expect(new Set(report.hashes.map((h) => h.hash)).size, summary).toBe(1);
      expect(report.lostCount, summary).toBe(0);
      expect(report.revisionAfter!, summary).toBeGreaterThan(report.maxAckedRevision);
    });
  }

  // The checks have teeth: with the raft WAL's syncs planted away, an acknowledged write lives in
  // page caches only, and a power loss of every member must show as lost puts (or a member that
  // cannot start, or a cluster that does not converge).
  it("catch a planted durability bug (ETCETERA_TEST_BUG=wal-no-sync, all cut)", { timeout: 240_000 }, async () => {
    const seed = testSeed("powerloss cluster mutation wal-no-sync");
    const replay = `SEED=${seed} npx vitest run test/powerloss/cluster_crash.test.ts -t "planted"`;
    const report = await runClusterCrash({
      seed,
      victims: "all",
      cutAt: "delay",
      snapshotCount: 1_000_000,
      maxWals: 5,
      maxDelayMs: 3000,
      restartTimeoutMs: 20_000,
      env: { ETCETERA_TEST_BUG: "wal-no-sync", ETCETERA_TEST_BUGS_ALLOWED: "1" },
    });
    const summary = describeClusterReport(report, replay);
    console.log(summary);
    expect(report.acked, summary).toBeGreaterThan(0);
    expect(report.ok, summary).toBe(false);
    const caught = report.lostCount > 0 || report.victimReports.some((v) => v.restart === "refused") || report.convergence !== undefined;
    expect(caught, summary).toBe(true);
  });
});
