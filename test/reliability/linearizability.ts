/**
 * Linearizability checking with Wing & Gong's search as improved by Lowe (the algorithm Porcupine
 * and Knossos use): walk a doubly linked list of call/return entries ordered by time; at a call,
 * try to linearize that operation now (the model must accept it and the pair (set of linearized
 * operations, model state) must be new — the memoization that makes the search practical); at a
 * return whose call is not yet linearized, backtrack. The history is partitioned first (per key)
 * and each part is searched alone.
 *
 * The model is nondeterministic (an unknown-outcome write may or may not pin a revision), so the
 * search state is the set of possible model states, as in Porcupine's power-set construction.
 *
 * The search is bounded: after `stepBudget` steps it answers "unknown" instead of hanging CI.
 */
import { describeOp, describeOperation, describeResult, writeRevision, writtenValue, type History, type Operation } from "./history.js";
import { checkRevisionOrder, kvModel, type Model, type RevisionViolation } from "./kv_model.js";

export type CheckOutcome = "ok" | "illegal" | "unknown";

export interface SearchResult {
  outcome: CheckOutcome;
  steps: number;
  /** The longest sequence of operations the search managed to linearize (for explanations). */
  longestPrefix: Operation[];
  /** Describes the model states after `longestPrefix`. */
  statesAfterPrefix: string[];
}

interface Entry {
  isCall: boolean;
  time: number;
  /** Index of the operation in the partition. */
  idx: number;
  match: Entry | null;
  prev: Entry | null;
  next: Entry | null;
}

function buildList(ops: readonly Operation[]): Entry {
  const entries: Entry[] = [];
  ops.forEach((o, idx) => {
    const call: Entry = { isCall: true, time: o.call, idx, match: null, prev: null, next: null };
    const ret: Entry = { isCall: false, time: o.ret, idx, match: null, prev: null, next: null };
    call.match = ret;
    entries.push(call, ret);
  });
  // Equal times count as concurrent: calls sort before returns.
  entries.sort((a, b) => a.time - b.time || Number(b.isCall) - Number(a.isCall) || a.idx - b.idx);
  const head: Entry = { isCall: false, time: -Infinity, idx: -1, match: null, prev: null, next: null };
  let prev = head;
  for (const e of entries) {
    prev.next = e;
    e.prev = prev;
    prev = e;
  }
  return head;
}

function lift(e: Entry): void {
  e.prev!.next = e.next;
  e.next!.prev = e.prev;
  const m = e.match!;
  m.prev!.next = m.next;
  if (m.next !== null) m.next.prev = m.prev;
}

function unlift(e: Entry): void {
  const m = e.match!;
  m.prev!.next = m;
  if (m.next !== null) m.next.prev = m;
  e.prev!.next = e;
  e.next!.prev = e;
}

/**
 * The set of linearized operations, identified for memoization by a 96-bit Zobrist hash (XOR of
 * a random word triple per operation): O(1) per step, where a bitset key would cost O(n).
 * A false match needs a 96-bit collision — negligible against the memo sizes allowed here.
 */
class LinearizedSet {
  private readonly z: Uint32Array;
  private h0 = 0;
  private h1 = 0;
  private h2 = 0;

  constructor(n: number) {
    this.z = new Uint32Array(n * 3);
    let a = 0x9e3779b9;
    for (let i = 0; i < this.z.length; i++) {
      // mulberry32: deterministic, so a replay searches identically.
      a = (a + 0x6d2b79f5) >>> 0;
      let t = a;
      t = Math.imul(t ^ (t >>> 15), t | 1);
      t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
      this.z[i] = (t ^ (t >>> 14)) >>> 0;
    }
  }
  toggle(i: number): void {
    this.h0 = (this.h0 ^ this.z[3 * i]!) >>> 0;
    this.h1 = (this.h1 ^ this.z[3 * i + 1]!) >>> 0;
    this.h2 = (this.h2 ^ this.z[3 * i + 2]!) >>> 0;
  }
  /** Key of the set with operation i added (i must not be in the set). */
  keyWith(i: number): string {
    return `${(this.h0 ^ this.z[3 * i]!) >>> 0}.${(this.h1 ^ this.z[3 * i + 1]!) >>> 0}.${(this.h2 ^ this.z[3 * i + 2]!) >>> 0}|`;
  }
}

