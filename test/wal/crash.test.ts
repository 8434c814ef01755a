import { describe, expect, it } from "vitest";
import { runCrashCycles } from "./crash-harness.js";
import { testSeed } from "./helpers.js";

describe("WAL crash safety (SIGKILL)", () => {
  it("keeps every acknowledged entry and invents nothing across 50 kills", async () => {
    const seed = testSeed("wal crash");
    const r = await runCrashCycles({ kills: 50, seed });
    console.log(`crash test: ${r.kills} kills survived, ${r.ackedSaves} acknowledged saves, ${r.tornRecoveries} recoveries kept unacknowledged data, ${r.tornTails} kills left a torn tail, ${r.repairs} repaired by the restarted child, last index ${r.lastIndex}, ${r.snapshots} snapshot markers`);
    expect(r.kills).toBe(50);
    expect(r.ackedSaves).toBeGreaterThan(0);
  }, 180_000);
});
