/**
 * The checker must accept what etcd may do and catch what it must not: hand-written classics,
 * then random histories from a sequential execution (must pass) and their mutations (must fail).
 * Random parts print their seed; replay with SEED=<n>.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { testSeed } from "../seed.js";
import { linearizableHistory, mutate, rng, type Mutation } from "./gen.js";
import { HistoryRecorder, type History, type KvOp, type KvResult, type Operation } from "./history.js";
import { checkRevisionOrder } from "./kv_model.js";
import { checkKvHistory, searchPartition } from "./linearizability.js";
import { kvModel } from "./kv_model.js";
import { writeViolations } from "./timeline.js";

/** A terse builder: op(client, call, ret, op, result); ret = Infinity for unknown outcomes. */
function builder() {
  const ops: Operation[] = [];
  return {
    ops,
    add(clientId: number, call: number, ret: number, op: KvOp, result?: KvResult): void {
      ops.push({ id: ops.length, clientId, op, call, ret, ...(result !== undefined ? { result } : {}) });
    },
  };
}

const put = (key: string, value: string): KvOp => ({ kind: "put", key, value });
const get = (key: string): KvOp => ({ kind: "get", key });
const del = (key: string): KvOp => ({ kind: "delete", key });
const casValue = (key: string, expect: string, value: string): KvOp => ({ kind: "cas", key, compare: { target: "value", value: expect }, value });
const casMod = (key: string, modRevision: number, value: string): KvOp => ({ kind: "cas", key, compare: { target: "mod", modRevision }, value });
const putOk = (revision: number): KvResult => ({ kind: "put", revision });
const read = (revision: number, value: string | null, modRevision = 0): KvResult => ({ kind: "get", revision, kv: value === null ? null : { value, modRevision } });

function outcome(h: History): string {
  return checkKvHistory(h).outcome;
}

describe("known linearizable histories", () => {
  it("sequential put then get", () => {
    const b = builder();
    b.add(1, 0, 1, put("x", "a"), putOk(2));
    b.add(2, 2, 3, get("x"), read(2, "a", 2));
    expect(outcome(b.ops)).toBe("ok");
  });

  it("a read concurrent with a write may see either value", () => {
    for (const seen of [null, "a"] as const) {
      const b = builder();
      b.add(1, 0, 10, put("x", "a"), putOk(2));
      b.add(2, 1, 5, get("x"), seen === null ? read(1, null) : read(2, "a", 2));
      expect(outcome(b.ops)).toBe("ok");
    }
  });

  it("two concurrent CAS from the same state: one wins, one fails and sees the winner", () => {
    const b = builder();
    b.add(1, 0, 1, put("x", "a"), putOk(2));
    b.add(1, 2, 6, casValue("x", "a", "b"), { kind: "cas", revision: 3, succeeded: true });
    b.add(2, 2, 6, casValue("x", "a", "c"), { kind: "cas", revision: 3, succeeded: false, kv: { value: "b", modRevision: 3 } });
    b.add(3, 7, 8, get("x"), read(3, "b", 3));
    expect(outcome(b.ops)).toBe("ok");
  });

  it("revisions interleave across keys; delete and CAS-create on mod 0", () => {
    const b = builder();
    b.add(1, 0, 1, put("x", "a"), putOk(2));
    b.add(2, 2, 3, put("y", "b"), putOk(3));
    b.add(1, 4, 5, del("x"), { kind: "delete", revision: 4, deleted: 1 });
    b.add(2, 6, 7, del("x"), { kind: "delete", revision: 4, deleted: 0 });
    b.add(1, 8, 9, casMod("x", 0, "c"), { kind: "cas", revision: 5, succeeded: true });
    b.add(2, 10, 11, get("x"), read(5, "c", 5));
    b.add(2, 12, 13, get("y"), read(5, "b", 3));
    expect(outcome(b.ops)).toBe("ok");
  });

  it("an unknown-outcome write may have been applied (a later read pins its revision) or not", () => {
    const applied = builder();
    applied.add(1, 0, 1, put("x", "a"), putOk(2));
    applied.add(1, 2, Infinity, put("x", "b"));
    applied.add(2, 10, 11, get("x"), read(3, "b", 3));
    expect(outcome(applied.ops)).toBe("ok");
    const notApplied = builder();
    notApplied.add(1, 0, 1, put("x", "a"), putOk(2));
    notApplied.add(1, 2, Infinity, put("x", "b"));
    notApplied.add(2, 10, 11, get("x"), read(2, "a", 2));
    expect(outcome(notApplied.ops)).toBe("ok");
  });

  it("the recorder produces checkable histories and drops failed and unknown reads", () => {
    let t = 0;
    const rec = new HistoryRecorder({ now: () => t++ });
    const p1 = rec.invoke(1, put("x", "a"));
    rec.ok(p1, putOk(2));
    const p2 = rec.invoke(2, get("x"));
    rec.unknown(p2);
    const p3 = rec.invoke(2, put("x", "b"));
    rec.unknown(p3);
    const p4 = rec.invoke(1, get("x"));
    rec.fail(p4);
    rec.invoke(3, del("x")); // still in flight at the end: unknown
    const h = rec.history();
    expect(h.map((o) => o.op.kind)).toEqual(["put", "put", "delete"]);
    expect(h.filter((o) => o.ret === Infinity)).toHaveLength(2);
    expect(rec.droppedCount).toBe(2);
    expect(() => rec.ok(p1, putOk(3))).toThrow(/settled twice/);
    expect(outcome(h)).toBe("ok");
  });
});

