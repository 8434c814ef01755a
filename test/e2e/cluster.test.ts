/**
 * A three-member cluster of real processes: membership views, leader transfer, SIGKILL of the
 * leader during writes, and a full stop/restart that must keep every acknowledged write.
 * E2E_TARGET=etcd runs the same expectations against real etcd.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Cluster, etcdctl, eventually, type Member } from "./harness.js";

/** One line of `etcdctl endpoint status` (simple format: ids stay exact, unlike JSON numbers). */
interface EndpointStatus {
  endpoint: string;
  id: string;
  isLeader: boolean;
  raftTerm: number;
  raftIndex: number;
}

function parseStatus(out: string): EndpointStatus[] {
  return out
    .trim()
    .split("\n")
    .map((line) => {
      const f = line.split(", ");
      return { endpoint: f[0]!, id: f[1]!, isLeader: f[4] === "true", raftTerm: Number(f[6]), raftIndex: Number(f[7]) };
    });
}

let cluster: Cluster;

async function ok(endpoints: string, ...args: string[]): Promise<string> {
  const r = await etcdctl(endpoints, args);
  if (r.code !== 0) throw new Error(`etcdctl ${args.join(" ")} failed (${r.code}): ${r.stderr}\n${cluster.logs()}`);
  return r.stdout;
}

async function statuses(members: Member[]): Promise<EndpointStatus[]> {
  const eps = members.map((m) => m.endpoint).join(",");
  return parseStatus(await ok(eps, "endpoint", "status"));
}

/** The running member that every running member agrees is the leader. */
async function agreedLeader(): Promise<Member> {
  return eventually(
    async () => {
      const running = cluster.members.filter((m) => m.running);
      const st = await statuses(running);
      const idx = st.findIndex((s) => s.isLeader);
      if (st.filter((s) => s.isLeader).length !== 1) return undefined;
      // Every member must be on the leader's term (no member still believes in an older leader).
      if (new Set(st.map((s) => s.raftTerm)).size !== 1) return undefined;
      return running[idx];
    },
    30_000,
    "one agreed leader",
  );
}

beforeAll(async () => {
  cluster = await Cluster.create({ size: 3, extraArgs: ["--heartbeat-interval=50", "--election-timeout=500"] });
  await cluster.start();
});
afterAll(async () => {
  await cluster?.destroy();
});