function stepAll<S>(model: Model<S>, states: readonly S[], o: Operation): S[] {
  const out = new Map<string, S>();
  for (const s of states) for (const n of model.step(s, o)) out.set(model.hash(n), n);
  return [...out.values()];
}

function hashAll<S>(model: Model<S>, states: readonly S[]): string {
  return states
    .map((s) => model.hash(s))
    .sort()
    .join("|");
}

export interface SearchOptions {
  /** Steps (loop iterations) before giving up with "unknown". */
  stepBudget?: number;
  /** Memo entries before giving up with "unknown" (bounds memory). */
  memoMax?: number;
  /** Record the longest linearizable prefix (O(n²) copying: for small, shrunk histories). */
  trackLongest?: boolean;
}

/** Searches one partition for a linearization. */
export function searchPartition<S>(model: Model<S>, ops: readonly Operation[], opts: SearchOptions = {}): SearchResult {
  const stepBudget = opts.stepBudget ?? 5_000_000;
  const memoMax = opts.memoMax ?? 1_000_000;
  const trackLongest = opts.trackLongest ?? false;
  const head = buildList(ops);
  const linearized = new LinearizedSet(ops.length);
  const memo = new Set<string>();
  const calls: Array<{ entry: Entry; states: S[] }> = [];
  let states: S[] = [model.init()];
  let entry: Entry | null = head.next;
  let steps = 0;
  let longest: number[] = [];
  let longestStates: S[] = states;
  const result = (outcome: CheckOutcome): SearchResult => ({
    outcome,
    steps,
    longestPrefix: longest.map((i) => ops[i]!),
    statesAfterPrefix: longestStates.map((s) => model.describe(s)),
  });

  while (head.next !== null) {
    if (++steps > stepBudget || memo.size > memoMax) return result("unknown");
    if (entry === null) throw new Error("linearizability search ran off the list (a return without its call?)");
    if (entry.isCall) {
      const next = stepAll(model, states, ops[entry.idx]!);
      if (next.length > 0) {
        const key = linearized.keyWith(entry.idx) + hashAll(model, next);
        if (!memo.has(key)) {
          memo.add(key);
          calls.push({ entry, states });
          states = next;
          linearized.toggle(entry.idx);
          lift(entry);
          if (trackLongest && calls.length > longest.length) {
            longest = calls.map((c) => c.entry.idx);
            longestStates = states;
          }
          entry = head.next;
          continue;
        }
      }
      entry = entry.next;
    } else {
      const top = calls.pop();
      if (top === undefined) return result("illegal");
      entry = top.entry;
      states = top.states;
      linearized.toggle(entry.idx);
      unlift(entry);
      entry = entry.next;
    }
  }
  return result("ok");
}

/** A state-changing operation (an acknowledged write, or any operation of unknown outcome). */
function mayWrite(o: Operation): boolean {
  if (o.op.kind === "get") return false;
  return o.result === undefined || writeRevision(o) !== undefined;
}

/** The revision whose state `p` observed (the state just before it, for writes that checked it). */
function observedAt(p: Operation): number | undefined {
  const r = p.result;
  if (r === undefined) return undefined;
  switch (r.kind) {
    case "get":
      return r.revision;
    case "put":
      return undefined;
    case "delete":
      return r.deleted > 0 ? r.revision - 1 : r.revision;
    case "cas":
      return r.succeeded ? r.revision - 1 : r.revision;
  }
}

