/**
 * etcd's refusals of membership changes, leadership transfers and joins, with real etcdctl
 * against real processes (E2E_TARGET=etcd: the same expectations against real etcd).
 */
import * as grpc from "@grpc/grpc-js";
import { rmSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { reservePort } from "../ports.js";
import { clients, expectStatus, unary } from "./grpc_client.js";
import { etcdctl, eventually, Member, sleep } from "./harness.js";
import { DynamicCluster, peerUrl } from "./membership_harness.js";
import { parseExposition } from "./prometheus.js";

/** etcdctl's error line (it prints "Error: <the server's message>" and exits non-zero). */
async function refusal(endpoints: string, args: string[]): Promise<string> {
  const r = await etcdctl(endpoints, args);
  expect(r.code, `etcdctl ${args.join(" ")} should fail; it printed ${r.stdout}`).not.toBe(0);
  const line = r.stderr.split("\n").find((l) => l.startsWith("Error: "));
  return line ?? r.stderr;
}

/** Retries while the strict reconfig check still waits for peers connected long enough. */
async function settled(endpoints: string, args: string[]): Promise<string> {
  return eventually(
    async () => {
      const e = await refusal(endpoints, args);
      return /unhealthy cluster/.test(e) ? undefined : e;
    },
    30_000,
    `etcdctl ${args.join(" ")} past the health check`,
  );
}

describe("refusals on a healthy three-member cluster", () => {
  let c: DynamicCluster;
  let eps: string;
  beforeAll(async () => {
    c = await DynamicCluster.create(3);
    await c.start();
    eps = c.endpoints();
    await c.leader();
  }, 60_000);
  afterAll(async () => c?.destroy());

  it("a peer URL another member has: Peer URLs already exists", async () => {
    const taken = peerUrl(c.members[0]!.spec);
    // A second, fresh URL gives the new member an id of its own (the id hashes its URLs and the time).
    const fresh = `http://127.0.0.1:${await reservePort()}`;
    expect(await settled(eps, ["member", "add", "x", `--peer-urls=${taken},${fresh}`])).toBe("Error: etcdserver: Peer URLs already exists");
  });

  it("removing, promoting or updating an unknown member: member not found", async () => {
    expect(await settled(eps, ["member", "remove", "1234abcd"])).toBe("Error: etcdserver: member not found");
    expect(await settled(eps, ["member", "promote", "1234abcd"])).toBe("Error: etcdserver: member not found");
    expect(await settled(eps, ["member", "update", "1234abcd", `--peer-urls=http://127.0.0.1:${await reservePort()}`])).toBe("Error: etcdserver: member not found");
  });

  it("promoting a voter: can only promote a learner member", async () => {
    const id = await c.idOf(c.members[1]!);
    expect(await settled(eps, ["member", "promote", id])).toBe("Error: etcdserver: can only promote a learner member");
  });

  it("a learner that has not caught up cannot be promoted; a second learner is one too many", async () => {
    const { id } = await eventually(
      async () => {
        try {
          return await c.add("learner", c.running(), { learner: true, start: false });
        } catch (e) {
          if (/unhealthy cluster/.test(String(e))) return undefined;
          throw e;
        }
      },
      30_000,
      "member add --learner",
    );
    const listed = (await c.list(c.running())).find((m) => m.id === id);
    expect(listed).toMatchObject({ status: "unstarted", isLearner: true });
    // Asked of every member in turn: a follower forwards the promote to the leader, which refuses.
    for (const m of c.running()) {
      expect(await refusal(m.endpoint, ["member", "promote", id])).toBe("Error: etcdserver: can only promote a learner member which is in sync with leader");
    }
    const fresh = `http://127.0.0.1:${await reservePort()}`;
    expect(await settled(eps, ["member", "add", "second", "--learner", `--peer-urls=${fresh}`])).toBe("Error: etcdserver: too many learner members in cluster");
    // Leadership goes to voters only.
    expect(await refusal(eps, ["move-leader", id])).toBe("Error: etcdserver: bad leader transferee");
    expect(await refusal(eps, ["move-leader", "1234abcd"])).toBe("Error: etcdserver: bad leader transferee");
    const r = await etcdctl(eps, ["member", "remove", id]);
    expect(r.stderr).toBe("");
    expect((await c.list(c.running())).map((m) => m.id)).not.toContain(id);
  });

  it("a member whose data dir was lost, restarted as new: has already been bootstrapped", async () => {
    const m = c.members[2]!;
    await m.kill("SIGKILL");
    rmSync(m.spec.dataDir, { recursive: true, force: true });
    m.start();
    await eventually(async () => (m.running ? undefined : true), 30_000, "the member to exit");
    expect(m.log).toMatch(/member [0-9a-f]+ has already been bootstrapped/);
  });

  it("joining with --initial-cluster-state=existing without being added: refused, member count is unequal", async () => {
    const spec = await c.spec("stranger");
    const initial = [...c.members.slice(0, 3).map((m) => `${m.spec.name}=${peerUrl(m.spec)}`), `stranger=${peerUrl(spec)}`].join(",");
    const stranger = new Member(spec, [
      `--name=stranger`,
      `--data-dir=${spec.dataDir}`,
      `--listen-client-urls=http://127.0.0.1:${spec.clientPort}`,
      `--advertise-client-urls=http://127.0.0.1:${spec.clientPort}`,
      `--listen-peer-urls=${peerUrl(spec)}`,
      `--initial-advertise-peer-urls=${peerUrl(spec)}`,
      `--initial-cluster=${initial}`,
      "--initial-cluster-state=existing",
      "--initial-cluster-token=e2e-token",
    ]);
    c.members.push(stranger);
    stranger.start();
    await eventually(async () => (stranger.running ? undefined : true), 30_000, "the stranger to exit");
    expect(stranger.log).toMatch(/member count is unequal/);
  });
});

describe("refusals while new voters have not started (strict reconfig check)", () => {
  let c: DynamicCluster;
  beforeAll(async () => {
    c = await DynamicCluster.create(1);
    await c.start();
  }, 60_000);
  afterAll(async () => c?.destroy());

  it("a second voter may be added to one; a third not before the second started; nor may the first be removed", async () => {
    const n1 = c.members[0]!;
    const { id } = await c.add("n2", [n1], { start: false });
    const listed = await c.list([n1]);
    expect(listed.find((m) => m.id === id)).toMatchObject({ status: "unstarted", isLearner: false });
    const fresh = `http://127.0.0.1:${await reservePort()}`;
    expect(await refusal(n1.endpoint, ["member", "add", "n3", `--peer-urls=${fresh}`])).toBe(
      "Error: etcdserver: re-configuration failed due to not enough started members",
    );
    const self = await c.idOf(n1);
    expect(await refusal(n1.endpoint, ["member", "remove", self])).toBe("Error: etcdserver: re-configuration failed due to not enough started members");
    // etcd 3.4's toGRPCErrorMap has no entry for ErrNotEnoughStartedMembers: the status is Unknown (2)
    // with the error's text (clients that match on the code see 2, not FailedPrecondition).
    const g = clients(n1.endpoint);
    try {
      const notEnough = "etcdserver: re-configuration failed due to not enough started members";
      await expectStatus(unary(g.cluster, "MemberAdd", { peerURLs: [fresh] }), grpc.status.UNKNOWN, notEnough);
      await expectStatus(unary(g.cluster, "MemberRemove", { ID: BigInt(`0x${self}`).toString() }), grpc.status.UNKNOWN, notEnough);
    } finally {
      g.close();
    }
  });
});

/** The sum of etcd_network_active_peers toward `remote` on `m` (etcd counts each of its two streams). */
async function activePeers(m: Member, remote: string): Promise<number> {
  const text = await (await fetch(`${m.clientUrl}/metrics`)).text();
  const families = parseExposition(text);
  const samples = families.get("etcd_network_active_peers")?.samples ?? [];
  // etcetera pads ids to 16 hex digits in labels; etcdctl prints them without leading zeros.
  const id = BigInt(`0x${remote}`);
  return samples.filter((s) => s.labels.Remote !== undefined && BigInt(`0x${s.labels.Remote}`) === id).reduce((n, s) => n + s.value, 0);
}

describe("a SIGKILLed member of three: its peers notice, and the strict reconfig check keeps the quorum left", () => {
  let c: DynamicCluster;
  beforeAll(async () => {
    c = await DynamicCluster.create(3);
    await c.start();
    await c.leader();
  }, 60_000);
  afterAll(async () => c?.destroy());

  it("every survivor sees the dead peer inactive, refuses to remove a live member (unhealthy cluster), and removes the dead one", async () => {
    const leader = await c.leader();
    const connectedAtMs = Date.now();
    // A follower dies: the other follower has no traffic of its own to it, only the streams.
    const dead = c.members.find((m) => m !== leader)!;
    const deadId = await c.idOf(dead);
    const live = c.members.filter((m) => m !== dead);
    const liveIds = await Promise.all(live.map((m) => c.idOf(m)));
    for (const m of live) {
      await eventually(async () => ((await activePeers(m, deadId)) > 0 ? true : undefined), 30_000, `${m.spec.name} connected to ${dead.spec.name}`);
    }
    await dead.kill("SIGKILL");
    for (const m of live) {
      await eventually(async () => ((await activePeers(m, deadId)) === 0 ? true : undefined), 30_000, `${m.spec.name}'s etcd_network_active_peers toward the dead ${dead.spec.name} at 0`);
    }
    // The check counts a peer active once connected for etcd's HealthInterval (5 s): past it, the
    // survivors count each other, and a refusal is due to the dead member alone.
    await sleep(Math.max(0, connectedAtMs + 6000 - Date.now()));
    // Each survivor (the leader and the follower) asked to remove the other: with one of three
    // down, that would leave one started member of two, no quorum. Refused however long it waits.
    for (const [i, m] of live.entries()) {
      const other = liveIds[1 - i]!;
      expect(await refusal(m.endpoint, ["member", "remove", other]), `${m.spec.name} asked to remove a live member`).toBe("Error: etcdserver: unhealthy cluster");
    }
    expect((await c.list(live)).map((l) => l.id).sort()).toEqual([...liveIds, deadId].sort());
    // The dead member is not part of the active quorum: its removal is allowed.
    const out = await c.removeSettled(deadId, live, "member remove of the dead member");
    expect(out).toMatch(new RegExp(`^Member\\s+${deadId} removed from cluster`));
  });
});
