/**
 * Random operation generators for the property tests, and the adapter that
 * runs one model operation against the real store and against the model,
 * returning both outcomes in a comparable shape.
 */
import fc from 'fast-check';
import { ErrCompacted, ErrDuplicateKey, ErrFutureRev, ErrKeyNotFound, MvccError } from '../../src/mvcc/errors.js';
import type { KvStore } from '../../src/mvcc/kvstore.js';
import type { Compare, KeyValue, KvOp, RangeRequest, RequestOp, ResponseOp, TxnRequest } from '../../src/mvcc/types.js';
import { b, plainKv } from './helpers.js';
import { type MCompare, Model, ModelError, type MOp, type MRangeReq, type MTxn } from './model.js';

export const KEYS = ['a', 'ab', 'a\x00', 'b', 'c', 'd', '\xff'];
const NESTED_KEYS = ['x', 'y', 'z'];
const VALUES = ['', 'v1', 'v2', 'zz'];

/** A number resolved against the current revision at run time (generators cannot know it). */
type Rel = number;

export type GenOp =
  | { kind: 'range'; req: Omit<MRangeReq, 'revision' | 'minMod' | 'maxMod' | 'minCreate' | 'maxCreate'> & { rev: Rel; filt: [Rel, Rel, Rel, Rel] } }
  | { kind: 'put'; key: string; value: string; prevKv: boolean; ignoreValue: boolean }
  | { kind: 'del'; key: string; end?: string; prevKv: boolean }
  | { kind: 'txn'; txn: GenTxn }
  | { kind: 'compact'; rev: Rel }
  | { kind: 'yield' };

export interface GenTxn {
  compare: (Omit<MCompare, 'num'> & { num: Rel })[];
  success: GenTxnOp[];
  failure: GenTxnOp[];
}
type GenTxnOp =
  | { range: { key: string; end?: string; rev: Rel } }
  | { put: { key: string; value: string; prevKv: boolean; ignoreValue: boolean } }
  | { del: { key: string; end?: string; prevKv: boolean } }
  | { txn: GenTxn };

const key = fc.constantFrom(...KEYS);
const end = fc.option(fc.oneof(fc.constantFrom(...KEYS), fc.constant('')), { nil: undefined, freq: 3 });
const value = fc.constantFrom(...VALUES);
const rel = fc.nat({ max: 1000 });

const rangeGen = fc.record({
  key,
  end,
  limit: fc.nat({ max: 4 }),
  sortOrder: fc.nat({ max: 2 }),
  sortTarget: fc.nat({ max: 4 }),
  keysOnly: fc.boolean(),
  countOnly: fc.boolean(),
  rev: rel,
  filt: fc.tuple(rel, rel, rel, rel),
});

const putGen = fc.record({ key, value, prevKv: fc.boolean(), ignoreValue: fc.nat({ max: 5 }).map((n) => n === 0) }).map((p) => (p.ignoreValue ? { ...p, value: '' } : p));

function txnGen(keys: string[], depth: number): fc.Arbitrary<GenTxn> {
  const k = fc.constantFrom(...keys);
  // Write keys of one branch are distinct, deletes are single keys: no duplicate-key rejections by construction.
  const ops: fc.Arbitrary<GenTxnOp[]> = fc
    .array(
      fc.oneof(
        fc.record({ range: fc.record({ key: k, end, rev: rel }) }),
        fc.record({ put: fc.record({ key: k, value, prevKv: fc.boolean(), ignoreValue: fc.constant(false) }) }),
        fc.record({ del: fc.record({ key: k, prevKv: fc.boolean() }) }),
      ),
      { maxLength: 3 },
    )
    .map((list) => {
      const used = new Set<string>();
      return list.filter((o) => {
        const wk = 'put' in o ? o.put.key : 'del' in o ? o.del.key : undefined;
        if (wk === undefined) return true;
        if (used.has(wk)) return false;
        used.add(wk);
        return true;
      });
    });
  const withNested: fc.Arbitrary<GenTxnOp[]> =
    depth > 0 ? fc.tuple(ops, fc.option(txnGen(NESTED_KEYS, depth - 1), { nil: undefined })).map(([o, t]) => (t ? [...o, { txn: t }] : o)) : ops;
  return fc.record({
    compare: fc.array(
      fc.record({ key: fc.constantFrom(...KEYS, ...NESTED_KEYS), end, target: fc.nat({ max: 4 }), result: fc.nat({ max: 3 }), num: rel, value }),
      { maxLength: 2 },
    ),
    success: withNested,
    failure: withNested,
  });
}

