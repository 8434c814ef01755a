/**
 * A history of client operations against an etcd-compatible KV store, as a linearizability
 * checker needs it: for each operation, who issued it, what it asked, when it was invoked and
 * when it returned (monotonic clock), and what it returned.
 *
 * An operation whose outcome is unknown (deadline exceeded, connection lost after sending, any
 * error that does not prove the request was not applied) is kept as "possibly applied": its
 * return time is +Infinity and it has no result. The checker may place it anywhere after its
 * invocation, or nowhere at all (Jepsen's and Porcupine's treatment of indeterminate operations).
 */
import { performance } from "node:perf_hooks";

/** Compare of a compare-and-set Txn: on the value, or on the mod revision (0 = key absent). */
export type CasCompare = { target: "value"; value: string } | { target: "mod"; modRevision: number };

/** What a client asked. Every operation touches exactly one key. */
export type KvOp =
  | { kind: "put"; key: string; value: string }
  | { kind: "get"; key: string }
  | { kind: "delete"; key: string }
  /** Txn{ compare } then { put key=value } else { range key } — etcd's compare-and-set idiom. */
  | { kind: "cas"; key: string; compare: CasCompare; value: string };

/** A key as a Range returns it; `null` when the key is absent. */
export interface ObservedKv {
  value: string;
  modRevision: number;
}

/** What the server answered. `revision` is always the response header's revision. */
export type KvResult =
  | { kind: "put"; revision: number }
  | { kind: "get"; revision: number; kv: ObservedKv | null }
  | { kind: "delete"; revision: number; deleted: number }
  /** On failure the else-branch Range tells what the key held (`kv`); on success `kv` is absent. */
  | { kind: "cas"; revision: number; succeeded: boolean; kv?: ObservedKv | null };

export interface Operation {
  /** Unique within a history, dense from 0 (the checker uses it as a bit index). */
  id: number;
  clientId: number;
  op: KvOp;
  /** Monotonic milliseconds. */
  call: number;
  /** Monotonic milliseconds; +Infinity when no return is known (unknown outcome, or resolved late). */
  ret: number;
  /** Absent when the outcome is unknown (history_patch.ts may resolve it from watch events). */
  result?: KvResult;
}

export type History = Operation[];

/** True when the operation may change state (used by the shrinker and global checks). */
export function isWriteOp(op: KvOp): boolean {
  return op.kind !== "get";
}

/** The revision an acknowledged operation's effect was written at, if it wrote anything. */
export function writeRevision(o: Operation): number | undefined {
  const r = o.result;
  if (r === undefined) return undefined;
  switch (r.kind) {
    case "put":
      return r.revision;
    case "delete":
      return r.deleted > 0 ? r.revision : undefined;
    case "cas":
      return r.succeeded ? r.revision : undefined;
    case "get":
      return undefined;
  }
}

/** The value an operation may write (undefined for reads; null for deletes). */
export function writtenValue(op: KvOp): string | null | undefined {
  switch (op.kind) {
    case "put":
    case "cas":
      return op.value;
    case "delete":
      return null;
    case "get":
      return undefined;
  }
}

export function describeOp(op: KvOp): string {
  switch (op.kind) {
    case "put":
      return `put(${op.key}, ${op.value})`;
    case "get":
      return `get(${op.key})`;
    case "delete":
      return `delete(${op.key})`;
    case "cas":
      return op.compare.target === "value"
        ? `cas(${op.key}: value==${op.compare.value} → ${op.value})`
        : `cas(${op.key}: mod==${op.compare.modRevision} → ${op.value})`;
  }
}

function describeKv(kv: ObservedKv | null | undefined): string {
  return kv === null || kv === undefined ? "absent" : `${kv.value}@${kv.modRevision}`;
}

export function describeResult(r: KvResult | undefined): string {
  if (r === undefined) return "unknown (possibly applied)";
  switch (r.kind) {
    case "put":
      return `ok rev=${r.revision}`;
    case "get":
      return `${describeKv(r.kv)} (rev=${r.revision})`;
    case "delete":
      return `deleted=${r.deleted} rev=${r.revision}`;
    case "cas":
      return r.succeeded ? `succeeded rev=${r.revision}` : `failed, saw ${describeKv(r.kv)} (rev=${r.revision})`;
  }
}

