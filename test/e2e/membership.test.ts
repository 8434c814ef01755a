/**
 * Runtime membership with real processes and real etcdctl (E2E_TARGET=etcd runs the same against
 * real etcd): a one-member cluster grown to five and shrunk back to one under a steady write
 * load, each new member started exactly as `etcdctl member add` printed, with no acknowledged
 * write lost on any member; a removed member stops serving and exits.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TARGET_ETCD, etcdctl, eventually, type Member } from "./harness.js";
import { DynamicCluster, lostWrites, peerUrl, SteadyWriter } from "./membership_harness.js";

let cluster: DynamicCluster;
let writer: SteadyWriter;
/** The members that are (or are about to be) voters, in order of joining. */
let voters: Member[] = [];

beforeAll(async () => {
  cluster = await DynamicCluster.create(1);
  await cluster.start();
  voters = [cluster.members[0]!];
  writer = new SteadyWriter(() => voters.filter((m) => m.running));
  writer.start();
}, 60_000);

afterAll(async () => {
  await writer?.stop();
  await cluster?.destroy();
});

async function expectNoLostWrites(members: Member[]): Promise<void> {
  for (const m of members) {
    let lost: string[] = [];
    await eventually(
      async () => {
        lost = await lostWrites(m, writer.acked);
        return lost.length === 0 ? true : undefined;
      },
      30_000,
      `every acknowledged write on ${m.spec.name}`,
    ).catch(() => undefined);
    expect(lost.slice(0, 5), `${lost.length} acknowledged writes lost on ${m.spec.name}\n${cluster.logs()}`).toEqual([]);
  }
}

describe("grow 1 → 5 and shrink back to 1 under a steady write load", () => {
  it("member add prints the lines that start the new member, which joins and serves", async () => {
    await writer.waitForMore(20, "writes on the single member");
    const { member, id, stdout } = await cluster.add("n2", voters);
    expect(stdout).toContain(`ETCD_NAME="n2"`);
    expect(stdout).toContain(`ETCD_INITIAL_CLUSTER_STATE="existing"`);
    expect(stdout).toContain(`ETCD_INITIAL_ADVERTISE_PEER_URLS="${peerUrl(member.spec)}"`);
    const n1 = voters[0]!;
    expect(stdout).toMatch(new RegExp(`ETCD_INITIAL_CLUSTER=".*n1=${peerUrl(n1.spec)}.*"`));
    voters.push(member);
    const list = await cluster.list(voters);
    expect(list.map((l) => l.name).sort()).toEqual(["n1", "n2"]);
    expect(list.find((l) => l.name === "n2")).toMatchObject({ id, status: "started", isLearner: false, clientUrls: member.clientUrl });
    await writer.waitForMore(20, "writes after n2 joined");
  });

  it("grows to five, one member at a time", async () => {
    for (const name of ["n3", "n4", "n5"]) {
      // A new voter is refused until the last one is connected for a while (strict reconfig check).
      const added = await eventually(
        async () => {
          try {
            return await cluster.add(name, voters);
          } catch (e) {
            if (/unhealthy cluster/.test(String(e))) return undefined;
            throw e;
          }
        },
        30_000,
        `member add ${name}`,
      );
      voters.push(added.member);
      await writer.waitForMore(20, `writes after ${name} joined`);
    }
    const list = await cluster.list(voters);
    expect(list.map((l) => `${l.name} ${l.status} ${l.isLearner}`).sort()).toEqual(["n1 started false", "n2 started false", "n3 started false", "n4 started false", "n5 started false"]);
    await cluster.leader(voters);
  });

  it("every member of five holds every acknowledged write", async () => {
    await expectNoLostWrites(voters);
  });

  it("shrinks back to one, the leader removed first, each removed member exiting", async () => {
    while (voters.length > 1) {
      const leader = await cluster.leader(voters);
      // First the leader itself (through itself), then followers through the leader.
      const victim = voters.length === 5 ? leader : voters.find((m) => m !== leader)!;
      const id = await cluster.idOf(victim);
      const r = await eventually(
        async () => {
          const res = await etcdctl(leader.endpoint, ["member", "remove", id]);
          if (res.code !== 0 && /unhealthy cluster/.test(res.stderr)) return undefined;
          return res;
        },
        30_000,
        `member remove ${victim.spec.name}`,
      );
      // etcd 3.4 removing the leader through itself can stop before it answers: the removal is
      // applied, then etcdctl gets "etcdserver: server stopped" (Unavailable; CI of f20bc94). The
      // member list below still has to show it gone. etcetera answers first, always.
      const stoppedFirst = TARGET_ETCD && victim === leader && r.code !== 0 && r.stderr.includes("Error: etcdserver: server stopped");
      if (stoppedFirst) console.log(`member remove ${victim.spec.name} (etcd, through itself): it stopped before answering: ${r.stderr.trim()}`);
      else expect(r.code, `${r.stderr}\n${cluster.logs()}`).toBe(0);
      // Against etcd, etcdctl's client library once logged a JSON warn line on stderr (a retried
      // attempt while the removed leader stepped down, CI of 7766bb4): the reference may do that,
      // so there it is printed and only a non-warn line fails. etcetera must leave stderr empty.
      const warnings = r.stderr.split("\n").filter((l) => l !== "" && !(stoppedFirst && l === "Error: etcdserver: server stopped"));
      if (TARGET_ETCD) {
        for (const line of warnings) expect(clientWarning(line), `stderr of member remove: ${line}`).toBe(true);
        if (warnings.length > 0) console.log(`member remove ${victim.spec.name} (etcd): etcdctl's client logged ${warnings.join(" | ")}`);
      } else {
        expect(r.stderr, cluster.logs()).toBe("");
      }
      if (!stoppedFirst) expect(r.stdout).toMatch(new RegExp(`^Member\\s+${id} removed from cluster\\s+[0-9a-f]+\\n$`));
      voters = voters.filter((m) => m !== victim);
      await eventually(async () => (victim.running ? undefined : true), 30_000, `${victim.spec.name} exits after its removal`);
      expect(victim.log).toMatch(/the member has been permanently removed from the cluster/);
      // MemberList is answered from the asked member's own membership (etcd's too): a member that
      // has not applied the removal yet still lists the victim (seen against etcd under load).
      const want = voters.map((m) => m.spec.name).sort();
      const names = await eventually(
        async () => {
          const got = (await cluster.list(voters)).map((l) => l.name).sort();
          return JSON.stringify(got) === JSON.stringify(want) ? got : undefined;
        },
        15_000,
        `the member list without ${victim.spec.name}`,
      ).catch(async () => (await cluster.list(voters)).map((l) => l.name).sort());
      expect(names).toEqual(want);
      await writer.waitForMore(20, `writes after ${victim.spec.name} left`);
    }
  });

  it("the last member holds every acknowledged write", async () => {
    await writer.stop();
    expect(writer.acked.length).toBeGreaterThan(100);
    await expectNoLostWrites(voters);
  });
});

/** A line of clientv3's zap logger at warn level (JSON with "level":"warn" and a "msg"). */
function clientWarning(line: string): boolean {
  try {
    const o = JSON.parse(line) as { level?: unknown; msg?: unknown };
    return o.level === "warn" && typeof o.msg === "string";
  } catch {
    return false;
  }
}