describe("three-member cluster", () => {
  it("has one leader that every member reports; member list shows all three", async () => {
    const leader = await agreedLeader();
    const st = await statuses(cluster.members);
    expect(st).toHaveLength(3);
    expect(new Set(st.map((s) => s.id)).size).toBe(3);
    expect(st.filter((s) => s.isLeader)).toHaveLength(1);
    expect(leader.running).toBe(true);

    const byName = (l: string) => l.split(", ")[2]!;
    const list = (await ok(cluster.endpoints, "member", "list"))
      .trim()
      .split("\n")
      .sort((a, b) => byName(a).localeCompare(byName(b)));
    expect(list).toHaveLength(3);
    for (const [i, line] of list.entries()) {
      const m = cluster.members[i]!;
      expect(line).toMatch(
        new RegExp(`^[0-9a-f]+, started, n${i + 1}, http://127\\.0\\.0\\.1:${m.spec.peerPort}, http://127\\.0\\.0\\.1:${m.spec.clientPort}, false$`),
      );
    }
  });

  it("endpoint status --cluster discovers every member from one endpoint", async () => {
    const r = parseStatus(await ok(cluster.members[0]!.endpoint, "endpoint", "status", "--cluster"));
    expect(r.map((s) => s.endpoint).sort()).toEqual(cluster.members.map((m) => m.clientUrl).sort());
  });

  it("/metrics carries etcd's server gauges: one leader, applied proposals move with writes", async () => {
    const leader = await agreedLeader();
    const scrape = async (m: Member): Promise<Map<string, number>> => {
      const text = await (await fetch(`${m.clientUrl}/metrics`)).text();
      const out = new Map<string, number>();
      for (const line of text.split("\n")) {
        const hit = /^(etcd_server_[a-z_]+(?:\{[^}]*\})?) (\S+)$/.exec(line);
        if (hit) out.set(hit[1]!, Number(hit[2]));
      }
      return out;
    };
    const before = await Promise.all(cluster.members.map(scrape));
    for (const [i, m] of before.entries()) {
      const member = cluster.members[i]!;
      expect(m.get("etcd_server_has_leader"), member.spec.name).toBe(1);
      expect(m.get("etcd_server_is_leader"), member.spec.name).toBe(member === leader ? 1 : 0);
      expect(m.get("etcd_server_is_learner")).toBe(0);
      expect(m.get("etcd_server_leader_changes_seen_total")).toBeGreaterThanOrEqual(1);
      expect(m.get("etcd_server_proposals_committed_total")).toBeGreaterThanOrEqual(m.get("etcd_server_proposals_applied_total")!);
      const id = (await statuses([member]))[0]!.id;
      expect(m.get(`etcd_server_id{server_id="${id}"}`), `etcd_server_id of ${member.spec.name}`).toBe(1);
      expect([...m.keys()].some((k) => k.startsWith("etcd_server_version{server_version="))).toBe(true);
    }
    for (let i = 0; i < 5; i++) await ok(leader.endpoint, "put", `metrics/${i}`, "v");
    const after = await scrape(leader);
    expect(after.get("etcd_server_proposals_applied_total")).toBeGreaterThanOrEqual(before[cluster.members.indexOf(leader)]!.get("etcd_server_proposals_applied_total")! + 5);
  });

  it("a write on any member is read linearizably on every other", async () => {
    for (const [i, m] of cluster.members.entries()) {
      await ok(m.endpoint, "put", `lin/${i}`, `v${i}`);
      for (const other of cluster.members) {
        expect(await ok(other.endpoint, "get", `lin/${i}`, "--print-value-only")).toBe(`v${i}\n`);
      }
    }
  });

  it("move-leader hands leadership to the chosen member", async () => {
    const leader = await agreedLeader();
    const target = cluster.members.find((m) => m !== leader)!;
    const targetId = (await statuses([target]))[0]!.id;
    const out = await ok(cluster.endpoints, "move-leader", targetId);
    expect(out).toMatch(/^Leadership transferred from [0-9a-f]+ to [0-9a-f]+\n$/);
    expect((await agreedLeader()).spec.name).toBe(target.spec.name);
  });

  it("SIGKILL of the leader during writes: a new leader, and every acknowledged write survives", async () => {
    const leader = await agreedLeader();
    const others = cluster.members.filter((m) => m !== leader);
    const acked: number[] = [];
    let stop = false;
    const writer = (async () => {
      for (let i = 0; !stop && i < 2000; i++) {
        const r = await etcdctl(others.map((m) => m.endpoint).join(","), ["put", `kill/${i}`, `${i}`]);
        if (r.code === 0) acked.push(i);
      }
    })();
    await eventually(async () => (acked.length >= 5 ? true : undefined), 30_000, "writes before the kill");
    await leader.kill("SIGKILL");
    const before = acked.length;
    await eventually(async () => (acked.length >= before + 5 ? true : undefined), 60_000, "writes after the kill");
    stop = true;
    await writer;
    const newLeader = await agreedLeader();
    expect(newLeader).not.toBe(leader);
    for (const i of acked) {
      expect(await ok(newLeader.endpoint, "get", `kill/${i}`, "--print-value-only")).toBe(`${i}\n`);
    }
    leader.start();
    await leader.waitReady();
    const last = acked[acked.length - 1]!;
    await eventually(
      async () => ((await ok(leader.endpoint, "get", `kill/${last}`, "--print-value-only", "--consistency=s")) === `${last}\n` ? true : undefined),
      30_000,
      "restarted member catches up",
    );
  });

  it("the whole cluster killed and restarted loses no acknowledged write", async () => {
    const acked: string[] = [];
    for (let i = 0; i < 20; i++) {
      await ok(cluster.endpoints, "put", `restart/${i}`, `${i}`);
      acked.push(`restart/${i}`);
    }
    await cluster.stop("SIGKILL");
    await cluster.start();
    await agreedLeader();
    const all = await ok(cluster.endpoints, "get", "restart/", "--prefix", "--keys-only");
    for (const k of acked) expect(all).toContain(`${k}\n`);
  });
});
