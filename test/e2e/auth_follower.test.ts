/**
 * With auth on, a follower answers LeaseTimeToLive by asking the leader: the caller's token must
 * go along (the leader refused every forwarded call with "user name is empty", found by the
 * etcd data-dir import test). Three members, etcdctl 3.4 with --user on each follower, both
 * targets (E2E_TARGET=etcd).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { enableAuthWithRootAndU1 } from "./auth_setup.js";
import { Cluster } from "./harness.js";
import { agreedLeader, ctlOk } from "./ops_helpers.js";

let cluster: Cluster;

beforeAll(async () => {
  cluster = await Cluster.create({ size: 3 });
  await cluster.start();
}, 60_000);
afterAll(async () => {
  await cluster?.destroy();
});

describe("lease timetolive through a follower with auth on", () => {
  it("a follower answers it for root and for a user allowed on the keys, with the attached keys", async () => {
    const { member: leader } = await agreedLeader(cluster);
    const followers = cluster.members.filter((m) => m !== leader);
    expect(followers).toHaveLength(2);
    await enableAuthWithRootAndU1((...args) => ctlOk(cluster, leader.endpoint, ...args));
    const grant = await ctlOk(cluster, leader.endpoint, "--user", "root:rootpw", "lease", "grant", "600");
    const id = /lease ([0-9a-f]+) granted/.exec(grant)?.[1];
    expect(id, grant).toBeDefined();
    await ctlOk(cluster, leader.endpoint, "--user", "u1:u1pw", "put", "app/k", "v", `--lease=${id}`);
    for (const f of followers) {
      for (const user of ["root:rootpw", "u1:u1pw"]) {
        const out = await ctlOk(cluster, f.endpoint, "--user", user, "lease", "timetolive", id!, "--keys");
        expect(out, `${user} on ${f.spec.name}`).toMatch(new RegExp(`^lease ${id} granted with TTL\\(600s\\), remaining\\(\\d+s\\), attached keys\\(\\[app/k\\]\\)`));
      }
    }
  });
});
