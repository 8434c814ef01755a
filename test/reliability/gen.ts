/**
 * Test helper: random concurrent histories that are linearizable by construction (generated from
 * a sequential execution of etcd's KV semantics at chosen linearization points), and mutations
 * that make them non-linearizable. Seeded (mulberry32) so every failure replays.
 */
import type { History, KvOp, KvResult, ObservedKv, Operation } from "./history.js";
import { mulberry32 } from "../prng.js";

export type Rng = () => number;

/** mulberry32 (test/prng.ts). */
export const rng: (seed: number) => Rng = mulberry32;

export function pick<T>(r: Rng, xs: readonly T[]): T {
  return xs[Math.floor(r() * xs.length)]!;
}

/** etcd's store as a reference: one global revision, per-key value and mod revision. */
export class ReferenceKv {
  revision = 1;
  readonly kvs = new Map<string, ObservedKv>();

  apply(op: KvOp): KvResult {
    const cur = this.kvs.get(op.key) ?? null;
    switch (op.kind) {
      case "get":
        return { kind: "get", revision: this.revision, kv: cur === null ? null : { ...cur } };
      case "put":
        this.kvs.set(op.key, { value: op.value, modRevision: ++this.revision });
        return { kind: "put", revision: this.revision };
      case "delete":
        if (cur === null) return { kind: "delete", revision: this.revision, deleted: 0 };
        this.kvs.delete(op.key);
        return { kind: "delete", revision: ++this.revision, deleted: 1 };
      case "cas": {
        const holds = op.compare.target === "value" ? cur !== null && cur.value === op.compare.value : (cur?.modRevision ?? 0) === op.compare.modRevision;
        if (!holds) return { kind: "cas", revision: this.revision, succeeded: false, kv: cur === null ? null : { ...cur } };
        this.kvs.set(op.key, { value: op.value, modRevision: ++this.revision });
        return { kind: "cas", revision: this.revision, succeeded: true };
      }
    }
  }
}

export interface GenOptions {
  clients?: number;
  opsPerClient?: number;
  keys?: number;
  /** Probability that a write's outcome is unknown (then applied or not with equal odds). */
  unknownRate?: number;
}

/** A linearizable history: each operation takes effect at a random point inside its interval. */
export function linearizableHistory(r: Rng, opts: GenOptions = {}): History {
  const clients = opts.clients ?? 4;
  const perClient = opts.opsPerClient ?? 25;
  const keys = Array.from({ length: opts.keys ?? 3 }, (_, i) => `k${i}`);
  const unknownRate = opts.unknownRate ?? 0.05;
  interface Planned {
    o: Operation;
    at: number;
    apply: boolean;
    unknown: boolean;
  }
  const planned: Planned[] = [];
  const seen = new Map<string, ObservedKv>(); // a loose memory of values to make CAS interesting
  let serial = 0;
  for (let c = 0; c < clients; c++) {
    let t = r() * 5;
    for (let n = 0; n < perClient; n++) {
      const key = pick(r, keys);
      const value = `v${c}.${n}`;
      const roll = r();
      const old = seen.get(key);
      let op: KvOp;
      if (roll < 0.35) op = { kind: "get", key };
      else if (roll < 0.6) op = { kind: "put", key, value };
      else if (roll < 0.7) op = { kind: "delete", key };
      else if (r() < 0.5) op = { kind: "cas", key, compare: { target: "value", value: old?.value ?? "none" }, value };
      else op = { kind: "cas", key, compare: { target: "mod", modRevision: r() < 0.2 ? 0 : (old?.modRevision ?? 0) }, value };
      const dur = 0.5 + r() * 6;
      const unknown = op.kind !== "get" && r() < unknownRate;
      planned.push({ o: { id: serial++, clientId: c, op, call: t, ret: unknown ? Infinity : t + dur }, at: t + r() * dur, apply: !unknown || r() < 0.5, unknown });
      t += dur + r() * 2;
    }
  }
  planned.sort((a, b) => a.at - b.at);
  const store = new ReferenceKv();
  for (const p of planned) {
    if (!p.apply) continue;
    const res = store.apply(p.o.op);
    if (!p.unknown) p.o.result = res;
    const kv = store.kvs.get(p.o.op.key);
    if (kv !== undefined) seen.set(p.o.op.key, kv);
  }
  return planned.map((p) => p.o).sort((a, b) => a.id - b.id);
}

