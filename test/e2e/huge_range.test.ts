/**
 * A range over hundreds of thousands of keys answers whole, and the member lives through it. A
 * member once built the whole answer as objects (~400 bytes of JavaScript heap per kv) before
 * encoding it: a Range of 9,000,000 keys ran it out of its 4 GB heap and it aborted, taking every
 * client with it. Now a range that needs more than one slice is encoded as it is read
 * (src/server/range_encoding.ts). The member here runs with a 96 MB heap (NODE_OPTIONS, which etcd
 * ignores), where the old way aborted at 300,000 keys; E2E_TARGET=etcd runs the same answers
 * against etcd. Also the JSON gateway's answer of a range encoded as it was read (20,000 kvs: the
 * gateway builds its JSON as objects, as etcd's grpc-gateway does, so it is not for huge answers).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { clients, unary } from "./grpc_client.js";
import { Cluster } from "./harness.js";

const KEYS = 300_000;
const TXN_OPS = 128;
const key = (i: number): Buffer => Buffer.from(`hr/${String(i).padStart(7, "0")}`);
const value = (i: number): Buffer => Buffer.from(`value-${i}`);

interface Kv {
  key: Buffer;
  value: Buffer;
  create_revision: string;
  mod_revision: string;
  version: string;
}
interface RangeResponse {
  header: { revision: string };
  kvs: Kv[];
  more: boolean;
  count: string;
}

let cluster: Cluster;
let c: ReturnType<typeof clients>;

beforeAll(async () => {
  cluster = await Cluster.create({ size: 1 });
  cluster.members[0]!.start({ NODE_OPTIONS: "--max-old-space-size=96" });
  await cluster.members[0]!.waitReady();
  c = clients(cluster.members[0]!.endpoint);
  let next = 0;
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      for (let t = next++; t * TXN_OPS < KEYS; t = next++) {
        const success = [];
        for (let i = t * TXN_OPS; i < Math.min(KEYS, (t + 1) * TXN_OPS); i++) success.push({ request_put: { key: key(i), value: value(i) } });
        await unary(c.kv, "Txn", { compare: [], success, failure: [] }, { deadlineMs: 60_000 });
      }
    }),
  );
}, 300_000);

afterAll(async () => {
  c?.close();
  await cluster?.destroy();
});

const range = (extra: Record<string, unknown>) =>
  unary<RangeResponse>(c.kv, "Range", { key: Buffer.from("hr/"), range_end: Buffer.from("hr0"), ...extra }, { deadlineMs: 120_000 });

describe("a range over 300,000 keys", () => {
  it("answers every kv in key order, with the count, and the member keeps serving", async () => {
    const all = await range({});
    expect([all.kvs.length, Number(all.count), all.more]).toEqual([KEYS, KEYS, false]);
    const wrong = all.kvs.findIndex((kv, i) => !kv.key.equals(key(i)) || !kv.value.equals(value(i)) || kv.version !== "1" || kv.create_revision !== kv.mod_revision);
    expect(wrong, "the first kv that is not the one written").toBe(-1);
    // Each txn is one revision: the kvs of one txn share it, in key order.
    const revs = all.kvs.map((kv) => Number(kv.mod_revision));
    expect(new Set(revs).size).toBe(Math.ceil(KEYS / TXN_OPS));
    expect(revs.reduce((a, r) => Math.max(a, r), 0)).toBeLessThanOrEqual(Number(all.header.revision));

    const put = await unary<{ header: { revision: string } }>(c.kv, "Put", { key: Buffer.from("after"), value: Buffer.from("x") });
    expect(Number(put.header.revision)).toBe(Number(all.header.revision) + 1);
    expect(cluster.members[0]!.running, "the member process is alive").toBe(true);
  });

  it("cuts at the limit with more set, leaves values out for keys_only, and counts without kvs", async () => {
    const limited = await range({ limit: 250_000 });
    expect([limited.kvs.length, Number(limited.count), limited.more]).toEqual([250_000, KEYS, true]);
    expect(limited.kvs[249_999]!.key.equals(key(249_999))).toBe(true);
    const keysOnly = await range({ keys_only: true });
    expect(keysOnly.kvs.length).toBe(KEYS);
    expect(keysOnly.kvs.every((kv, i) => kv.value.length === 0 && kv.key.equals(key(i)))).toBe(true);
    const counted = await range({ count_only: true });
    expect([counted.kvs.length, Number(counted.count)]).toEqual([0, KEYS]);
    // Sorted by key ascending is the read's own order.
    const ascending = await range({ sort_order: "ASCEND", limit: 5 });
    expect(ascending.kvs.map((kv) => kv.key.toString())).toEqual([0, 1, 2, 3, 4].map((i) => key(i).toString()));
  });

  it("answers the same through the JSON gateway", async () => {
    const res = await fetch(`${cluster.members[0]!.clientUrl}/v3/kv/range`, {
      method: "POST",
      body: JSON.stringify({ key: Buffer.from("hr/").toString("base64"), range_end: Buffer.from("hr0").toString("base64"), limit: 20_000 }),
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { kvs: { key: string; value: string }[]; more: boolean; count: string };
    expect([body.kvs.length, body.more, body.count]).toEqual([20_000, true, String(KEYS)]);
    expect(Buffer.from(body.kvs[19_999]!.key, "base64").equals(key(19_999))).toBe(true);
    expect(Buffer.from(body.kvs[19_999]!.value, "base64").equals(value(19_999))).toBe(true);
    expect(cluster.members[0]!.running, "the member process is alive").toBe(true);
  });
});
