/**
 * /health as etcd 3.4 answers it, on the client port and on --listen-metrics-urls (kubeadm's
 * liveness probe): 200 {"health":"true"} while healthy; 503 {"health":"false"} without a leader
 * (two of three members killed) and while a NOSPACE alarm is active (a small
 * --quota-backend-bytes filled); 405 for anything but GET. Run against etcd with E2E_TARGET=etcd.
 */
import { afterEach, describe, expect, it } from "vitest";
import { Cluster, etcdctl, eventually, type Member } from "./harness.js";

interface Answer {
  status: number;
  body: string;
  contentType: string | null;
  allow: string | null;
}

async function get(url: string, method = "GET"): Promise<Answer> {
  const res = await fetch(`${url}/health`, { method });
  return { status: res.status, body: await res.text(), contentType: res.headers.get("content-type"), allow: res.headers.get("allow") };
}

/** /health of `m` on both of its ports. */
async function both(m: Member): Promise<Answer[]> {
  return Promise.all([get(m.clientUrl), get(m.metricsUrl!)]);
}

const HEALTHY: Answer = { status: 200, body: '{"health":"true"}', contentType: "text/plain; charset=utf-8", allow: null };
const UNHEALTHY: Answer = { status: 503, body: '{"health":"false"}\n', contentType: "text/plain; charset=utf-8", allow: null };

let cluster: Cluster | undefined;

afterEach(async () => {
  await cluster?.destroy();
  cluster = undefined;
});

describe("/health", () => {
  it("is true with a leader, false once the member has none, on both ports; GET only", async () => {
    cluster = await Cluster.create({ size: 3, metrics: true, extraArgs: ["--heartbeat-interval=50", "--election-timeout=500"] });
    await cluster.start();
    const [n1, n2, n3] = cluster.members as [Member, Member, Member];
    await eventually(async () => ((await both(n1)).every((a) => a.status === 200) ? true : undefined), 10_000, "n1 healthy");
    expect(await both(n1)).toEqual([HEALTHY, HEALTHY]);
    const post = await get(n1.clientUrl, "POST");
    expect(post).toEqual({ status: 405, body: "Method Not Allowed\n", contentType: "text/plain; charset=utf-8", allow: "GET" });
    await Promise.all([n2.kill(), n3.kill()]);
    // The survivor loses its leader within an election timeout or two (check quorum), and has none after.
    const answers = await eventually(
      async () => {
        const a = await both(n1);
        return a.every((x) => x.status === 503) ? a : undefined;
      },
      15_000,
      "n1 unhealthy on both ports",
    );
    expect(answers).toEqual([UNHEALTHY, UNHEALTHY]);
  }, 60_000);

  it("is false while a NOSPACE alarm is active, true again once it is disarmed below the quota", async () => {
    cluster = await Cluster.create({ size: 1, metrics: true, extraArgs: ["--quota-backend-bytes=262144"] });
    await cluster.start();
    const m = cluster.members[0]!;
    await eventually(async () => ((await get(m.clientUrl)).status === 200 ? true : undefined), 10_000, "healthy");
    const value = "x".repeat(48 * 1024);
    let exceeded = false;
    for (let i = 0; i < 40 && !exceeded; i++) {
      const r = await etcdctl(m.endpoint, ["put", `big${i % 4}`, value]);
      if (r.code !== 0) {
        expect(r.stderr).toContain("database space exceeded");
        exceeded = true;
      }
    }
    expect(exceeded).toBe(true);
    const alarms = await etcdctl(m.endpoint, ["alarm", "list"]);
    expect(alarms.stdout).toMatch(/alarm:NOSPACE/);
    expect(await both(m)).toEqual([UNHEALTHY, UNHEALTHY]);
    // Free the space (compact, defrag), then disarm: healthy again, as etcd is.
    const rev = /"revision":(\d+)/.exec((await etcdctl(m.endpoint, ["get", "big0", "-w", "json"])).stdout)![1]!;
    expect((await etcdctl(m.endpoint, ["del", "big", "--prefix"])).code).toBe(0);
    expect((await etcdctl(m.endpoint, ["compact", rev])).code).toBe(0);
    expect((await etcdctl(m.endpoint, ["defrag"])).code).toBe(0);
    expect((await etcdctl(m.endpoint, ["alarm", "disarm"])).code).toBe(0);
    expect(await both(m)).toEqual([HEALTHY, HEALTHY]);
  }, 90_000);
});
