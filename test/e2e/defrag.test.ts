/**
 * Defrag and the sizes Status reports: after deleting and compacting, dbSizeInUse (the file less
 * its free pages) is below dbSize; `etcdctl defrag` on one member shrinks that member's file to
 * about what is in use and leaves the others' files as they were (it is not replicated), while
 * the cluster keeps taking writes on the others. Both targets.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Cluster, etcdctl } from "./harness.js";
import { agreedLeader, ctlOk } from "./ops_helpers.js";

let cluster: Cluster;

beforeAll(async () => {
  cluster = await Cluster.create({ size: 3, extraArgs: ["--heartbeat-interval=50", "--election-timeout=500"] });
  await cluster.start();
});
afterAll(async () => {
  await cluster?.destroy();
});

interface Sizes {
  dbSize: number;
  dbSizeInUse: number;
}

async function sizes(endpoint: string): Promise<Sizes> {
  const out = JSON.parse(await ctlOk(cluster, endpoint, "endpoint", "status", "-w", "json")) as Array<{ Status: { dbSize: number; dbSizeInUse: number } }>;
  return { dbSize: out[0]!.Status.dbSize, dbSizeInUse: out[0]!.Status.dbSizeInUse };
}

/**
 * The member's sizes once its compaction has freed the deleted pages. `compaction --physical`
 * waits only for the member that served it; another member compacts in the background, and etcd's
 * backend counts the pages it freed only at its next batch commit (every 100 ms), so right after
 * the call a follower can still report nearly its whole file in use. Polls for up to 15 s; the
 * caller's assertions decide.
 */
async function settledSizes(endpoint: string): Promise<Sizes> {
  const deadline = Date.now() + 15_000;
  for (;;) {
    const s = await sizes(endpoint);
    if (s.dbSizeInUse < s.dbSize / 2 || Date.now() > deadline) return s;
    await new Promise((r) => setTimeout(r, 200));
  }
}

describe("defrag", () => {
  it("shrinks only the member asked, to about its size in use; the others keep serving writes", async () => {
    const big = "x".repeat(4096);
    // etcdctl txn's input: no compares (an empty line), the success puts, no failure ops.
    const txn = (from: number): string => `\n${Array.from({ length: 100 }, (_, i) => `put big/${from + i} ${big}`).join("\n")}\n\n\n`;
    for (let i = 0; i < 1000; i += 100) {
      const r = await etcdctl(cluster.endpoints, ["txn"], txn(i));
      if (r.code !== 0 || !r.stdout.startsWith("SUCCESS")) throw new Error(`txn: ${r.stdout} ${r.stderr}`);
    }
    await ctlOk(cluster, cluster.endpoints, "del", "big/", "--prefix");
    const rev = Number(/"revision":(\d+)/.exec(await ctlOk(cluster, cluster.endpoints, "get", "x", "-w", "json"))![1]);
    await ctlOk(cluster, cluster.endpoints, "compaction", String(rev), "--physical");

    const { member: leader } = await agreedLeader(cluster);
    const target = cluster.members.find((m) => m !== leader)!;
    const others = cluster.members.filter((m) => m !== target);
    const before = await settledSizes(target.endpoint);
    expect(before.dbSize).toBeGreaterThan(2_000_000);
    expect(before.dbSizeInUse).toBeLessThan(before.dbSize / 2);
    const othersBefore = await Promise.all(others.map((m) => sizes(m.endpoint)));

    // Writes on the other members while the target defragments.
    let writes = 0;
    let writing = true;
    const writer = (async () => {
      while (writing) {
        const r = await etcdctl(others.map((m) => m.endpoint).join(","), ["put", `during/${writes}`, "v"]);
        if (r.code !== 0) throw new Error(r.stderr);
        writes++;
      }
    })();
    const out = await ctlOk(cluster, target.endpoint, "defrag");
    expect(out).toBe(`Finished defragmenting etcd member[${target.endpoint}]\n`);
    writing = false;
    await writer;
    expect(writes).toBeGreaterThan(0);

    const after = await sizes(target.endpoint);
    expect(after.dbSize).toBeLessThan(before.dbSize / 2);
    expect(after.dbSizeInUse).toBeLessThanOrEqual(after.dbSize);
    for (const [i, m] of others.entries()) {
      const s = await sizes(m.endpoint);
      expect(s.dbSize, m.spec.name).toBeGreaterThanOrEqual(othersBefore[i]!.dbSize);
    }
    expect(await ctlOk(cluster, target.endpoint, "get", "during/0", "--print-value-only")).toBe("v\n");
  });
});
