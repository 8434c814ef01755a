/**
 * Auto-compaction, revision mode, on a three-member cluster of real processes (E2E_TARGET=etcd
 * runs the same against real etcd): with --auto-compaction-retention=10 the leader compacts, at
 * its first wake (etcd's revInterval: 5 minutes after start), to the current revision less 10,
 * keeping exactly the last ten revisions; it logs as etcd does. This file waits those 5 minutes,
 * idle: etcd's interval is not a flag, and the arithmetic on a fake clock is unit-tested in
 * test/server/compactor.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Cluster, etcdctl } from "./harness.js";
import { ctlOk } from "./ops_helpers.js";
import { autoCompactingCluster, compactedOnEveryMember, compactState } from "./auto_compaction_cluster.js";

let cluster: Cluster;
const RETENTION = 10;
const KEYS = 30;

const ok = (endpoints: string, ...args: string[]): Promise<string> => ctlOk(cluster, endpoints, ...args);

beforeAll(async () => {
  cluster = await autoCompactingCluster("revision", String(RETENTION));
});
afterAll(async () => {
  await cluster?.destroy();
});

describe(`auto-compaction (revision, retention ${RETENTION})`, () => {
  it("compacts to the current revision less the retention on every member, keeping the last revisions readable", async () => {
    for (let i = 0; i < KEYS; i++) await ok(cluster.endpoints, "put", `k${i}`, `v${i}`);
    const current = (await compactState(cluster, cluster.members[0]!.endpoint)).revision;
    expect(current).toBe(KEYS + 1);
    const retained = current - RETENTION;
    await compactedOnEveryMember(cluster, retained, 7 * 60_000, `compact revision ${retained} (revision ${current} less ${RETENTION}) on every member`);
    const gone = await etcdctl(cluster.endpoints, ["get", "k0", `--rev=${retained - 1}`]);
    expect(gone.code).not.toBe(0);
    expect(gone.stderr).toContain("required revision has been compacted");
    // Revision r holds k0..k(r-2): the oldest retained revision still reads.
    expect(await ok(cluster.endpoints, "get", `k${retained - 2}`, `--rev=${retained}`, "--print-value-only")).toBe(`v${retained - 2}\n`);
    const compacting = cluster.members.filter((m) => m.log.includes(`"msg":"completed auto revision compaction"`));
    expect(compacting).toHaveLength(1);
    const line = compacting[0]!.log.split("\n").find((l) => l.includes(`"msg":"completed auto revision compaction"`))!;
    expect(JSON.parse(line)).toMatchObject({ revision: retained, "revision-compaction-retention": RETENTION });
  }, 8 * 60_000);
});
