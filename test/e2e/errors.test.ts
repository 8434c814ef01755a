/**
 * Bad input gets etcd's answer: the same gRPC status code and message string, and the server keeps
 * serving. E2E_TARGET=etcd checks every expectation against real etcd.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { clients, expectStatus, unary } from "./grpc_client.js";
import { Cluster } from "./harness.js";

const INVALID_ARGUMENT = 3;
const NOT_FOUND = 5;
const RESOURCE_EXHAUSTED = 8;
const FAILED_PRECONDITION = 9;
const OUT_OF_RANGE = 11;

let cluster: Cluster;
let c: ReturnType<typeof clients>;

const b = (s: string) => Buffer.from(s);

beforeAll(async () => {
  cluster = await Cluster.create({
    size: 1,
    // Small limits so the tests exercise them cheaply: 64 KiB requests, 4 txn ops, 2 MB quota.
    extraArgs: ["--max-request-bytes=65536", "--max-txn-ops=4", "--quota-backend-bytes=2000000"],
  });
  await cluster.start();
  c = clients(cluster.members[0]!.endpoint);
});
afterAll(async () => {
  c?.close();
  await cluster?.destroy();
});

describe("etcd's errors", () => {
  it("key is not provided", async () => {
    await expectStatus(unary(c.kv, "Put", { key: b(""), value: b("v") }), INVALID_ARGUMENT, "etcdserver: key is not provided");
    await expectStatus(unary(c.kv, "Range", { key: b("") }), INVALID_ARGUMENT, "etcdserver: key is not provided");
    await expectStatus(unary(c.kv, "DeleteRange", { key: b("") }), INVALID_ARGUMENT, "etcdserver: key is not provided");
  });

  it("value / lease provided with ignore_value / ignore_lease", async () => {
    await unary(c.kv, "Put", { key: b("iv"), value: b("x") });
    await expectStatus(unary(c.kv, "Put", { key: b("iv"), value: b("y"), ignore_value: true }), INVALID_ARGUMENT, "etcdserver: value is provided");
    await expectStatus(unary(c.kv, "Put", { key: b("iv"), lease: "123", ignore_lease: true }), INVALID_ARGUMENT, "etcdserver: lease is provided");
  });

  it("request is too large", async () => {
    await expectStatus(
      unary(c.kv, "Put", { key: b("big"), value: Buffer.alloc(70_000, 1) }),
      INVALID_ARGUMENT,
      "etcdserver: request is too large",
    );
  });

  it("too many operations in txn request", async () => {
    const puts = Array.from({ length: 5 }, (_, i) => ({ request_put: { key: b(`t${i}`), value: b("v") } }));
    await expectStatus(unary(c.kv, "Txn", { success: puts }), INVALID_ARGUMENT, "etcdserver: too many operations in txn request");
  });

  it("duplicate key given in txn request", async () => {
    const puts = [{ request_put: { key: b("dup"), value: b("1") } }, { request_put: { key: b("dup"), value: b("2") } }];
    await expectStatus(unary(c.kv, "Txn", { success: puts }), INVALID_ARGUMENT, "etcdserver: duplicate key given in txn request");
  });

  it("requested lease not found; lease already exists; too large lease TTL", async () => {
    await expectStatus(unary(c.kv, "Put", { key: b("l"), value: b("v"), lease: "4242" }), NOT_FOUND, "etcdserver: requested lease not found");
    await expectStatus(unary(c.lease, "LeaseRevoke", { ID: "4242" }), NOT_FOUND, "etcdserver: requested lease not found");
    const g = await unary<{ ID: string }>(c.lease, "LeaseGrant", { TTL: "60", ID: "777" });
    expect(g.ID).toBe("777");
    await expectStatus(unary(c.lease, "LeaseGrant", { TTL: "60", ID: "777" }), FAILED_PRECONDITION, "etcdserver: lease already exists");
    await expectStatus(unary(c.lease, "LeaseGrant", { TTL: "9000000001" }), OUT_OF_RANGE, "etcdserver: too large lease TTL");
    // An unknown lease's time-to-live is TTL -1, not an error.
    const ttl = await unary<{ TTL: string }>(c.lease, "LeaseTimeToLive", { ID: "4243" });
    expect(ttl.TTL).toBe("-1");
  });

  it("compacted and future revisions", async () => {
    const p1 = await unary<{ header: { revision: string } }>(c.kv, "Put", { key: b("rev"), value: b("1") });
    const p2 = await unary<{ header: { revision: string } }>(c.kv, "Put", { key: b("rev"), value: b("2") });
    await unary(c.kv, "Compact", { revision: p2.header.revision, physical: true });
    await expectStatus(unary(c.kv, "Range", { key: b("rev"), revision: p1.header.revision }), OUT_OF_RANGE, "etcdserver: mvcc: required revision has been compacted");
    await expectStatus(unary(c.kv, "Compact", { revision: p1.header.revision }), OUT_OF_RANGE, "etcdserver: mvcc: required revision has been compacted");
    await expectStatus(unary(c.kv, "Range", { key: b("rev"), revision: "1000000" }), OUT_OF_RANGE, "etcdserver: mvcc: required revision is a future revision");
    await expectStatus(unary(c.kv, "Compact", { revision: "1000000" }), OUT_OF_RANGE, "etcdserver: mvcc: required revision is a future revision");
  });

  it("a revision at int64's edge is a future revision, in a read and in a write Txn (after a compaction)", async () => {
    // A write Txn is re-encoded into its raft entry: 2^63-1 (a double rounds it to 2^63) once
    // wrapped to -2^63 there and was answered "compacted" (issue 13; was a whitelisted deviation).
    const max = "9223372036854775807";
    const rangeAtMax = { request_range: { key: b("rev"), revision: max } };
    await expectStatus(unary(c.kv, "Range", { key: b("rev"), revision: max }), OUT_OF_RANGE, "etcdserver: mvcc: required revision is a future revision");
    await expectStatus(unary(c.kv, "Txn", { success: [rangeAtMax] }), OUT_OF_RANGE, "etcdserver: mvcc: required revision is a future revision");
    await expectStatus(
      unary(c.kv, "Txn", { success: [{ request_put: { key: b("rev-w"), value: b("x") } }, rangeAtMax] }),
      OUT_OF_RANGE,
      "etcdserver: mvcc: required revision is a future revision",
    );
    const after = await unary<{ kvs: unknown[] }>(c.kv, "Range", { key: b("rev-w") });
    expect(after.kvs, "the failed Txn wrote nothing").toHaveLength(0);
  });

  it("the server keeps serving after the errors above", async () => {
    const r = await unary<{ kvs: unknown[] }>(c.kv, "Range", { key: b("rev") });
    expect(r.kvs).toHaveLength(1);
  });

  it("NOSPACE: past the quota the alarm is raised, writes fail, reads and deletes still work", async () => {
    const value = Buffer.alloc(60_000, 7);
    let failed: Error | undefined;
    // etcd checks the quota against its backend's size as of the last batch commit (every 100 ms),
    // so how many puts pass first varies with the machine's load: 100 (6 MB) was once not enough
    // for etcd under a loaded CI run. The loop stops at the first refusal.
    for (let i = 0; i < 400 && failed === undefined; i++) {
      try {
        await unary(c.kv, "Put", { key: b(`fill/${i}`), value });
      } catch (e) {
        failed = e as Error;
      }
    }
    expect(failed).toBeDefined();
    expect((failed as unknown as { code: number }).code).toBe(RESOURCE_EXHAUSTED);
    expect((failed as unknown as { details: string }).details).toBe("etcdserver: mvcc: database space exceeded");
    const alarms = await unary<{ alarms: Array<{ alarm: string }> }>(c.maintenance, "Alarm", { action: "GET" });
    expect(alarms.alarms.map((a) => a.alarm)).toContain("NOSPACE");
    await expectStatus(unary(c.kv, "Put", { key: b("small"), value: b("x") }), RESOURCE_EXHAUSTED, "etcdserver: mvcc: database space exceeded");
    const r = await unary<{ count: string }>(c.kv, "Range", { key: b("fill/"), range_end: b("fill0"), count_only: true });
    expect(Number(r.count)).toBeGreaterThan(0);
    const d = await unary<{ deleted: string }>(c.kv, "DeleteRange", { key: b("fill/"), range_end: b("fill0") });
    expect(Number(d.deleted)).toBeGreaterThan(0);
  });
});
