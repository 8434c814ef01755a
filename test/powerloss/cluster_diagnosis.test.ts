/**
 * The diagnosis a failed power-loss cluster run prints (cluster_diagnosis.ts) names the phase it
 * was in, each member's state, files and last log lines and what lazyfs dropped; an abandoned run
 * stops at its next phase. No processes: members that never started, a data dir on plain disk.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { Member } from "../e2e/harness.js";
import { diagnose, lastLines, PhaseClock } from "./cluster_diagnosis.js";

const dir = mkdtempSync(join(tmpdir(), "etcetera-cluster-diagnosis-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("the diagnosis of a power-loss cluster run", () => {
  it("names the phase, the phases before with their durations, and stops an abandoned run", () => {
    const clock = new PhaseClock();
    clock.enter("first acknowledged put");
    clock.enter("waiting for restart");
    expect(clock.phase).toBe("waiting for restart");
    expect(clock.describe()).toMatch(/^phase "waiting for restart" for \d+\.\d s \(total \d+\.\d s; before: starting the cluster \d+\.\d s, first acknowledged put \d+\.\d s\)$/);
    clock.abandon("over budget");
    expect(clock.abandoned).toBe("over budget");
    expect(() => clock.enter("convergence")).toThrow(/abandoned in phase "waiting for restart": over budget/);
    expect(() => clock.check()).toThrow(/over budget/);
  });

  it("keeps the last lines of a log, each cut to 400 characters", () => {
    const log = ["a", "", "b", "x".repeat(500), "c", ""].join("\n");
    expect(lastLines(log, 3)).toEqual(["b", `${"x".repeat(400)}…`, "c"]);
  });

  it("gives each member's state, its files, its log before the cut and since, and what lazyfs dropped", async () => {
    const disk = join(dir, "disk-n1", "data");
    mkdirSync(join(disk, "member", "snap"), { recursive: true });
    writeFileSync(join(disk, "member", "snap", "000000000000012c.snap.db"), "image");
    writeFileSync(join(disk, "member", "snap", "incoming-ab.db.tmp"), "partial");
    const n1 = new Member({ name: "n1", clientPort: 1, peerPort: 2, dataDir: join(dir, "mnt-n1", "data") }, []);
    n1.log = `{"msg":"receiving database snapshot"}\n{"msg":"ready to serve client requests"}\n`;
    const n2 = new Member({ name: "n2", clientPort: 3, peerPort: 4, dataDir: join(dir, "mnt-n2", "data") }, []);
    const clock = new PhaseClock();
    clock.enter("catch-up");
    const text = await diagnose({
      clock,
      members: [n1, n2],
      dataDirs: [
        { mounted: n1.spec.dataDir, mountpoint: join(dir, "mnt-n1"), disk },
        { mounted: n2.spec.dataDir, mountpoint: join(dir, "mnt-n2"), disk: join(dir, "disk-n2", "data") },
      ],
      logsBeforeCut: new Map([["n1", `{"msg":"staged received database snapshot"}\n`]]),
      cutLogs: "---- n1\ndropped 3 unsynced writes of member/wal/0000000000000001-0000000000000001.wal\n",
    });
    expect(text).toContain('diagnosis: phase "catch-up"');
    expect(text).toContain("==== n1 (not running): not running");
    expect(text).toContain("files: (disk, unmounted) snap/000000000000012c.snap.db 5, snap/incoming-ab.db.tmp 7");
    expect(text).toMatch(/log up to the cut:\n\s+\{"msg":"staged received database snapshot"\}\n\s+log since the restart:\n\s+\{"msg":"receiving database snapshot"\}/);
    expect(text).toContain("==== n2 (not running)");
    expect(text).toContain("files: (disk, unmounted) no data dir");
    expect(text).toContain("lazyfs dropped (2 lines):");
    expect(text).toContain("dropped 3 unsynced writes of member/wal/");
  });
});