/**
 * Whether some operation in `rest` depends on the write `o` (removing `o` could then manufacture
 * a violation that was not there). An acknowledged write is seen by whatever observed the key at a
 * revision in [o's revision, the next write's revision); any write is seen by an operation naming
 * its value or revision. An unknown-outcome write has no revision, so any observation of presence
 * (for a put) or absence (for a delete) counts.
 */
function isObserved(o: Operation, rest: readonly Operation[]): boolean {
  const v = writtenValue(o.op);
  const rev = writeRevision(o);
  let next = Infinity;
  if (rev !== undefined) for (const p of rest) {
    const pr = writeRevision(p);
    if (pr !== undefined && pr > rev && pr < next) next = pr;
  }
  for (const p of rest) {
    if (p === o) continue;
    const r = p.result;
    if (p.op.kind === "cas") {
      const c = p.op.compare;
      if (c.target === "value" && c.value === v) return true;
      if (c.target === "mod" && rev !== undefined && c.modRevision === rev) return true;
    }
    const kv = r !== undefined && (r.kind === "get" || r.kind === "cas") ? r.kv : undefined;
    if (kv !== undefined && kv !== null && kv.value === v) return true;
    const at = observedAt(p);
    if (at === undefined) continue;
    if (rev !== undefined) {
      if (at >= rev && at < next) return true;
      continue;
    }
    // Unknown outcome: any sight of the kind of state it leaves behind.
    const sawAbsent = kv === null || (r?.kind === "delete" && r.deleted === 0) || (p.op.kind === "cas" && p.op.compare.target === "mod" && p.op.compare.modRevision === 0);
    const sawPresent = (kv !== undefined && kv !== null) || (r?.kind === "delete" && r.deleted > 0) || (p.op.kind === "cas" && r?.kind === "cas" && r.succeeded);
    if (v === null ? sawAbsent : sawPresent) return true;
  }
  return false;
}

export interface ShrinkOptions {
  /** Step budget of each re-check while shrinking. */
  stepBudgetPerCheck?: number;
  /** Total steps for the whole shrink; the best sub-history so far is returned when exceeded. */
  stepBudgetTotal?: number;
}

/**
 * Greedily shrinks an illegal partition. Reads go first, in chunks then one by one: a read only
 * constrains, so if the history without it is illegal, so was the history with it. Then writes,
 * one by one, and only writes no remaining operation depends on (removing a write that is seen
 * would only manufacture a new violation). Repeats until nothing more can go or the budget ends.
 */
export function shrinkPartition<S>(model: Model<S>, ops: readonly Operation[], opts: ShrinkOptions = {}): Operation[] {
  const perCheck = opts.stepBudgetPerCheck ?? 200_000;
  let budget = opts.stepBudgetTotal ?? 20_000_000;
  let cur = [...ops];
  const stillIllegal = (cand: Operation[]): boolean => {
    const r = searchPartition(model, cand, { stepBudget: perCheck });
    budget -= r.steps;
    return r.outcome === "illegal";
  };
  /** One greedy pass removing runs of `chunk` removable operations; true if anything went. */
  const pass = (chunk: number, removable: (o: Operation, rest: Operation[]) => boolean): boolean => {
    let any = false;
    for (let start = 0; start < cur.length && budget > 0; ) {
      const removed = cur.slice(start, start + chunk);
      const rest = [...cur.slice(0, start), ...cur.slice(start + chunk)];
      if (rest.length > 0 && removed.every((o) => removable(o, rest)) && stillIllegal(rest)) {
        cur = rest;
        any = true;
      } else start += chunk;
    }
    return any;
  };
  const isRead = (o: Operation) => !mayWrite(o);
  const isFreeWrite = (o: Operation, rest: Operation[]) => mayWrite(o) && !isObserved(o, rest);
  for (let round = 0; round < 100 && budget > 0; round++) {
    let progress = false;
    for (let chunk = Math.max(1, Math.floor(cur.length / 2)); chunk >= 1; chunk = Math.floor(chunk / 2)) {
      if (pass(chunk, isRead)) progress = true;
    }
    if (pass(1, isFreeWrite)) progress = true;
    if (!progress) break;
  }
  return cur;
}

