/**
 * One member loses power under a write load, before its first raft snapshot (issue 20): the raft
 * WAL alone must bring back every acknowledged put, and the backend as left must pass SQLite's
 * integrity_check. Cuts after a raft snapshot or a released WAL segment are `npm run powerloss`
 * until the backend's durability is fixed (they lose acknowledged writes today; see the issue).
 *
 * Seeded through test/seed.ts: SEED= replays a run, CI takes a fixed seed, the seed is printed.
 */
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { isMounted } from "./lazyfs.js";
import { testSeed } from "../seed.js";
import { describeReport, runMemberCrash, stopAll } from "./member_crash.js";

afterAll(async () => {
  await stopAll();
});

describe("one member loses power before its first snapshot", () => {
  for (const run of [1, 2]) {
    it(`keeps every acknowledged put (run ${run})`, { timeout: 120_000 }, async () => {
      const seed = testSeed(`powerloss member before snapshot ${run}`);
      const replay = `SEED=${seed} npx vitest run test/powerloss/member_crash.test.ts`;
      // No raft snapshot in the run: --snapshot-count far above what the load writes.
      const report = await runMemberCrash({ seed, cutAt: "delay", maxDelayMs: 2500, snapshotCount: 1_000_000, maxWals: 5, concurrency: 16 });
      const summary = describeReport(report, replay);
      console.log(summary);
      expect(report.acked, summary).toBeGreaterThan(0);
      expect(report.integrity, summary).toBe("ok");
      expect(report.restart, summary).toBe("started");
      expect(report.lostCount, summary).toBe(0);
      expect(report.revisionAfter!, summary).toBeGreaterThanOrEqual(report.maxAckedRevision);
      expect(isMounted(join(report.dir, "mnt"))).toBe(false);
    });
  }
});
