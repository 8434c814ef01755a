/**
 * Lease ids over the whole int64 range (issue 16): a client-chosen id above 2^53 (where a double
 * cannot hold every integer) and the largest int64 go through grant, put, get, timetolive,
 * keep-alive, list and revoke unchanged, with etcdctl, the etcd3 client, a plain gRPC client and the
 * JSON gateway; server-chosen ids are etcd's (member id's low 16 bits << 48 | clock | counter).
 * E2E_TARGET=etcd runs the same expectations against real etcd.
 *
 * etcdctl `lease grant` has no --id: the explicit grants go through the gRPC client.
 */
import { Etcd3 } from "etcd3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { post } from "./gateway_client.js";
import { clients, unary } from "./grpc_client.js";
import { Cluster, etcdctl } from "./harness.js";

/** 2^53 + 1: the first integer a double rounds (to 2^53). */
const ABOVE_2_53 = 9007199254740993n;
const INT64_MAX = 2n ** 63n - 1n;

let cluster: Cluster;
let grpc: ReturnType<typeof clients>;
let client: Etcd3;

/** etcdctl prints lease ids as %016x. */
const hex = (id: bigint): string => id.toString(16).padStart(16, "0");

async function ok(...args: string[]): Promise<string> {
  const r = await etcdctl(cluster.endpoints, args);
  if (r.code !== 0) throw new Error(`etcdctl ${args.join(" ")} failed (${r.code}): ${r.stderr}\n${cluster.logs()}`);
  return r.stdout;
}

beforeAll(async () => {
  cluster = await Cluster.create({ size: 1 });
  await cluster.start();
  grpc = clients(cluster.members[0]!.endpoint);
  client = new Etcd3({ hosts: cluster.members[0]!.clientUrl });
});
afterAll(async () => {
  client?.close();
  grpc?.close();
  await cluster?.destroy();
});