export function describeOperation(o: Operation, t0 = 0): string {
  const ret = o.ret === Infinity ? "∞" : (o.ret - t0).toFixed(1);
  return `#${o.id} c${o.clientId} [${(o.call - t0).toFixed(1)} → ${ret}] ${describeOp(o.op)} ⇒ ${describeResult(o.result)}`;
}

/** A pending operation handed back by `invoke`; settle it exactly once. */
export interface PendingOp {
  readonly id: number;
  readonly clientId: number;
  readonly op: KvOp;
  readonly call: number;
  /** The highest revision any operation had returned when this one was invoked. */
  readonly floor: number;
}

export interface HistoryRecorderOptions {
  /** Monotonic clock in milliseconds (tests inject a fake one). */
  now?: () => number;
  /** Hard bound on recorded operations; invoke throws beyond it (a runaway workload is a bug). */
  maxOps?: number;
}

/**
 * Records operations as clients issue them. Operations that definitely failed (the server proved
 * it did not apply them, or reads that failed) are dropped: they carry no information.
 */
export class HistoryRecorder {
  private readonly now: () => number;
  private readonly maxOps: number;
  private readonly ops: Operation[] = [];
  private readonly pending = new Map<number, PendingOp>();
  private nextId = 0;
  private dropped = 0;
  private maxRevision = 0;

  constructor(opts: HistoryRecorderOptions = {}) {
    this.now = opts.now ?? (() => performance.now());
    this.maxOps = opts.maxOps ?? 1_000_000;
  }

  invoke(clientId: number, op: KvOp): PendingOp {
    if (this.nextId >= this.maxOps) throw new Error(`history full (${this.maxOps} operations)`);
    const p: PendingOp = { id: this.nextId++, clientId, op, call: this.now(), floor: this.maxRevision };
    this.pending.set(p.id, p);
    return p;
  }

  /** The operation returned `result`. */
  ok(p: PendingOp, result: KvResult): void {
    this.settle(p);
    if (result.kind !== p.op.kind) throw new Error(`result ${result.kind} for a ${p.op.kind} operation`);
    this.ops.push({ id: p.id, clientId: p.clientId, op: p.op, call: p.call, ret: this.now(), result });
    this.maxRevision = Math.max(this.maxRevision, result.revision);
  }

  /** The operations settled so far, in settling order; append-only (ids as invoked, not renumbered). */
  completed(): readonly Operation[] {
    return this.ops;
  }

  /**
   * The lowest `floor` of the operations in flight (Infinity when none): a write still to be
   * acknowledged lands above it, if the store is linearizable.
   */
  inflightFloor(): number {
    let low = Infinity;
    for (const p of this.pending.values()) low = Math.min(low, p.floor);
    return low;
  }

  /** The operation definitely had no effect (or was a read): it is left out of the history. */
  fail(p: PendingOp): void {
    this.settle(p);
    this.dropped++;
  }

  /** The operation may or may not have taken effect. Reads are dropped: they change nothing. */
  unknown(p: PendingOp): void {
    this.settle(p);
    if (p.op.kind === "get") {
      this.dropped++;
      return;
    }
    this.ops.push({ id: p.id, clientId: p.clientId, op: p.op, call: p.call, ret: Infinity });
  }

  /** Operations still in flight are treated as unknown: the run ended before they returned. */
  history(): History {
    for (const p of [...this.pending.values()]) this.unknown(p);
    return renumber(this.ops);
  }

  get droppedCount(): number {
    return this.dropped;
  }

  private settle(p: PendingOp): void {
    if (!this.pending.delete(p.id)) throw new Error(`operation #${p.id} settled twice or never invoked`);
  }
}

/** Re-assigns dense ids 0..n-1 in invocation order (needed after filtering a history). */
export function renumber(ops: readonly Operation[]): History {
  return [...ops].sort((a, b) => a.call - b.call || a.id - b.id).map((o, i) => ({ ...o, id: i }));
}