describe("known non-linearizable histories are caught", () => {
  it("stale read: a read after an acknowledged overwrite returns the old value", () => {
    const b = builder();
    b.add(1, 0, 1, put("x", "a"), putOk(2));
    b.add(1, 2, 3, put("x", "b"), putOk(3));
    b.add(2, 4, 5, get("x"), read(3, "a", 2));
    const r = checkKvHistory(b.ops);
    expect(r.outcome).toBe("illegal");
    const v = r.violations.find((x) => x.kind === "not-linearizable");
    expect(v?.key).toBe("x");
    expect(v?.explanation).toMatch(/get\(x\) returned a@2/);
  });

  it("stale read with a consistent header revision is still caught per key", () => {
    const b = builder();
    b.add(1, 0, 1, put("x", "a"), putOk(2));
    b.add(1, 2, 3, put("x", "b"), putOk(3));
    b.add(2, 4, 5, get("x"), read(2, "a", 2)); // header says 2 < 3: also a revision rule
    const r = checkKvHistory(b.ops);
    expect(r.violations.map((v) => v.kind).sort()).toEqual(["not-linearizable", "revision-went-backwards"]);
  });

  it("lost update: two CAS from the same state both succeed", () => {
    const b = builder();
    b.add(1, 0, 1, put("x", "a"), putOk(2));
    b.add(1, 2, 6, casValue("x", "a", "b"), { kind: "cas", revision: 3, succeeded: true });
    b.add(2, 2, 6, casValue("x", "a", "c"), { kind: "cas", revision: 4, succeeded: true });
    const r = checkKvHistory(b.ops);
    expect(r.outcome).toBe("illegal");
    expect(r.violations[0]!.kind).toBe("not-linearizable");
  });

  it("read of a value never written", () => {
    const b = builder();
    b.add(1, 0, 1, put("x", "a"), putOk(2));
    b.add(2, 2, 3, get("x"), read(2, "z", 2));
    const kinds = checkKvHistory(b.ops).violations.map((v) => v.kind);
    expect(kinds).toContain("value-never-written");
    expect(kinds).toContain("not-linearizable");
  });

  it("revision going backwards across keys in real time", () => {
    const b = builder();
    b.add(1, 0, 1, put("x", "a"), putOk(5));
    b.add(2, 2, 3, put("y", "b"), putOk(4));
    const r = checkKvHistory(b.ops);
    expect(r.outcome).toBe("illegal");
    expect(r.violations.map((v) => v.kind)).toEqual(["revision-went-backwards"]);
  });

  it("two acknowledged writes at the same revision", () => {
    const b = builder();
    b.add(1, 0, 5, put("x", "a"), putOk(2));
    b.add(2, 0, 5, put("y", "b"), putOk(2));
    expect(checkRevisionOrder(b.ops).map((v) => v.kind)).toEqual(["duplicate-revision"]);
  });

  it("a read's mod revision must belong to the write of that value", () => {
    const b = builder();
    b.add(1, 0, 1, put("x", "a"), putOk(2));
    b.add(1, 2, 3, put("y", "b"), putOk(3));
    b.add(2, 4, 5, get("x"), read(3, "a", 3));
    expect(checkKvHistory(b.ops).violations.map((v) => v.kind)).toContain("unknown-mod-revision");
  });

  it("a deleted key read back as present after the delete returned", () => {
    const b = builder();
    b.add(1, 0, 1, put("x", "a"), putOk(2));
    b.add(1, 2, 3, del("x"), { kind: "delete", revision: 3, deleted: 1 });
    b.add(2, 4, 5, get("x"), read(3, "a", 2));
    expect(outcome(b.ops)).toBe("illegal");
  });
});

