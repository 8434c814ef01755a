/**
 * A restarted member takes its peers from the membership it recovered, not from --initial-cluster:
 * etcd ignores the --initial-cluster* flags once a WAL exists, so a script whose flags went stale
 * (a member replaced since, another token) restarts the member unchanged. Both targets.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { reservePort } from "../ports.js";
import { Cluster, etcdctl, eventually, Member, newClusterArgs, TARGET_ETCD, type MemberSpec } from "./harness.js";
import { parseExposition } from "./prometheus.js";

/** Member ids (hex, no leading zeros) from `etcdctl member list -w json`. */
async function memberIds(endpoint: string): Promise<string[]> {
  const r = await etcdctl(endpoint, ["member", "list", "-w", "json"]);
  expect(r.code, r.stderr).toBe(0);
  const list = JSON.parse(r.stdout.replace(/"ID":(\d+)/g, '"ID":"$1"')) as { members: Array<{ ID: string }> };
  return list.members.map((m) => BigInt(m.ID).toString(16)).sort();
}

/** Every peer id a member's network metrics name (To= and Remote= labels). */
async function peerLabels(m: Member): Promise<string[]> {
  const families = parseExposition(await (await fetch(`${m.clientUrl}/metrics`)).text());
  const ids = new Set<string>();
  for (const [name, f] of families) {
    if (!name.startsWith("etcd_network_")) continue;
    for (const s of f.samples) for (const l of [s.labels.To, s.labels.Remote]) if (l !== undefined) ids.add(BigInt(`0x${l}`).toString(16));
  }
  return [...ids].sort();
}

describe("a restart ignores stale --initial-cluster flags", () => {
  let c: Cluster;
  beforeAll(async () => {
    c = await Cluster.create({ size: 3 });
    await c.start();
  }, 60_000);
  afterAll(async () => c?.destroy());

  it("n3 restarted with another token and a member that does not exist keeps its peers and serves", async () => {
    const put = await etcdctl(c.endpoints, ["put", "before", "1"]);
    expect(put.code, put.stderr).toBe(0);
    const ids = await memberIds(c.members[0]!.endpoint);
    expect(ids).toHaveLength(3);

    const old = c.members[2]!;
    await old.kill("SIGTERM");
    const s = old.spec;
    // A member that never existed (only its peer URL is ever named).
    const ghost: MemberSpec = { name: "ghost", clientPort: 0, peerPort: await reservePort(), dataDir: "" };
    // The flags a stale script would pass (a fourth member, another token): every member's id
    // under them differs from the real ones.
    const stale = [c.members[0]!.spec, c.members[1]!.spec, s, ghost];
    const n3 = new Member(s, [...newClusterArgs(s, stale, "another-token"), "--log-level=info"]);
    c.members[2] = n3;
    n3.start();
    await n3.waitReady();

    expect(await memberIds(n3.endpoint)).toEqual(ids);
    const w = await etcdctl(n3.endpoint, ["put", "after", "2"]);
    expect(w.code, w.stderr).toBe(0);
    const r = await etcdctl(c.members[0]!.endpoint, ["get", "after", "--print-value-only"]);
    expect(r.stdout.trim()).toBe("2");
    // Its streams to both real peers come up, and it names no peer but the two real ones.
    await eventually(async () => ((await peerLabels(n3)).filter((id) => ids.includes(id)).length === 2 ? true : undefined), 30_000, "n3's network metrics naming both real peers");
    const labels = await peerLabels(n3);
    expect(labels.filter((id) => !ids.includes(id)), `n3's network metrics name peers outside the membership ${ids.join(",")}`).toEqual([]);
    if (!TARGET_ETCD) {
      const added = [...n3.log.matchAll(/"remote-peer-id":"([0-9a-f]+)"[^\n]*"msg":"added remote peer"|"msg":"added remote peer"[^\n]*"remote-peer-id":"([0-9a-f]+)"/g)].map((m) => BigInt(`0x${m[1] ?? m[2]}`).toString(16));
      expect(added.length, n3.log.slice(-3000)).toBeGreaterThan(0);
      expect(added.filter((id) => !ids.includes(id)), "peers n3 added that are not members").toEqual([]);
    }
  }, 90_000);
});