export const opGen: fc.Arbitrary<GenOp> = fc.oneof(
  { weight: 4, arbitrary: rangeGen.map((req) => ({ kind: 'range' as const, req })) },
  { weight: 6, arbitrary: putGen.map((p) => ({ kind: 'put' as const, ...p })) },
  { weight: 2, arbitrary: fc.record({ key, end, prevKv: fc.boolean() }).map((d) => ({ kind: 'del' as const, ...d })) },
  { weight: 2, arbitrary: txnGen(KEYS, 1).map((txn) => ({ kind: 'txn' as const, txn })) },
  { weight: 1, arbitrary: rel.map((rev) => ({ kind: 'compact' as const, rev })) },
  { weight: 1, arbitrary: fc.constant({ kind: 'yield' as const }) },
);

// ------------------------------------------------------------ resolving

/** Revision-like numbers: mostly in [0, rev+1], so old, current and future revisions all occur. */
function resolveRev(r: Rel, cur: number): number {
  return r % (cur + 2);
}

function resolveRange(g: Extract<GenOp, { kind: 'range' }>['req'], cur: number): MRangeReq {
  const f = (x: Rel): number => (x % 8 === 0 ? resolveRev(x, cur) : 0);
  return {
    key: g.key,
    end: g.end,
    revision: resolveRev(g.rev, cur) % 3 === 0 ? resolveRev(g.rev, cur) : 0,
    limit: g.limit,
    sortOrder: g.sortOrder,
    sortTarget: g.sortTarget,
    keysOnly: g.keysOnly,
    countOnly: g.countOnly,
    minMod: f(g.filt[0]),
    maxMod: f(g.filt[1]),
    minCreate: f(g.filt[2]),
    maxCreate: f(g.filt[3]),
  };
}

function resolveTxn(t: GenTxn, cur: number): MTxn {
  const ops = (list: GenTxnOp[]): MOp[] =>
    list.map((o) => {
      if ('range' in o) {
        const revision = o.range.rev % 4 === 0 ? resolveRev(o.range.rev, cur) : 0;
        const req: MRangeReq = { key: o.range.key, end: o.range.end, revision, limit: 0, sortOrder: 0, sortTarget: 0, keysOnly: false, countOnly: false, minMod: 0, maxMod: 0, minCreate: 0, maxCreate: 0 };
        return { range: req };
      }
      if ('put' in o) return { put: o.put };
      if ('del' in o) return { del: o.del };
      return { txn: resolveTxn(o.txn, cur) };
    });
  return {
    compare: t.compare.map((c) => ({ ...c, num: c.num % 4 === 0 ? 0 : resolveRev(c.num, cur) % 4 })),
    success: ops(t.success),
    failure: ops(t.failure),
  };
}

// ------------------------------------------------------------ to store requests

function endBytes(e: string | undefined): Buffer | undefined {
  if (e === undefined) return undefined;
  return e === '' ? Buffer.from([0]) : b(e);
}

function rangeReq(r: MRangeReq): RangeRequest {
  return {
    key: b(r.key),
    rangeEnd: endBytes(r.end),
    revision: r.revision,
    limit: r.limit,
    sortOrder: r.sortOrder,
    sortTarget: r.sortTarget,
    keysOnly: r.keysOnly,
    countOnly: r.countOnly,
    minModRevision: r.minMod,
    maxModRevision: r.maxMod,
    minCreateRevision: r.minCreate,
    maxCreateRevision: r.maxCreate,
  };
}

function compareReq(c: MCompare): Compare {
  const out: Compare = { key: b(c.key), rangeEnd: endBytes(c.end), target: c.target, result: c.result };
  if (c.target === 0) out.version = c.num;
  if (c.target === 1) out.createRevision = c.num;
  if (c.target === 2) out.modRevision = c.num;
  if (c.target === 3) out.value = b(c.value);
  if (c.target === 4) out.lease = c.num;
  return out;
}

function txnReq(t: MTxn): TxnRequest {
  const ops = (list: MOp[]): RequestOp[] =>
    list.map((o) => {
      if ('range' in o) return { requestRange: rangeReq(o.range) };
      if ('put' in o) return { requestPut: { key: b(o.put.key), value: b(o.put.value), prevKv: o.put.prevKv, ignoreValue: o.put.ignoreValue } };
      if ('del' in o) return { requestDeleteRange: { key: b(o.del.key), rangeEnd: endBytes(o.del.end), prevKv: o.del.prevKv } };
      return { requestTxn: txnReq(o.txn) };
    });
  return { compare: t.compare.map(compareReq), success: ops(t.success), failure: ops(t.failure) };
}

// ------------------------------------------------------------ normalising outcomes

type Outcome = { error: string } | { ok: unknown };

function errName(e: unknown): string {
  if (e instanceof ErrCompacted || (e instanceof ModelError && e.message === 'compacted')) return 'compacted';
  if (e instanceof ErrFutureRev || (e instanceof ModelError && e.message === 'future')) return 'future';
  if (e instanceof ErrKeyNotFound || (e instanceof ModelError && e.message === 'key not found')) return 'key not found';
  if (e instanceof ErrDuplicateKey) return 'duplicate';
  if (e instanceof MvccError || e instanceof ModelError) return `other: ${e.message}`;
  throw e;
}

