import { describe, expect, it } from "vitest";
import { readGateWithBugs, testBugsFromEnv } from "../../src/server/test_bugs.js";
import { Cluster } from "../e2e/harness.js";

describe("test-only bugs (src/server/test_bugs.ts)", () => {
  it("none without ETCETERA_TEST_BUG", () => {
    expect(testBugsFromEnv({})).toEqual({ bugs: new Set() });
    expect(testBugsFromEnv({ ETCETERA_TEST_BUG: "", ETCETERA_TEST_BUGS_ALLOWED: "1" })).toEqual({ bugs: new Set() });
  });

  it("refused unless ETCETERA_TEST_BUGS_ALLOWED=1 is set too", () => {
    expect(testBugsFromEnv({ ETCETERA_TEST_BUG: "follower-local-read" })).toEqual({
      error: "ETCETERA_TEST_BUG=follower-local-read is set but ETCETERA_TEST_BUGS_ALLOWED=1 is not: refusing to start a member with a test-only bug",
    });
    expect("error" in testBugsFromEnv({ ETCETERA_TEST_BUG: "follower-local-read", ETCETERA_TEST_BUGS_ALLOWED: "true" })).toBe(true);
  });

  it("a known bug with the flag; an unknown one refused", () => {
    expect(testBugsFromEnv({ ETCETERA_TEST_BUG: "follower-local-read", ETCETERA_TEST_BUGS_ALLOWED: "1" })).toEqual({ bugs: new Set(["follower-local-read"]) });
    expect(testBugsFromEnv({ ETCETERA_TEST_BUG: "follower-local-read,wal-no-sync", ETCETERA_TEST_BUGS_ALLOWED: "1" })).toEqual({ bugs: new Set(["follower-local-read", "wal-no-sync"]) });
    expect(testBugsFromEnv({ ETCETERA_TEST_BUG: "drop-writes", ETCETERA_TEST_BUGS_ALLOWED: "1" })).toEqual({
      error: 'ETCETERA_TEST_BUG: unknown test bug "drop-writes" (known: follower-local-read, wal-no-sync)',
    });
  });

  it("follower-local-read lets a follower's reads through without ReadIndex; the leader's still wait", async () => {
    let rounds = 0;
    const readIndex = { notify: () => (rounds++, Promise.resolve()) };
    let leader = false;
    const gate = readGateWithBugs(readIndex, new Set(["follower-local-read"]), () => leader);
    await gate.notify();
    expect(rounds).toBe(0);
    leader = true;
    await gate.notify();
    expect(rounds).toBe(1);
    expect(readGateWithBugs(readIndex, new Set(), () => false)).toBe(readIndex);
  });

  it("a real member refuses to start with a test bug but without the flag, and says so", async () => {
    const cluster = await Cluster.create({ size: 1 });
    try {
      const m = cluster.members[0]!;
      m.start({ ETCETERA_TEST_BUG: "follower-local-read" });
      await expect(m.waitReady(20_000)).rejects.toThrow(/exited/);
      expect(m.log).toContain("refusing to start a member with a test-only bug");
    } finally {
      await cluster.destroy();
    }
  });
});
