/**
 * Random sequences of lessor operations (grant, revoke, renew, attach, detach, clock steps,
 * promote, demote, expiry polls, restarts) checked against a small reference model of etcd's lease
 * semantics. Replay a failure with SEED=<printed seed>.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { LeaseExistsError, LeaseNotFoundError, LessorNotPrimaryError } from "../../src/lease/errors.js";
import { dec, enc, fixture } from "./harness.js";
import { testSeed } from "../seed.js";

const SEED = testSeed("lessor model");
const RETRY_MS = 3000;
const MIN_TTL = 2;

type Op =
  | { kind: "grant"; id: number; ttl: number }
  | { kind: "revoke"; id: number }
  | { kind: "renew"; id: number }
  | { kind: "attach"; id: number; key: string }
  | { kind: "detach"; id: number; key: string }
  | { kind: "advance"; ms: number }
  | { kind: "promote"; extendMs: number }
  | { kind: "demote" }
  | { kind: "poll"; revokeThem: boolean }
  | { kind: "restart" }
  | { kind: "ttl"; id: number };

const id = fc.integer({ min: 1, max: 6 });
const key = fc.constantFrom("a", "b", "c", "d\u0000", "d");
const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 4, arbitrary: fc.record({ kind: fc.constant("grant" as const), id, ttl: fc.integer({ min: 0, max: 12 }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("revoke" as const), id }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant("renew" as const), id }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant("attach" as const), id, key }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("detach" as const), id, key }) },
  { weight: 5, arbitrary: fc.record({ kind: fc.constant("advance" as const), ms: fc.integer({ min: 0, max: 6000 }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("promote" as const), extendMs: fc.integer({ min: 0, max: 3000 }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("demote" as const) }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant("poll" as const), revokeThem: fc.boolean() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("restart" as const) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("ttl" as const), id }) },
);

interface ModelLease {
  ttl: number;
  expiry: number; // Infinity when not primary
  notifyAt: number;
  keys: Set<string>;
}

class Model {
  primary = false;
  leases = new Map<number, ModelLease>();
}

function expectThrows(fn: () => unknown, type: new () => Error): void {
  expect(fn).toThrow(type);
}

describe("lessor against a reference model", () => {
  it(`random operation sequences (seed ${SEED}, replay with SEED=...)`, () => {
    fc.assert(
      fc.property(fc.array(opArb, { minLength: 20, maxLength: 120, size: "max" }), (ops) => {
        const f = fixture({ minLeaseTtlSec: MIN_TTL, expiredLeaseRetryIntervalMs: RETRY_MS });
        const m = new Model();
        try {
          for (const op of ops) step(f, m, op);
        } finally {
          f.tmp.cleanup();
        }
      }),
      { seed: SEED, numRuns: 150 },
    );
  });
});

function step(f: ReturnType<typeof fixture>, m: Model, op: Op): void {
  const now = f.clock.ms;
  const l = f.lessor;
  switch (op.kind) {
    case "grant": {
      if (m.leases.has(op.id)) {
        expectThrows(() => l.grant(op.id, op.ttl), LeaseExistsError);
        return;
      }
      const ttl = Math.max(op.ttl, MIN_TTL);
      expect(l.grant(op.id, op.ttl)).toEqual({ id: op.id, ttlSec: ttl });
      const expiry = m.primary ? now + ttl * 1000 : Infinity;
      m.leases.set(op.id, { ttl, expiry, notifyAt: expiry, keys: new Set() });
      return;
    }
    case "revoke": {
      const ml = m.leases.get(op.id);
      if (ml === undefined) {
        expectThrows(() => l.revoke(op.id), LeaseNotFoundError);
        return;
      }
      revoke(f, m, op.id);
      return;
    }
    case "renew": {
      const ml = m.leases.get(op.id);
      if (!m.primary) return expectThrows(() => l.renew(op.id), LessorNotPrimaryError);
      if (ml === undefined || ml.expiry <= now) {
        expect(l.keepAlive(op.id)).toBe(0);
        return;
      }
      expect(l.renew(op.id)).toBe(ml.ttl);
      ml.expiry = now + ml.ttl * 1000;
      ml.notifyAt = ml.expiry;
      return;
    }
    case "attach": {
      const ml = m.leases.get(op.id);
      if (ml === undefined) return expectThrows(() => l.attach(op.id, enc(op.key)), LeaseNotFoundError);
      // The store detaches a key from its old lease first, so a key has one lease at most.
      for (const [otherId, other] of m.leases) {
        if (other.keys.delete(op.key)) l.detach(otherId, enc(op.key));
      }
      l.attach(op.id, enc(op.key));
      ml.keys.add(op.key);
      return;
    }
    case "detach": {
      l.detach(op.id, enc(op.key));
      m.leases.get(op.id)?.keys.delete(op.key);
      return;
    }
    case "advance":
      f.clock.advance(op.ms);
      return;
    case "promote":
      l.promote(op.extendMs);
      m.primary = true;
      for (const ml of m.leases.values()) {
        ml.expiry = now + op.extendMs + ml.ttl * 1000;
        ml.notifyAt = ml.expiry;
      }
      return;
    case "demote":
      l.demote();
      m.primary = false;
      for (const ml of m.leases.values()) {
        ml.expiry = Infinity;
        ml.notifyAt = Infinity;
      }
      return;
    case "poll": {
      // The model draws small ids: numbers (LeaseId's form for every safe integer).
      const got = l.expiredLeases(1000).map(Number).sort((a, b) => a - b);
      const want = m.primary ? [...m.leases].filter(([, ml]) => ml.notifyAt <= now).map(([lid]) => lid) : [];
      expect(got).toEqual(want.sort((a, b) => a - b));
      for (const lid of got) {
        const ml = m.leases.get(lid);
        if (ml === undefined) throw new Error("model lost a lease");
        expect(ml.expiry).toBeLessThanOrEqual(now);
        ml.notifyAt = now + RETRY_MS;
        if (op.revokeThem) revoke(f, m, lid);
      }
      return;
    }
    case "restart": {
      const lessor = f.restart({ minLeaseTtlSec: MIN_TTL, expiredLeaseRetryIntervalMs: RETRY_MS });
      m.primary = false;
      for (const [lid, ml] of m.leases) {
        ml.expiry = Infinity;
        ml.notifyAt = Infinity;
        for (const k of ml.keys) lessor.attach(lid, enc(k)); // the store re-attaches at startup
      }
      expect(lessor.leases().map(Number).sort((a, b) => a - b)).toEqual([...m.leases.keys()].sort((a, b) => a - b));
      return;
    }
    case "ttl": {
      const ml = m.leases.get(op.id);
      const got = l.timeToLive(op.id, { keys: true });
      if (ml === undefined) {
        expect(got).toEqual({ id: op.id, ttlSec: -1, grantedTtlSec: 0, keys: [] });
        return;
      }
      const ttlSec = ml.expiry === Infinity ? ml.ttl : Math.trunc((ml.expiry - now) / 1000);
      expect({ ...got, keys: got.keys.map(dec) }).toEqual({ id: op.id, ttlSec, grantedTtlSec: ml.ttl, keys: [...ml.keys].sort() });
      return;
    }
  }
}

function revoke(f: ReturnType<typeof fixture>, m: Model, lid: number): void {
  const ml = m.leases.get(lid);
  if (ml === undefined) throw new Error("model: revoke of unknown lease");
  const callsBefore = f.deleter.calls.length;
  f.lessor.revoke(lid);
  const keys = [...ml.keys].sort();
  if (keys.length === 0) {
    expect(f.deleter.calls.length).toBe(callsBefore);
  } else {
    expect(f.deleter.calls.slice(callsBefore)).toEqual([keys]);
  }
  m.leases.delete(lid);
}
