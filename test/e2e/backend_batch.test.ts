/**
 * --backend-batch-interval and --backend-batch-limit (etcd's tuning of how often the backend
 * commits its batch transaction), seen as etcd shows them: each commit of the backend is one
 * observation of etcd_disk_backend_commit_duration_seconds. With an hour's interval, a limit of 1
 * commits every put and a limit no test reaches commits none; the default interval commits them
 * within a second. E2E_TARGET=etcd runs
 * the same expectations against real etcd 3.4.
 */
import { afterAll, describe, expect, it } from "vitest";
import { Cluster, etcdctl, sleep } from "./harness.js";
import { parseExposition } from "./prometheus.js";

const clusters: Cluster[] = [];
afterAll(async () => {
  for (const c of clusters) await c.destroy();
});

async function started(extraArgs: string[]): Promise<Cluster> {
  const c = await Cluster.create({ size: 1, extraArgs });
  clusters.push(c);
  await c.start();
  return c;
}

async function commits(c: Cluster): Promise<number> {
  const res = await fetch(`${c.members[0]!.clientUrl}/metrics`);
  expect(res.status).toBe(200);
  const family = parseExposition(await res.text()).get("etcd_disk_backend_commit_duration_seconds");
  const count = family?.samples.find((s) => s.name === "etcd_disk_backend_commit_duration_seconds_count");
  expect(count, "etcd_disk_backend_commit_duration_seconds_count").toBeDefined();
  return count!.value;
}

async function puts(c: Cluster, n: number): Promise<void> {
  const ep = c.members[0]!.endpoint;
  for (let i = 0; i < n; i++) expect((await etcdctl(ep, ["put", `bb/${i}`, String(i)])).stdout.trim()).toBe("OK");
}

describe("backend batch flags", () => {
  it("--backend-batch-limit=1 commits the backend after every put, whatever the interval", async () => {
    const c = await started(["--backend-batch-interval=1h", "--backend-batch-limit=1"]);
    await sleep(500);
    const before = await commits(c);
    await puts(c, 10);
    expect((await commits(c)) - before).toBeGreaterThanOrEqual(10);
  });

  it("--backend-batch-interval=1h with a large limit commits nothing for a few puts", async () => {
    const c = await started(["--backend-batch-interval=1h", "--backend-batch-limit=1000000"]);
    await sleep(500);
    const before = await commits(c);
    await puts(c, 10);
    await sleep(1500);
    expect(await commits(c)).toBe(before);
    // The default interval (100 ms) would have committed them by now.
    const d = await started([]);
    await sleep(500);
    const dBefore = await commits(d);
    await puts(d, 10);
    await sleep(1500);
    expect(await commits(d)).toBeGreaterThan(dBefore);
  });
});
