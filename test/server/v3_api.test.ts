/**
 * The member's v3 API owns the order of a request's steps: a linearizable read waits for its
 * ReadIndex round and only then reads; a serializable one reads at once; a read-only txn is read
 * like a range and never proposed; a write is proposed and its applied error thrown. Real kv store,
 * fake raft side (a ReadIndex the test releases, a proposer that records).
 */
import { describe, expect, it } from "vitest";
import type { ApplyOutcome } from "../../src/server/apply.js";
import type { ProposedRequest } from "../../src/server/raft_request.js";
import { v3ApiWith } from "./v3_api_fixture.js";

const b = (s: string) => Buffer.from(s);
function setup() {
  const reads: Array<() => void> = [];
  const proposed: ProposedRequest[] = [];
  let answer: ApplyOutcome = { revision: 1, response: {} };
  const { api, stores } = v3ApiWith({
    propose: async (req) => {
      proposed.push(req);
      return answer;
    },
    readIndex: { notify: () => new Promise<void>((resolve) => reads.push(resolve)) },
  });
  return { api, kv: stores.kv, reads, proposed, setAnswer: (o: ApplyOutcome) => (answer = o) };
}

const tick = () => new Promise((r) => setImmediate(r));

describe("v3 api", () => {
  it("a linearizable range reads only after its read index is confirmed, and sees what was applied meanwhile", async () => {
    const { api, kv, reads } = setup();
    kv.put({ key: b("a"), value: b("1") });
    let done = false;
    const r = api.range({ key: b("a") }).then((x) => ((done = true), x));
    await tick();
    expect(done).toBe(false);
    expect(reads.length).toBe(1);
    kv.put({ key: b("a"), value: b("2") }); // applied before the read index is confirmed
    reads[0]!();
    const got = await r;
    expect(Buffer.from(got.kvs[0]!.value).toString()).toBe("2");
    expect(got.revision).toBe(3);
  });

  it("a serializable range and a serializable read-only txn read at once, with no round", async () => {
    const { api, kv, reads, proposed } = setup();
    kv.put({ key: b("a"), value: b("1") });
    expect((await api.range({ key: b("a"), serializable: true })).count).toBe(1);
    const t = await api.txn({ success: [{ requestRange: { key: b("a"), serializable: true } }] });
    expect(t.response.succeeded).toBe(true);
    expect(t.revision).toBe(2);
    expect(reads.length).toBe(0);
    expect(proposed.length).toBe(0);
  });

  it("a linearizable read-only txn waits for a round and is never proposed; a txn that writes is proposed", async () => {
    const { api, reads, proposed } = setup();
    const ro = api.txn({ success: [{ requestRange: { key: b("a") } }] });
    await tick();
    expect(reads.length).toBe(1);
    reads[0]!();
    expect((await ro).response.responses.length).toBe(1);
    expect(proposed.length).toBe(0);
    await api.txn({ success: [{ requestPut: { key: b("a"), value: b("1") } }] });
    expect(proposed.map((p) => Object.keys(p))).toEqual([["txn"]]);
  });

  it("a write throws the error its entry was applied with, and answers the applied revision otherwise", async () => {
    const { api, setAnswer } = setup();
    setAnswer({ revision: 9, response: { prevKv: undefined } });
    expect((await api.put({ key: b("a"), value: b("1") })).revision).toBe(9);
    setAnswer({ revision: 9, error: new Error("etcdserver: mvcc: database space exceeded") });
    await expect(api.deleteRange({ key: b("a") })).rejects.toThrow("database space exceeded");
  });

  it("a lease grant with ID 0 is proposed with an id the member picked", async () => {
    const { api, proposed, setAnswer } = setup();
    setAnswer({ revision: 1, response: { ID: 5, TTL: 10, error: "" } });
    await api.leaseGrant({ ID: 0, TTL: 10 });
    await api.leaseGrant({ ID: 77, TTL: 10 });
    const ids = proposed.map((p) => p.leaseGrant?.ID);
    expect(ids[0]).toBeGreaterThan(0);
    expect(ids[1]).toBe(77);
  });
});