describe("shrinking and reports", () => {
  it("shrinks a long history to the few operations of the violation and writes text, JSON, HTML", () => {
    const seed = testSeed("linearizability shrink");
    const h = linearizableHistory(rng(seed), { clients: 4, opsPerClient: 40, keys: 1, unknownRate: 0 });
    const bad = mutate(rng(seed), h, "stale-read");
    expect(bad).toBeDefined();
    const r = checkKvHistory(bad!);
    const v = r.violations.find((x) => x.kind === "not-linearizable");
    expect(v, `seed=${seed}`).toBeDefined();
    expect(v!.minimal.length).toBeLessThanOrEqual(4);
    expect(searchPartition(kvModel, v!.minimal).outcome).toBe("illegal");
    const dir = mkdtempSync(join(tmpdir(), "lin-report-"));
    dirs.push(dir);
    const [files] = writeViolations(dir, [v!]);
    expect(readFileSync(files!.html, "utf8")).toMatch(/<svg[\s\S]*<rect/);
    expect(JSON.parse(readFileSync(files!.json, "utf8"))).toHaveLength(v!.minimal.length);
    expect(readFileSync(files!.text, "utf8")).toMatch(/no linear order/);
  });
});

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

describe("randomized histories", () => {
  const seed = testSeed("linearizability randomized");
  it(`histories generated from a sequential execution pass (seed=${seed})`, () => {
    const r = rng(seed);
    for (let i = 0; i < 40; i++) {
      const h = linearizableHistory(r, { clients: 2 + (i % 4), opsPerClient: 30, keys: 1 + (i % 3), unknownRate: 0.08 });
      const res = checkKvHistory(h);
      expect(res.outcome, `seed=${seed} iteration=${i}: ${res.violations[0]?.explanation ?? ""}`).toBe("ok");
    }
  });

  it(`mutated histories are caught (seed=${seed})`, () => {
    const r = rng(seed ^ 0x5bd1e995);
    const kinds: Mutation[] = ["stale-read", "value-never-written", "revision-backwards", "lost-update", "wrong-mod-revision"];
    let tried = 0;
    let caught = 0;
    for (let i = 0; i < 60; i++) {
      const kind = kinds[i % kinds.length]!;
      const bad = mutate(r, linearizableHistory(r, { clients: 3, opsPerClient: 20, keys: 2, unknownRate: 0.05 }), kind);
      if (bad === undefined) continue;
      tried++;
      const res = checkKvHistory(bad);
      if (res.outcome === "illegal") caught++;
      // These mutations are violations by construction, except lost-update (rarely legal).
      else if (kind !== "lost-update") expect.fail(`seed=${seed} iteration=${i}: ${kind} not caught`);
    }
    expect(tried).toBeGreaterThan(40);
    expect(caught / tried).toBeGreaterThan(0.9);
  });
});

describe("bounded time", () => {
  it("gives up with 'unknown' when the step budget runs out", () => {
    // Many concurrent unknown-outcome writes: a search space far beyond a budget of 50 steps.
    const b = builder();
    for (let i = 0; i < 30; i++) b.add(i, i * 0.1, Infinity, put("x", `w${i}`));
    b.add(99, 100, 101, get("x"), read(40, "w7", 40));
    const r = checkKvHistory(b.ops, { stepBudget: 50 });
    expect(r.outcome).toBe("unknown");
    expect(r.undecidedKeys).toEqual(["x"]);
    expect(r.steps).toBeLessThanOrEqual(51);
  });
});
