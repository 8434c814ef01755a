/**
 * --force-new-cluster (ETCD_FORCE_NEW_CLUSTER here: the harness keeps each member's flags): three
 * members take writes, two are SIGKILLed for good, the third is killed and restarted alone from its
 * data. It must come up as a one-member cluster (the others removed), with every acknowledged
 * write readable, take new writes, and keep all of it across a later plain restart. Both targets;
 * etcd may lose the last acknowledged writes here (deviation: force-new-cluster-keeps-log-tail):
 * it discards the entries past the commit index its WAL holds, and a commit-only hard state sits in
 * its WAL's write buffer until the next fsync, so a SIGKILL loses it.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Cluster, TARGET_ETCD, etcdctl, eventually } from "./harness.js";
import { agreedLeader, ctlOk, memberId } from "./ops_helpers.js";

let cluster: Cluster;

beforeAll(async () => {
  cluster = await Cluster.create({ size: 3, extraArgs: ["--heartbeat-interval=50", "--election-timeout=500", "--snapshot-count=50"] });
  await cluster.start();
});
afterAll(async () => {
  await cluster?.destroy();
});

describe("force-new-cluster", () => {
  it("a survivor of three restarts alone with every acknowledged write, and takes new ones", async () => {
    const { member: leader } = await agreedLeader(cluster);
    // The survivor is a follower: the harder case (it learns the commit index from the leader).
    const survivor = cluster.members.find((m) => m !== leader)!;
    const survivorId = await memberId(cluster, survivor);
    const acked: number[] = [];
    for (let i = 0; i < 120; i++) {
      const r = await etcdctl(leader.endpoint, ["put", `fnc/${i}`, `v${i}`]);
      if (r.code === 0) acked.push(i);
    }
    expect(acked).toHaveLength(120);
    // Acknowledged means on a majority; the survivor must hold them before the others go.
    await eventually(
      async () => ((await ctlOk(cluster, survivor.endpoint, "get", "fnc/119", "--print-value-only", "--consistency=s")) === "v119\n" ? true : undefined),
      20_000,
      "the survivor has the last write",
    );
    for (const m of cluster.members) if (m !== survivor) await m.kill("SIGKILL");
    await survivor.kill("SIGKILL");

    survivor.start({ ETCD_FORCE_NEW_CLUSTER: "true" });
    await survivor.waitReady();
    const list = await eventually(
      async () => {
        const out = await ctlOk(cluster, survivor.endpoint, "member", "list");
        return out.trim().split("\n").length === 1 ? out : undefined;
      },
      30_000,
      "a one-member member list",
    );
    expect(list).toMatch(new RegExp(`^${survivorId}, started, ${survivor.spec.name}, `));
    const st = (await ctlOk(cluster, survivor.endpoint, "endpoint", "status")).split(", ");
    expect(st[1]).toBe(survivorId);
    expect(st[4]).toBe("true"); // its own leader

    const all = new Set((await ctlOk(cluster, survivor.endpoint, "get", "fnc/", "--prefix", "--print-value-only")).trim().split("\n"));
    if (TARGET_ETCD) {
      // Every acknowledged write but possibly the last few (seen: the last one).
      for (const i of acked.slice(0, -10)) expect(all.has(`v${i}`), `fnc/${i}`).toBe(true);
      for (const v of all) expect(acked.map((i) => `v${i}`)).toContain(v);
    } else {
      expect(all).toEqual(new Set(acked.map((i) => `v${i}`)));
    }
    await ctlOk(cluster, survivor.endpoint, "put", "after", "force");
    expect(await ctlOk(cluster, survivor.endpoint, "get", "after", "--print-value-only")).toBe("force\n");

    // A later restart without the flag is a plain restart of the one-member cluster.
    await survivor.kill("SIGTERM");
    survivor.start();
    await survivor.waitReady();
    expect(await ctlOk(cluster, survivor.endpoint, "get", "after", "--print-value-only")).toBe("force\n");
    expect((await ctlOk(cluster, survivor.endpoint, "member", "list")).trim().split("\n")).toHaveLength(1);
    const again = new Set((await ctlOk(cluster, survivor.endpoint, "get", "fnc/", "--prefix", "--print-value-only")).trim().split("\n"));
    expect(again).toEqual(all);
    // 120 etcdctl processes one after another, three restarts: minutes on a loaded machine.
  }, 240_000);
});
