/**
 * A sequential model of etcd's KV store with revisions, for the linearizability checker.
 *
 * The checker partitions a history by key (operations on different keys commute as far as values
 * go) and runs this model per key. A key's state is its value and the revision of its last change
 * (put or delete); `modRevision` of a present key is that revision. Revisions are global, so the
 * per-key model checks only what one key can see — each write's revision is above the key's last
 * change, reads return exactly the current value and mod revision, a response header revision is
 * never below the key's last change — and `checkRevisionOrder` checks the global side: unique
 * write revisions, revisions that never go backwards in real time, observed mod revisions that
 * belong to a write of that very key and value.
 *
 * A write whose outcome is unknown may have been applied at a revision nobody saw; the state then
 * carries a lower bound ("pending") that a later read pins down. This keeps the model small at the
 * price of accepting a few impossible histories (never rejecting a possible one).
 */
import {
  describeOp,
  describeOperation,
  writeRevision,
  writtenValue,
  type History,
  type KvOp,
  type ObservedKv,
  type Operation,
} from "./history.js";

/** One key's state. `value === null` means absent. */
export interface KeyState {
  value: string | null;
  /** Revision of the last change; when `pending`, only a lower bound of it. 0 = never written. */
  rev: number;
  /** The last change came from an operation with unknown outcome: its revision is not known. */
  pending: boolean;
}

/** A nondeterministic sequential model (Porcupine's shape): a step yields every possible next state. */
export interface Model<S> {
  /** Splits a history into independent parts (here: one per key). */
  partition(history: History): History[];
  init(): S;
  /** All states the operation can lead to from `state` given its recorded result; [] if impossible. */
  step(state: S, o: Operation): S[];
  /** A canonical string for memoization; equal strings ⇔ equal states. */
  hash(state: S): string;
  describe(state: S): string;
}

const ABSENT: KeyState = { value: null, rev: 0, pending: false };

function keyOf(op: KvOp): string {
  return op.key;
}

/** A write with a known revision `r` must come after the key's last change. */
function canWriteAt(s: KeyState, r: number): boolean {
  return r > s.rev;
}

/** An unknown-outcome write: the new revision is only known to exceed the last change. */
function pendingWrite(s: KeyState, value: string | null): KeyState {
  return { value, rev: s.rev + 1, pending: true };
}

/** States in which a read observes `kv` (pinning a pending revision); [] if it cannot. */
function observe(s: KeyState, kv: ObservedKv | null): KeyState[] {
  if (kv === null) return s.value === null ? [s] : [];
  if (s.value !== kv.value) return [];
  if (!s.pending) return kv.modRevision === s.rev ? [s] : [];
  return kv.modRevision >= s.rev ? [{ value: s.value, rev: kv.modRevision, pending: false }] : [];
}

/** Outcomes of a mod-revision compare: each with the state it implies (pinning when needed). */
function compareMod(s: KeyState, want: number): Array<{ holds: boolean; state: KeyState }> {
  if (s.value === null) return [{ holds: want === 0, state: s }];
  if (!s.pending) return [{ holds: s.rev === want, state: s }];
  if (want < s.rev) return [{ holds: false, state: s }];
  // Unknown revision ≥ s.rev: it may equal `want` or not.
  return [
    { holds: true, state: { value: s.value, rev: want, pending: false } },
    { holds: false, state: s },
  ];
}

function compareOutcomes(s: KeyState, op: Extract<KvOp, { kind: "cas" }>): Array<{ holds: boolean; state: KeyState }> {
  if (op.compare.target === "mod") return compareMod(s, op.compare.modRevision);
  // etcd: a value compare on an absent key is always false.
  return [{ holds: s.value !== null && s.value === op.compare.value, state: s }];
}

export function stepKey(s: KeyState, o: Operation): KeyState[] {
  const op = o.op;
  const r = o.result;
  if (r !== undefined && r.kind !== op.kind) throw new Error(`operation #${o.id}: ${r.kind} result for ${op.kind}`);
  switch (op.kind) {
    case "get": {
      if (r === undefined || r.kind !== "get") return [s]; // unknown reads never reach the checker
      if (r.revision < s.rev) return [];
      return observe(s, r.kv).filter((n) => r.revision >= n.rev);
    }
    case "put": {
      if (r === undefined) return [pendingWrite(s, op.value)];
      if (r.kind !== "put") return [];
      return canWriteAt(s, r.revision) ? [{ value: op.value, rev: r.revision, pending: false }] : [];
    }
    case "delete": {
      if (r === undefined) return s.value === null ? [s] : [pendingWrite(s, null)];
      if (r.kind !== "delete") return [];
      if (r.deleted === 0) return s.value === null && r.revision >= s.rev ? [s] : [];
      if (r.deleted !== 1) return [];
      return s.value !== null && canWriteAt(s, r.revision) ? [{ value: null, rev: r.revision, pending: false }] : [];
    }
    case "cas": {
      const out: KeyState[] = [];
      for (const { holds, state } of compareOutcomes(s, op)) {
        if (r === undefined) {
          out.push(holds ? pendingWrite(state, op.value) : state);
          continue;
        }
        if (r.kind !== "cas" || r.succeeded !== holds) continue;
        if (holds) {
          if (canWriteAt(state, r.revision)) out.push({ value: op.value, rev: r.revision, pending: false });
          continue;
        }
        const seen = r.kv === undefined ? [state] : observe(state, r.kv);
        for (const n of seen) if (r.revision >= n.rev) out.push(n);
      }
      return out;
    }
  }
}