export type Mutation = "stale-read" | "value-never-written" | "revision-backwards" | "lost-update" | "wrong-mod-revision";

/**
 * Applies one mutation that makes the history non-linearizable, or returns undefined when the
 * history offers no place for it. Every mutation is chosen so that it is a real violation.
 */
export function mutate(r: Rng, h: History, kind: Mutation): History | undefined {
  const copy = h.map((o) => ({ ...o, result: o.result === undefined ? undefined : ({ ...o.result } as KvResult) }));
  const reads = copy.filter((o) => o.result?.kind === "get" && o.result.kv !== null);
  switch (kind) {
    case "value-never-written": {
      if (reads.length === 0) return undefined;
      const o = pick(r, reads);
      const res = o.result as Extract<KvResult, { kind: "get" }>;
      res.kv = { value: "never-written", modRevision: res.kv!.modRevision };
      return copy;
    }
    case "wrong-mod-revision": {
      if (reads.length === 0) return undefined;
      const o = pick(r, reads);
      const res = o.result as Extract<KvResult, { kind: "get" }>;
      res.kv = { value: res.kv!.value, modRevision: res.kv!.modRevision + 1000 };
      return copy;
    }
    case "stale-read": {
      // A read invoked after an acknowledged overwrite returned the overwritten value.
      for (const o of shuffled(r, copy)) {
        if (o.result?.kind !== "put") continue;
        const older = copy.find((p) => p.op.key === o.op.key && p.result?.kind === "put" && p.ret < o.call && p.result.revision < (o.result as { revision: number }).revision);
        if (older === undefined) continue;
        const readId = Math.max(...copy.map((p) => p.id)) + 1;
        copy.push({
          id: readId,
          clientId: 99,
          op: { kind: "get", key: o.op.key },
          call: o.ret + 0.01,
          ret: o.ret + 0.02,
          result: { kind: "get", revision: o.result.revision, kv: { value: (older.op as { value: string }).value, modRevision: (older.result as { revision: number }).revision } },
        });
        return copy;
      }
      return undefined;
    }
    case "revision-backwards": {
      const writes = copy.filter((o) => o.result?.kind === "put");
      const later = writes.filter((o) => writes.some((p) => p.ret < o.call));
      if (later.length === 0) return undefined;
      const o = pick(r, later);
      (o.result as { revision: number }).revision = 1;
      return copy;
    }
    case "lost-update": {
      // A second CAS succeeding from the same state as an acknowledged successful CAS.
      const cases = copy.filter((o) => o.op.kind === "cas" && o.result?.kind === "cas" && o.result.succeeded);
      if (cases.length === 0) return undefined;
      const o = pick(r, cases);
      const op = o.op as Extract<KvOp, { kind: "cas" }>;
      copy.push({
        id: Math.max(...copy.map((p) => p.id)) + 1,
        clientId: 98,
        op: { ...op, value: "lost-update" },
        call: o.call,
        ret: o.ret,
        result: { kind: "cas", revision: (o.result as { revision: number }).revision + 5000, succeeded: true },
      });
      return copy;
    }
  }
}

function shuffled<T>(r: Rng, xs: readonly T[]): T[] {
  const a = [...xs];
  for (let i = a.length - 1; i > 0; i--) {
    const j = Math.floor(r() * (i + 1));
    [a[i], a[j]] = [a[j]!, a[i]!];
  }
  return a;
}

