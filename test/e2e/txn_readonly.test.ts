/**
 * Which txns etcd serves without a proposal (etcdserver's isTxnReadonly: every op of both branches
 * is a Range) and which go through Raft: a read-only txn leaves the raft index where it was, a txn
 * holding anything else (a nested txn, even one that only reads) is proposed and applied like a
 * write. An empty op is refused before either (v3rpc's checkRequestOp). E2E_TARGET=etcd checks
 * every expectation against real etcd.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { clients, expectStatus, unary } from "./grpc_client.js";
import { Cluster, eventually } from "./harness.js";

const INVALID_ARGUMENT = 3;

let cluster: Cluster;
let c: ReturnType<typeof clients>;

const b = (s: string) => Buffer.from(s);

beforeAll(async () => {
  cluster = await Cluster.create({ size: 1 });
  await cluster.start();
  c = clients(cluster.members[0]!.endpoint);
  await unary(c.kv, "Put", { key: b("ro"), value: b("1") });
});
afterAll(async () => {
  c?.close();
  await cluster?.destroy();
});

async function raftIndex(): Promise<bigint> {
  const s = await unary<{ raftIndex: string }>(c.maintenance, "Status", {});
  return BigInt(s.raftIndex);
}

/** The raft index a txn leaves behind: polled until it stops moving (a quiet member proposes nothing else). */
async function raftEntriesOf(txn: object): Promise<bigint> {
  const before = await eventually(async () => {
    const a = await raftIndex();
    return (await raftIndex()) === a ? a : undefined;
  });
  await unary(c.kv, "Txn", txn);
  return (await raftIndex()) - before;
}

const range = { request_range: { key: b("ro") } };

describe("read-only txns (etcd's isTxnReadonly)", () => {
  it("a txn of ranges only is served without a proposal", async () => {
    expect(await raftEntriesOf({ success: [range], failure: [range] })).toBe(0n);
    expect(await raftEntriesOf({ success: [{ request_range: { key: b("ro"), serializable: true } }] })).toBe(0n);
  });

  it("a txn holding a nested txn goes through raft, even when the nested one only reads", async () => {
    expect(await raftEntriesOf({ success: [{ request_txn: { success: [range] } }] })).toBe(1n);
  });

  it("a txn with an empty op is refused: etcdserver: key not found", async () => {
    await expectStatus(unary(c.kv, "Txn", { success: [range, {}] }), INVALID_ARGUMENT, "etcdserver: key not found");
  });
});
