/**
 * Lease keep-alives sent to a follower, which forwards them to the leader (etcd: over the peer
 * port; etcetera: over the leader's client port), keep working across leader changes: the first
 * keep-alive after a move-leader, through a follower that had forwarded to the former leader,
 * gets its TTL. (etcetera failed it with "etcdserver: leader changed": the cancelled stream to the
 * former leader failed the renewal queued for the new one; seen in metrics.test.ts, whose defrag
 * moves the leadership.) And while there is no leader, a follower tries the renewal again until a
 * leader takes it (etcd's LeaseRenew: every 50 ms, up to its request timeout): a keep-alive sent
 * (and a time-to-live) through a follower the moment the leader dies is answered once the next
 * leader is elected. (etcetera answered "etcdserver: leader changed" at once.)
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Cluster, type Member } from "./harness.js";
import { agreedLeader, ctlOk, memberId } from "./ops_helpers.js";

let cluster: Cluster;
beforeAll(async () => {
  cluster = await Cluster.create({ size: 3, extraArgs: ["--heartbeat-interval=50", "--election-timeout=500"] });
  await cluster.start();
}, 60_000);
afterAll(async () => {
  await cluster?.destroy();
});

async function keepAliveOnce(via: Member, lease: string): Promise<string> {
  return ctlOk(cluster, via.endpoint, "lease", "keep-alive", "--once", lease);
}

describe("lease keep-alive through a follower", () => {
  it("the first keep-alive after each leader change, through the same follower, renews the lease", { timeout: 120_000 }, async () => {
    const out = await ctlOk(cluster, cluster.endpoints, "lease", "grant", "60");
    const lease = /^lease ([0-9a-f]+) granted/.exec(out)?.[1];
    expect(lease, out).toBeDefined();
    let { member: leader } = await agreedLeader(cluster);
    // One member stays a follower throughout; the leadership moves between the other two.
    const follower = cluster.members.find((m) => m !== leader)!;
    const [a, b] = cluster.members.filter((m) => m !== follower) as [Member, Member];
    expect(await keepAliveOnce(follower, lease!)).toMatch(new RegExp(`^lease ${lease} keepalived with TTL\\(60\\)`));
    for (let round = 0; round < 4; round++) {
      const next = leader === a ? b : a;
      await ctlOk(cluster, leader.endpoint, "move-leader", await memberId(cluster, next));
      leader = (await agreedLeader(cluster)).member;
      expect(leader, `round ${round}: the leadership moved`).toBe(next);
      const renewed = await keepAliveOnce(follower, lease!);
      expect(renewed, `round ${round}: keep-alive through ${follower.spec.name} after the move to ${next.spec.name}`).toMatch(
        new RegExp(`^lease ${lease} keepalived with TTL\\(60\\)`),
      );
    }
  });

  // Last: it kills the leader.
  it("a keep-alive and a time-to-live through the followers, sent right after the leader died, are answered by the next leader", { timeout: 120_000 }, async () => {
    const out = await ctlOk(cluster, cluster.endpoints, "lease", "grant", "60");
    const lease = /^lease ([0-9a-f]+) granted/.exec(out)?.[1];
    expect(lease, out).toBeDefined();
    const { member: leader } = await agreedLeader(cluster);
    const [f1, f2] = cluster.members.filter((m) => m !== leader) as [Member, Member];
    // The followers still take the dead member for their leader for up to an election timeout.
    await leader.kill("SIGKILL");
    const [renewed, ttl] = await Promise.all([keepAliveOnce(f1, lease!), ctlOk(cluster, f2.endpoint, "lease", "timetolive", lease!)]);
    expect(renewed, `keep-alive through ${f1.spec.name} after ${leader.spec.name} was killed`).toMatch(new RegExp(`^lease ${lease} keepalived with TTL\\(60\\)`));
    expect(ttl, `time-to-live through ${f2.spec.name} after ${leader.spec.name} was killed`).toMatch(new RegExp(`^lease ${lease} granted with TTL\\(60s\\), remaining\\(\\d+s\\)`));
    const next = await agreedLeader(cluster);
    expect(next.member).not.toBe(leader);
  });
});
