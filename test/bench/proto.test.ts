import { describe, expect, it } from "vitest";
import { decode, encode, encodePut, prefixRangeEnd, varintKey } from "../../bench/benchmark/proto.js";
import { frameMessage, unframeMessage } from "../../bench/benchmark/h2-unary.js";
import { assignWork } from "../../bench/benchmark/runner.js";
import { LatencyRecorder, concatLatencies } from "../../bench/benchmark/latencies.js";

describe("benchmark wire helpers", () => {
  it("varintKey is Go's binary.PutVarint (zig-zag) in a zero-filled key", () => {
    expect([...varintKey(0, 8)]).toEqual([0, 0, 0, 0, 0, 0, 0, 0]);
    expect([...varintKey(1, 8)]).toEqual([2, 0, 0, 0, 0, 0, 0, 0]);
    expect([...varintKey(63, 4)]).toEqual([126, 0, 0, 0]);
    expect([...varintKey(64, 4)]).toEqual([0x80, 0x01, 0, 0]);
    expect([...varintKey(99_999, 8)]).toEqual([0xbe, 0x9a, 0x0c, 0, 0, 0, 0, 0]);
    expect(varintKey(99_999, 2)).toHaveLength(2);
  });

  it("distinct indices give distinct keys", () => {
    const seen = new Set<string>();
    for (let i = 0; i < 100_000; i++) seen.add(varintKey(i, 8).toString("hex"));
    expect(seen.size).toBe(100_000);
  });

  it("the hand-rolled PutRequest encoder matches protobufjs", () => {
    for (const [k, v] of [
      [Buffer.from("foo"), Buffer.alloc(256, 7)],
      [varintKey(5, 8), Buffer.alloc(0)],
      [Buffer.alloc(0), Buffer.from("x")],
      [Buffer.alloc(200, 1), Buffer.alloc(70_000, 2)],
    ] as const) {
      expect(encodePut(k, v).equals(encode("PutRequest", { key: k, value: v }))).toBe(true);
      const back = decode("PutRequest", encodePut(k, v));
      expect(Buffer.compare(back.key as Buffer, k)).toBe(0);
    }
  });

  it("prefixRangeEnd is clientv3.GetPrefixRangeEnd", () => {
    expect(prefixRangeEnd(Buffer.from("abc")).toString()).toBe("abd");
    expect([...prefixRangeEnd(Buffer.from([0x61, 0xff]))]).toEqual([0x62]);
    expect([...prefixRangeEnd(Buffer.from([0xff, 0xff]))]).toEqual([0]);
    expect([...prefixRangeEnd(Buffer.alloc(0))]).toEqual([0]);
  });

  it("gRPC message framing round-trips and rejects short bodies", () => {
    const m = Buffer.from("hello");
    const f = frameMessage(m);
    expect([...f.subarray(0, 5)]).toEqual([0, 0, 0, 0, 5]);
    expect(unframeMessage(f).toString()).toBe("hello");
    expect(() => unframeMessage(f.subarray(0, 7))).toThrow(/truncated/);
    expect(() => unframeMessage(Buffer.alloc(3))).toThrow();
  });
});

describe("work assignment over worker threads", () => {
  it("keeps etcd's client->conn mapping and never splits a connection", () => {
    const a = assignWork(100, 1000, 2, ["e1", "e2", "e3"]);
    expect(a).toHaveLength(2);
    expect(a.map((w) => w.conns.length)).toEqual([50, 50]);
    expect(a.map((w) => w.clientConn.length)).toEqual([500, 500]);
    expect(a[0]!.conns[0]).toEqual(["e1", "e2", "e3"]);
    // every local conn index is valid and carries 10 clients
    for (const w of a) {
      const per = new Map<number, number>();
      for (const c of w.clientConn) per.set(c, (per.get(c) ?? 0) + 1);
      expect([...per.values()].every((n) => n === 10)).toBe(true);
      expect(Math.max(...w.clientConn)).toBe(w.conns.length - 1);
    }
  });

  it("drops idle workers: 1 conn uses 1 worker; more workers than conns uses conns", () => {
    expect(assignWork(1, 1, 8, ["e"])).toHaveLength(1);
    expect(assignWork(3, 2, 8, ["e"])).toHaveLength(2); // conn 2 has no client
    const a = assignWork(3, 7, 8, ["e"]);
    expect(a.reduce((n, w) => n + w.clientConn.length, 0)).toBe(7);
  });
});

describe("LatencyRecorder", () => {
  it("grows up to its bound and keeps series apart", () => {
    const r = new LatencyRecorder(2, 100_000);
    for (let i = 0; i < 70_000; i++) r.push(i % 2, i);
    const [a, b] = r.take();
    expect(a).toHaveLength(35_000);
    expect(b).toHaveLength(35_000);
    expect(a![1]).toBe(2);
    expect(concatLatencies([a!, b!])).toHaveLength(70_000);
    const small = new LatencyRecorder(1, 2);
    small.push(0, 1);
    small.push(0, 2);
    expect(() => small.push(0, 3)).toThrow(/more than 2/);
  });
});
