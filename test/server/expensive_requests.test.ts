/** etcd's "took too long" warnings (src/server/expensive_requests.ts): the threshold, the counter, and a request that cannot be described. */
import { describe, expect, it } from "vitest";
import { ExpensiveRequests } from "../../src/server/expensive_requests.js";
import { encodeRaftRequest } from "../../src/server/raft_request.js";

function harness(thresholdMs: number) {
  const lines: { fields: Record<string, unknown>; msg: string }[] = [];
  let slow = 0;
  const logger = { warn: (fields: Record<string, unknown>, msg: string) => lines.push({ fields, msg }) };
  const e = new ExpensiveRequests({
    logger: logger as never,
    thresholdMs,
    slowApply: { inc: () => slow++ },
    fullHeader: (revision) => ({ clusterId: 1n, memberId: 2n, revision, raftTerm: 3 }),
  });
  return { e, lines, slow: () => slow };
}

describe("ExpensiveRequests", () => {
  it("warns and counts only past the threshold", () => {
    const h = harness(100);
    const data = encodeRaftRequest({ ID: 5, put: { key: Buffer.from("k"), value: Buffer.from("vv") } });
    h.e.applied(100, data, { revision: 2, response: {} });
    expect(h.lines).toEqual([]);
    h.e.applied(150.5, data, { revision: 2, response: {} });
    expect(h.lines).toEqual([
      {
        msg: "apply request took too long",
        fields: { took: "150.5ms", "expected-duration": "100ms", prefix: "", request: 'header:<ID:5 > put:<key:"k" value_size:2 >', response: "size:4" },
      },
    ]);
    expect(h.slow()).toBe(1);
  });

  it("a failed request logs its error and no response", () => {
    const h = harness(0);
    const data = encodeRaftRequest({ ID: 6, deleteRange: { key: Buffer.from("k") } });
    h.e.applied(1, data, { revision: 2, error: new Error("etcdserver: no space") });
    expect(h.lines[0]!.fields).toMatchObject({ request: 'header:<ID:6 > delete_range:<key:"k" > ', response: "", error: "etcdserver: no space" });
  });

  it("a request it cannot describe is still warned of, and never throws", () => {
    const h = harness(0);
    h.e.applied(1, Buffer.from([0xff, 0xff, 0xff]), { revision: 2 });
    expect(() => h.e.rangeServed(1, { key: 42 as unknown as Buffer }, undefined, undefined)).not.toThrow();
    expect(h.lines.map((l) => l.msg)).toEqual(["apply request took too long", "apply request took too long"]);
    expect(String(h.lines[0]!.fields.request)).toMatch(/^<request not described: /);
    expect(h.slow()).toBe(2);
  });
});