describe("client-chosen lease ids beyond 2^53", () => {
  for (const id of [ABOVE_2_53, INT64_MAX]) {
    it(`${id}: grant, put, get, timetolive, keep-alive, list and revoke keep the exact id`, async () => {
      const granted = await unary<{ ID: string; TTL: string; error: string }>(grpc.lease, "LeaseGrant", { ID: String(id), TTL: 60 });
      expect(granted.ID).toBe(String(id));
      expect(granted.TTL).toBe("60");

      const key = `lid/${id}`;
      expect(await ok("put", key, "v", `--lease=${hex(id)}`)).toBe("OK\n");
      // etcdctl's JSON prints the lease as a Go int64 number: read its digits, not a rounded double.
      const json = await ok("get", key, "-w", "json");
      expect(/"lease":(-?\d+)/.exec(json)?.[1]).toBe(String(id));
      const viaGrpc = await unary<{ kvs: { lease: string }[] }>(grpc.kv, "Range", { key: Buffer.from(key) });
      expect(viaGrpc.kvs.map((kv) => kv.lease)).toEqual([String(id)]);
      // The etcd3 client (int64s as strings): get shows the lease, and a put with it attaches a second key.
      const kvs = (await client.get(key).exec()).kvs;
      expect(kvs.map((kv) => kv.lease)).toEqual([String(id)]);
      await client.put(`${key}/etcd3`).value("w").lease(String(id)).exec();

      const ttl = await ok("lease", "timetolive", hex(id), "--keys");
      const m = new RegExp(`^lease ${hex(id)} granted with TTL\\(60s\\), remaining\\((59|60)s\\), attached keys\\(\\[(.*)\\]\\)\\n$`).exec(ttl);
      expect(m, ttl).not.toBeNull();
      // etcd lists the keys in its map's order: compared as a set.
      expect(m![2]!.split(" ").sort()).toEqual([key, `${key}/etcd3`]);
      const ttlGrpc = await unary<{ ID: string; grantedTTL: string }>(grpc.lease, "LeaseTimeToLive", { ID: String(id) });
      expect(ttlGrpc.ID).toBe(String(id));
      expect(ttlGrpc.grantedTTL).toBe("60");
      expect(await ok("lease", "keep-alive", "--once", hex(id))).toBe(`lease ${hex(id)} keepalived with TTL(60)\n`);
      const list = await ok("lease", "list");
      expect(list.split("\n")).toContain(hex(id));

      // A neighbour the id would round to (2^53 for 2^53+1) is another lease: unknown.
      const neighbour = await unary<{ TTL: string }>(grpc.lease, "LeaseTimeToLive", { ID: String(id - 1n) });
      expect(neighbour.TTL).toBe("-1");

      expect(await ok("lease", "revoke", hex(id))).toBe(`lease ${hex(id)} revoked\n`);
      expect(await ok("get", key, "--prefix", "--keys-only")).toBe("");
      expect(await ok("lease", "timetolive", hex(id))).toBe(`lease ${hex(id)} already expired\n`);
    });
  }

  it("a negative id is an int64 like any other: granted, attached and revoked as etcd 3.4 does", async () => {
    for (const id of [-5n, -(2n ** 63n)]) {
      const granted = await unary<{ ID: string }>(grpc.lease, "LeaseGrant", { ID: String(id), TTL: 60 });
      expect(granted.ID).toBe(String(id));
      await unary(grpc.kv, "Put", { key: Buffer.from(`lid/neg${id}`), value: Buffer.from("n"), lease: String(id) });
      const got = await unary<{ kvs: { lease: string }[] }>(grpc.kv, "Range", { key: Buffer.from(`lid/neg${id}`) });
      expect(got.kvs.map((kv) => kv.lease)).toEqual([String(id)]);
      const leases = await unary<{ leases: { ID: string }[] }>(grpc.lease, "LeaseLeases", {});
      expect(leases.leases.map((l) => l.ID)).toContain(String(id));
      await unary(grpc.lease, "LeaseRevoke", { ID: String(id) });
      const after = await unary<{ kvs: unknown[] }>(grpc.kv, "Range", { key: Buffer.from(`lid/neg${id}`) });
      expect(after.kvs).toEqual([]);
    }
  });

  it("the JSON gateway carries the ids as exact decimal strings", async () => {
    const id = ABOVE_2_53 + 2n;
    const g = await post(cluster.members[0]!.endpoint, "/v3/lease/grant", { ID: String(id), TTL: "60" });
    expect(g.status, JSON.stringify(g.json)).toBe(200);
    expect(g.json.ID).toBe(String(id));
    const p = await post(cluster.members[0]!.endpoint, "/v3/kv/put", { key: Buffer.from("lid/gw").toString("base64"), value: "dg==", lease: String(id) });
    expect(p.status, JSON.stringify(p.json)).toBe(200);
    const r = await post(cluster.members[0]!.endpoint, "/v3/kv/range", { key: Buffer.from("lid/gw").toString("base64") });
    expect((r.json.kvs as { lease: string }[]).map((kv) => kv.lease)).toEqual([String(id)]);
    const t = await post(cluster.members[0]!.endpoint, "/v3/lease/timetolive", { ID: String(id) });
    expect(t.json.ID).toBe(String(id));
    expect(t.json.grantedTTL).toBe("60");
    const v = await post(cluster.members[0]!.endpoint, "/v3/lease/revoke", { ID: String(id) });
    expect(v.status, JSON.stringify(v.json)).toBe(200);
  });
});

describe("server-chosen lease ids", () => {
  it("are etcd's: the member id's low 16 bits (top bit masked) in bits 48..62, positive, exact through put and get", async () => {
    const lease = client.lease(60, { autoKeepAlive: false });
    const id = BigInt(await lease.grant());
    const status = await unary<{ header: { member_id: string } }>(grpc.maintenance, "Status", {});
    const memberId = BigInt(status.header.member_id);
    expect(id > 0n && id <= INT64_MAX).toBe(true);
    expect(id >> 48n).toBe(memberId & 0x7fffn);
    await lease.put("lid/server").value("x").exec();
    expect((await client.get("lid/server").exec()).kvs.map((kv) => kv.lease)).toEqual([String(id)]);
    expect((await ok("lease", "list")).split("\n")).toContain(hex(id));
    // The next grant is the next id (etcd's idutil counter), unless another grant came between.
    const next = BigInt((await unary<{ ID: string }>(grpc.lease, "LeaseGrant", { ID: "0", TTL: 60 })).ID);
    expect(next > id && next - id < 16n).toBe(true);
    await lease.revoke();
    expect((await client.get("lid/server").exec()).kvs).toEqual([]);
  });
});
