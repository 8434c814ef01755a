/**
 * --enable-pprof and /debug/vars on the client port. etcd serves Go's profiles there; etcetera
 * serves what Node's profilers read at the same paths (a .cpuprofile, a .heapsnapshot) and says
 * so, with 501, for the Go-only ones. Without the flag the paths are 404 on both. /debug/vars is
 * expvar-shaped on both (cmdline, memstats, file_descriptor_limit, raft.status).
 * (deviation: pprof-node-profiles)
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Cluster, etcdctl, TARGET_ETCD } from "./harness.js";

let profiled: Cluster;
let plain: Cluster;

beforeAll(async () => {
  [profiled, plain] = await Promise.all([Cluster.create({ size: 1, extraArgs: ["--enable-pprof"] }), Cluster.create({ size: 1 })]);
  await Promise.all([profiled.start(), plain.start()]);
}, 60_000);

afterAll(async () => {
  await Promise.all([profiled?.destroy(), plain?.destroy()]);
});

describe("profiling and /debug/vars", () => {
  it("serves a CPU profile of the seconds asked for and a heap snapshot with --enable-pprof", async () => {
    const url = profiled.members[0]!.clientUrl;
    const index = await fetch(`${url}/debug/pprof/`);
    expect(index.status).toBe(200);
    const started = Date.now();
    const cpu = await fetch(`${url}/debug/pprof/profile?seconds=1`);
    expect(cpu.status).toBe(200);
    const cpuBody = Buffer.from(await cpu.arrayBuffer());
    expect(Date.now() - started).toBeGreaterThanOrEqual(900);
    const heap = await fetch(`${url}/debug/pprof/heap`);
    expect(heap.status).toBe(200);
    const heapBody = Buffer.from(await heap.arrayBuffer());
    const goroutine = await fetch(`${url}/debug/pprof/goroutine`);
    if (TARGET_ETCD) {
      // Go's pprof: gzipped protobuf profiles.
      expect(cpuBody.subarray(0, 2)).toEqual(Buffer.from([0x1f, 0x8b]));
      expect(heapBody.length).toBeGreaterThan(0);
      expect(goroutine.status).toBe(200);
    } else {
      const profile = JSON.parse(cpuBody.toString()) as { nodes: unknown[]; startTime: number; endTime: number };
      expect(profile.nodes.length).toBeGreaterThan(0);
      expect(profile.endTime - profile.startTime).toBeGreaterThanOrEqual(900_000); // microseconds
      expect(cpu.headers.get("content-disposition")).toContain(".cpuprofile");
      const snapshot = JSON.parse(heapBody.toString()) as { snapshot: { meta: { node_fields: string[] }; node_count: number } };
      expect(snapshot.snapshot.meta.node_fields).toContain("name");
      expect(snapshot.snapshot.node_count).toBeGreaterThan(1000);
      expect(goroutine.status).toBe(501);
      expect(await goroutine.text()).toContain("Go runtime profile");
      const bad = await fetch(`${url}/debug/pprof/profile?seconds=abc`);
      expect(bad.status).toBe(400);
    }
  }, 60_000);

  it("serves the allocations of the seconds asked for at /debug/pprof/allocs", async () => {
    const m = profiled.members[0]!;
    const pending = fetch(`${m.clientUrl}/debug/pprof/allocs?seconds=2`);
    // Work to sample while the profile runs: each put allocates and drops its request, entry and response.
    for (let i = 0; i < 20; i++) {
      const r = await etcdctl(m.endpoint, ["put", `alloc-${i}`, "x".repeat(1000)]);
      expect(r.code, r.stderr).toBe(0);
    }
    const res = await pending;
    expect(res.status).toBe(200);
    const body = Buffer.from(await res.arrayBuffer());
    if (TARGET_ETCD) {
      expect(body.subarray(0, 2)).toEqual(Buffer.from([0x1f, 0x8b]));
      return;
    }
    expect(res.headers.get("content-disposition")).toContain(".heapprofile");
    interface Node { callFrame: { url: string }; selfSize: number; children: Node[] }
    const profile = JSON.parse(body.toString()) as { head: Node; samples: unknown[] };
    const bytes = (n: Node, pred: (n: Node) => boolean): number => (pred(n) ? n.selfSize : 0) + n.children.reduce((a, c) => a + bytes(c, pred), 0);
    // The server's own code allocated while serving the puts, though nothing of it need be alive now.
    expect(profile.samples.length).toBeGreaterThan(0);
    expect(bytes(profile.head, (n) => n.callFrame.url.includes("/dist/"))).toBeGreaterThan(0);
    const bad = await fetch(`${m.clientUrl}/debug/pprof/allocs?seconds=0`);
    expect(bad.status).toBe(400);
  }, 60_000);

  it("answers 404 under /debug/pprof/ without the flag", async () => {
    const res = await fetch(`${plain.members[0]!.clientUrl}/debug/pprof/profile?seconds=1`);
    expect(res.status).toBe(404);
  });

  it("serves expvar's keys at /debug/vars, raft.status with the member's id and leader", async () => {
    const res = await fetch(`${plain.members[0]!.clientUrl}/debug/vars`);
    expect(res.status).toBe(200);
    const vars = (await res.json()) as Record<string, unknown>;
    expect(Object.keys(vars)).toEqual(expect.arrayContaining(["cmdline", "memstats", "file_descriptor_limit", "raft.status"]));
    const raft = vars["raft.status"] as { id: string; lead: string; raftState: string; term: number };
    expect(raft.id).toMatch(/^[0-9a-f]+$/);
    expect(raft.lead).toBe(raft.id); // a one-member cluster leads itself
    expect(raft.raftState).toBe("StateLeader");
    expect(raft.term).toBeGreaterThan(0);
    expect(vars.file_descriptor_limit).toBeGreaterThan(0);
  });
});