/** etcd's KV, one partition per key. */
export const kvModel: Model<KeyState> = {
  partition(history) {
    const byKey = new Map<string, Operation[]>();
    for (const o of history) {
      const k = keyOf(o.op);
      let part = byKey.get(k);
      if (part === undefined) byKey.set(k, (part = []));
      part.push(o);
    }
    return [...byKey.values()];
  },
  init: () => ABSENT,
  step: stepKey,
  hash: (s) => `${s.pending ? "~" : ""}${s.rev}:${s.value === null ? "\u0000" : s.value}`,
  describe: (s) => {
    const rev = s.pending ? `≥${s.rev} (unknown-outcome write)` : `${s.rev}`;
    return s.value === null ? `absent (last change at rev ${rev})` : `${s.value} with mod_revision ${rev}`;
  },
};

/** A violation of the global revision rules, with the operations involved. */
export interface RevisionViolation {
  kind: "duplicate-revision" | "revision-went-backwards" | "unknown-mod-revision" | "value-never-written";
  message: string;
  ops: Operation[];
}

function headerRevision(o: Operation): number | undefined {
  return o.result?.revision;
}

/** Every (key, value, modRevision) a read observed, with its operation. */
function observedKvs(o: Operation): Array<{ key: string; kv: ObservedKv }> {
  const r = o.result;
  if (r === undefined) return [];
  if ((r.kind === "get" || r.kind === "cas") && r.kv !== undefined && r.kv !== null) return [{ key: o.op.key, kv: r.kv }];
  return [];
}

/**
 * The checks that need all keys at once (revisions are one global counter):
 *  - two acknowledged writes never share a revision;
 *  - if A returned before B was invoked, B's header revision ≥ A's, and > A's when B wrote;
 *  - a mod revision a read observed belongs to a write of that key and value (an acknowledged
 *    write at that revision, or an unknown-outcome write of that value to that key);
 *  - a read never returns a value that no operation wrote to that key.
 */
export function checkRevisionOrder(history: History, maxViolations = 10): RevisionViolation[] {
  const out: RevisionViolation[] = [];
  const t0 = history.reduce((m, o) => Math.min(m, o.call), Infinity);
  const show = (o: Operation) => describeOperation(o, t0);

  const byRevision = new Map<number, Operation>();
  for (const o of history) {
    const rev = writeRevision(o);
    if (rev === undefined) continue;
    const other = byRevision.get(rev);
    if (other !== undefined) {
      out.push({ kind: "duplicate-revision", message: `two acknowledged writes at revision ${rev}:\n  ${show(other)}\n  ${show(o)}`, ops: [other, o] });
    } else byRevision.set(rev, o);
  }

  // Real-time order: sweep operations by invocation, folding in everything that returned before.
  const known = history.filter((o) => o.result !== undefined);
  const byRet = [...known].sort((a, b) => a.ret - b.ret);
  const byCall = [...known].sort((a, b) => a.call - b.call);
  let maxBefore: Operation | undefined;
  let j = 0;
  for (const b of byCall) {
    while (j < byRet.length && byRet[j]!.ret < b.call) {
      const a = byRet[j++]!;
      if (maxBefore === undefined || headerRevision(a)! > headerRevision(maxBefore)!) maxBefore = a;
    }
    if (maxBefore === undefined) continue;
    const ra = headerRevision(maxBefore)!;
    const rb = headerRevision(b)!;
    const wrote = writeRevision(b) !== undefined;
    if (rb < ra || (wrote && rb === ra)) {
      out.push({
        kind: "revision-went-backwards",
        message: `revision went backwards in real time: ${describeOp(maxBefore.op)} returned rev ${ra} before ${describeOp(b.op)} was invoked, which ${wrote ? "wrote at" : "read at"} rev ${rb}:\n  ${show(maxBefore)}\n  ${show(b)}`,
        ops: [maxBefore, b],
      });
    }
    if (out.length >= maxViolations) return out;
  }

  const writtenBy = new Map<string, Operation[]>(); // key\0value → writers (any outcome)
  for (const o of history) {
    const v = writtenValue(o.op);
    if (v === undefined || v === null) continue;
    const k = `${o.op.key}\u0000${v}`;
    const list = writtenBy.get(k);
    if (list === undefined) writtenBy.set(k, [o]);
    else list.push(o);
  }
  for (const o of history) {
    for (const { key, kv } of observedKvs(o)) {
      const writers = writtenBy.get(`${key}\u0000${kv.value}`) ?? [];
      if (writers.length === 0) {
        out.push({ kind: "value-never-written", message: `read of a value never written: ${key}=${kv.value}:\n  ${show(o)}`, ops: [o] });
        continue;
      }
      const at = byRevision.get(kv.modRevision);
      const matches = at !== undefined && at.op.key === key && writtenValue(at.op) === kv.value;
      const unknownWriter = writers.some((w) => w.result === undefined);
      if (!matches && !(at === undefined && unknownWriter)) {
        const why = at === undefined ? "no acknowledged write has that revision and no unknown-outcome write wrote that value" : `revision ${kv.modRevision} belongs to ${show(at)}`;
        out.push({ kind: "unknown-mod-revision", message: `read saw ${key}=${kv.value} at mod_revision ${kv.modRevision}, but ${why}:\n  ${show(o)}`, ops: at === undefined ? [o] : [at, o] });
      }
    }
    if (out.length >= maxViolations) return out;
  }
  return out;
}