function kvs(list: KeyValue[]): unknown[] {
  return list.map(plainKv);
}

function normResponseOp(r: ResponseOp): unknown {
  if (r.responseRange) return { range: { kvs: kvs(r.responseRange.kvs), more: r.responseRange.more, count: r.responseRange.count } };
  if (r.responsePut) return { put: { prevKv: r.responsePut.prevKv ? plainKv(r.responsePut.prevKv) : undefined } };
  if (r.responseDeleteRange) return { del: { deleted: r.responseDeleteRange.deleted, prevKvs: kvs(r.responseDeleteRange.prevKvs) } };
  if (r.responseTxn) return { txn: { succeeded: r.responseTxn.succeeded, responses: r.responseTxn.responses.map(normResponseOp) } };
  return {};
}

function attempt(f: () => unknown): Outcome {
  try {
    return { ok: f() };
  } catch (e) {
    return { error: errName(e) };
  }
}

export interface Step {
  /** The Raft entry this op became (undefined for reads), for replay after restarts. */
  entry?: KvOp;
  store: Outcome;
  model: Outcome;
  storeRev: number;
  modelRev: number;
  desc: string;
}

/** Runs one generated op on both sides. `index` is the Raft index used for apply. */
export function runOp(op: GenOp, store: KvStore, model: Model, index: number): Step {
  const cur = model.rev;
  let s: Outcome;
  let m: Outcome;
  let desc: string;
  let entry: KvOp | undefined;
  const apply = (kvop: KvOp): unknown => {
    entry = kvop;
    const res = store.apply(index, 1, kvop);
    if (res === null) throw new Error('apply skipped a fresh index');
    if (res.error) throw res.error;
    return res;
  };
  switch (op.kind) {
    case 'range': {
      const req = resolveRange(op.req, cur);
      desc = `range ${JSON.stringify(req)}`;
      s = attempt(() => {
        const r = store.range(rangeReq(req));
        return { kvs: kvs(r.kvs), more: r.more, count: r.count };
      });
      m = attempt(() => {
        const r = model.range(req);
        return { kvs: r.kvs, more: r.more, count: r.count };
      });
      break;
    }
    case 'put': {
      desc = `put ${JSON.stringify(op)}`;
      s = attempt(() => {
        const r = apply({ put: { key: b(op.key), value: b(op.value), prevKv: op.prevKv, ignoreValue: op.ignoreValue } }) as { put: { prevKv?: KeyValue } };
        return { prevKv: r.put.prevKv ? plainKv(r.put.prevKv) : undefined };
      });
      m = attempt(() => model.put(op));
      break;
    }
    case 'del': {
      desc = `del ${JSON.stringify(op)}`;
      s = attempt(() => {
        const r = apply({ deleteRange: { key: b(op.key), rangeEnd: endBytes(op.end), prevKv: op.prevKv } }) as {
          deleteRange: { deleted: number; prevKvs: KeyValue[] };
        };
        return { deleted: r.deleteRange.deleted, prevKvs: kvs(r.deleteRange.prevKvs) };
      });
      m = attempt(() => model.del(op));
      break;
    }
    case 'txn': {
      const t = resolveTxn(op.txn, cur);
      desc = `txn ${JSON.stringify(t)}`;
      s = attempt(() => {
        const r = apply({ txn: txnReq(t) }) as { txn: NonNullable<ResponseOp['responseTxn']> };
        return normResponseOp({ responseTxn: r.txn });
      });
      m = attempt(() => ({ txn: model.txn(t) }));
      break;
    }
    case 'compact': {
      const rev = resolveRev(op.rev, cur);
      desc = `compact ${rev}`;
      s = attempt(() => {
        const r = apply({ compaction: { revision: rev } }) as { compaction: Promise<void> };
        void r.compaction;
        return null;
      });
      m = attempt(() => {
        model.compact(rev);
        return null;
      });
      break;
    }
    case 'yield':
      desc = 'yield';
      s = { ok: null };
      m = { ok: null };
      break;
  }
  return { entry, store: s, model: m, storeRev: store.currentRevision(), modelRev: model.rev, desc };
}

/** Every key's full history visible at every readable revision must match. */
export function compareAllRevisions(store: KvStore, model: Model): void {
  const from = Math.max(model.compacted, 1);
  for (let rev = from; rev <= model.rev; rev++) {
    const got = store.range({ key: Buffer.from([0]), rangeEnd: Buffer.from([0]), revision: rev }).kvs.map(plainKv);
    const want = [...model.states[rev]!.values()].sort((x, y) => (x.key < y.key ? -1 : x.key > y.key ? 1 : 0));
    if (JSON.stringify(got) !== JSON.stringify(want)) {
      throw new Error(`state at revision ${rev} differs:\n store ${JSON.stringify(got)}\n model ${JSON.stringify(want)}`);
    }
  }
}
