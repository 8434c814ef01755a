/**
 * A member that was down while the others snapshotted and compacted their raft log catches up by
 * receiving the leader's database snapshot, and ends with the same contents (same HashKV). Both
 * targets run with the same flags and keep etcd 3.4's 5,000 entries behind a snapshot (3.4 has no
 * flag to lower it), so the test writes more than that while the member is down; the member's
 * etcd_network_snapshot_receive_success counter proves the snapshot path was taken.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { clients, unary } from "./grpc_client.js";
import { Cluster, etcdctl, eventually } from "./harness.js";

let cluster: Cluster;
const KEYS = 20;
const WRITES = 5_400;
const LAST_OF_KEY_9 = WRITES - KEYS + 9;

async function ok(endpoints: string, ...args: string[]): Promise<string> {
  const r = await etcdctl(endpoints, args);
  if (r.code !== 0) throw new Error(`etcdctl ${args.join(" ")} failed (${r.code}): ${r.stderr}\n${cluster.logs()}`);
  return r.stdout;
}

beforeAll(async () => {
  cluster = await Cluster.create({ size: 3, extraArgs: ["--heartbeat-interval=50", "--election-timeout=500", "--snapshot-count=40"] });
  await cluster.start();
});
afterAll(async () => {
  await cluster?.destroy();
});

describe("snapshot catch-up", () => {
  it("a member restarted after many writes receives the snapshot and matches the others", { timeout: 180_000 }, async () => {
    const [a, b, c] = cluster.members as [(typeof cluster.members)[0], (typeof cluster.members)[0], (typeof cluster.members)[0]];
    await ok(cluster.endpoints, "put", "before", "1");
    await c.kill("SIGKILL");
    const live = `${a.endpoint},${b.endpoint}`;
    const g = clients(a.endpoint);
    try {
      // More entries than the 5,000 kept behind a snapshot, plus several snapshots: the raft log
      // no longer holds what the member lacks. One writer per key keeps each key's order.
      // A write may time out while the survivors elect a new leader (the killed member may have led).
      await Promise.all(
        Array.from({ length: KEYS }, async (_, k) => {
          for (let i = k; i < WRITES; i += KEYS) {
            const req = { key: Buffer.from(`snap/${k}`), value: Buffer.from(`${i}`) };
            await eventually(async () => (await unary(g.kv, "Put", req)) && true, 30_000, `put ${i}`);
          }
        }),
      );
    } finally {
      g.close();
    }
    // Deletes go through the snapshot too.
    await ok(live, "del", "snap/0");
    c.start();
    await c.waitReady(60_000);
    await eventually(
      async () => ((await ok(c.endpoint, "get", "snap/9", "--print-value-only", "--consistency=s")) === `${LAST_OF_KEY_9}\n` ? true : undefined),
      60_000,
      "restarted member catches up",
    );
    expect(await ok(c.endpoint, "get", "snap/0", "--consistency=s")).toBe("");
    expect(await ok(c.endpoint, "get", "before", "--print-value-only", "--consistency=s")).toBe("1\n");
    // Same contents everywhere: HashKV at the same revision agrees.
    const rev = JSON.parse(await ok(a.endpoint, "get", "before", "-w", "json")).header.revision as number;
    const hashes = await Promise.all(
      cluster.members.map(async (m) => {
        await eventually(
          async () => ((JSON.parse(await ok(m.endpoint, "get", "before", "-w", "json", "--consistency=s")).header.revision as number) >= rev ? true : undefined),
          30_000,
          "member at revision",
        );
        const out = await ok(m.endpoint, "endpoint", "hashkv", `--rev=${rev}`);
        return out.trim().split(", ")[1];
      }),
    );
    expect(new Set(hashes).size).toBe(1);
    const metrics = await (await fetch(`${c.clientUrl}/metrics`)).text();
    const received = [...metrics.matchAll(/^etcd_network_snapshot_receive_success\{From="[0-9a-f]+"\} (\d+)/gm)].reduce((n, m) => n + Number(m[1]), 0);
    expect(received, "snapshots the restarted member received").toBeGreaterThanOrEqual(1);
  });
});
