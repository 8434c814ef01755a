/**
 * Auto-compaction, periodic mode, on a three-member cluster of real processes (etcd 3.4's
 * v3compactor arithmetic; the exact sampling is unit-tested on a fake clock in
 * test/server/compactor): with a 2 s retention and the cluster idle, the compaction reaches the
 * idle revision and no further; a new write is kept for at least the retention before it can be
 * compacted; only the leader compacts, and it logs as etcd does. E2E_TARGET=etcd runs the same
 * expectations against real etcd. (Revision mode: auto_compaction_revision.test.ts.)
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Cluster, etcdctl, eventually, sleep } from "./harness.js";
import { ctlOk } from "./ops_helpers.js";
import { autoCompactingCluster, compactedOnEveryMember, compactState } from "./auto_compaction_cluster.js";

let cluster: Cluster;

const ok = (endpoints: string, ...args: string[]): Promise<string> => ctlOk(cluster, endpoints, ...args);

function logLines(log: string, msg: string): Array<Record<string, unknown>> {
  return log
    .split("\n")
    .filter((l) => l.includes(`"msg":"${msg}"`))
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

beforeAll(async () => {
  cluster = await autoCompactingCluster("periodic", "2s");
});
afterAll(async () => {
  await cluster?.destroy();
});

describe("auto-compaction (periodic, 2s)", () => {
  it("compacts an idle cluster to its current revision, keeps a new write for the retention, only the leader compacts", async () => {
    for (let i = 0; i < 10; i++) await ok(cluster.endpoints, "put", `k${i}`, `v${i}`);
    const idle = (await compactState(cluster, cluster.members[0]!.endpoint)).revision;
    expect(idle).toBeGreaterThanOrEqual(11);

    // Every sample of the window is the idle revision once a retention has passed with no writes.
    await compactedOnEveryMember(cluster, idle, 20_000, `compact revision ${idle} on every member`);
    const old = await etcdctl(cluster.endpoints, ["get", "k0", `--rev=${idle - 1}`]);
    expect(old.code).not.toBe(0);
    expect(old.stderr).toContain("required revision has been compacted");
    expect(await ok(cluster.endpoints, "get", "k9", `--rev=${idle}`, "--print-value-only")).toBe("v9\n");

    // A new write: the window still starts at samples older than it for about one retention.
    await ok(cluster.endpoints, "put", "fresh", "1");
    const written = Date.now();
    const fresh = idle + 1;
    let kept = 0;
    while (Date.now() - written < 1500) {
      const s = await compactState(cluster, cluster.members[0]!.endpoint);
      expect(s.compactRevision).toBeLessThan(fresh);
      kept++;
      await sleep(200);
    }
    expect(kept).toBeGreaterThan(1);
    await eventually(async () => ((await compactState(cluster, cluster.members[0]!.endpoint)).compactRevision === fresh ? true : undefined), 20_000, "compaction of the new write's revision");

    // Only the leader compacts (no leader change in this test): one member logged, with etcd's fields.
    const compacting = cluster.members.filter((m) => logLines(m.log, "completed auto periodic compaction").length > 0);
    expect(compacting).toHaveLength(1);
    const lines = logLines(compacting[0]!.log, "completed auto periodic compaction");
    expect(lines.map((l) => l.revision)).toContain(idle);
    expect(lines.map((l) => l.revision)).toContain(fresh);
    expect(lines[0]!["compact-period"]).toBe("2s");
    expect(logLines(compacting[0]!.log, "starting auto periodic compaction")[0]!["compact-period"]).toBe("2s");
  });
});