export interface Violation {
  kind: "not-linearizable" | RevisionViolation["kind"];
  key?: string;
  /** The (shrunk) operations that exhibit the violation. */
  minimal: Operation[];
  explanation: string;
  /** For not-linearizable: the longest linearizable order of `minimal` the search found. */
  longestPrefix?: Operation[];
}

export interface KvCheckResult {
  outcome: CheckOutcome;
  operations: number;
  partitions: number;
  steps: number;
  /** Keys whose search gave up (outcome "unknown" if no violation was found elsewhere). */
  undecidedKeys: string[];
  violations: Violation[];
}

export interface KvCheckOptions extends SearchOptions, ShrinkOptions {
  /** Stop after the first not-linearizable key (shrinking is the slow part). */
  maxViolations?: number;
}

/** Why no operation can come next after `prefix` (for the readable explanation). */
function explainStuck<S>(model: Model<S>, ops: readonly Operation[], prefix: readonly Operation[], stateTexts: string[]): string {
  const done = new Set(prefix.map((o) => o.id));
  const rest = ops.filter((o) => !done.has(o.id));
  const firstRet = rest.reduce((m, o) => Math.min(m, o.ret), Infinity);
  // Candidates: operations invoked before the earliest return among the rest (they could go next).
  const candidates = rest.filter((o) => o.call <= firstRet);
  const t0 = ops.reduce((m, o) => Math.min(m, o.call), Infinity);
  const lines = [
    `The search linearized at most ${prefix.length} of ${ops.length} operations, in this order:`,
    ...prefix.map((o, i) => `  ${i + 1}. ${describeOperation(o, t0)}`),
    `after which the key is ${stateTexts.join(" or ")}.`,
    `The next operation must be one of those invoked before the earliest pending return, and none fits:`,
    ...candidates.map((o) => `  - ${describeOp(o.op)} returned ${describeResult(o.result)}`),
    `Every other order was tried too (memoized); none explains all results.`,
  ];
  void model;
  return lines.join("\n");
}

/** Checks a KV history: per-key linearizability (with shrinking) plus the global revision rules. */
export function checkKvHistory(history: History, opts: KvCheckOptions = {}): KvCheckResult {
  const maxViolations = opts.maxViolations ?? 1;
  const parts = kvModel.partition(history);
  const violations: Violation[] = [];
  const undecidedKeys: string[] = [];
  let steps = 0;
  for (const part of parts) {
    const r = searchPartition(kvModel, part, opts);
    steps += r.steps;
    const key = part[0]!.op.key;
    if (r.outcome === "unknown") undecidedKeys.push(key);
    if (r.outcome !== "illegal" || violations.length >= maxViolations) continue;
    const minimal = shrinkPartition(kvModel, part, opts);
    const again = searchPartition(kvModel, minimal, { ...opts, trackLongest: true });
    const t0 = minimal.reduce((m, o) => Math.min(m, o.call), Infinity);
    const explanation = [
      `Key ${JSON.stringify(key)}: no linear order of these ${minimal.length} operations (shrunk from ${part.length}) is allowed by etcd's KV model:`,
      ...minimal.map((o) => `  ${describeOperation(o, t0)}`),
      "",
      explainStuck(kvModel, minimal, again.longestPrefix, again.statesAfterPrefix),
    ].join("\n");
    violations.push({ kind: "not-linearizable", key, minimal, explanation, longestPrefix: again.longestPrefix });
  }
  for (const rv of checkRevisionOrder(history)) {
    violations.push({ kind: rv.kind, minimal: rv.ops, explanation: rv.message });
  }
  const outcome: CheckOutcome = violations.length > 0 ? "illegal" : undecidedKeys.length > 0 ? "unknown" : "ok";
  return { outcome, operations: history.length, partitions: parts.length, steps, undecidedKeys, violations };
}
