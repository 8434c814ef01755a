/**
 * Range reads spread over several event-loop turns. etcd serves a large range from a read
 * transaction without stalling other clients; here a read of 100,000 keys done in one turn held
 * the event loop for seconds. The read is sliced: each turn looks at a bounded number of index
 * keys and reads a bounded number of rows, then yields (setImmediate), so other requests, applies
 * and heartbeats run in between.
 *
 * Consistency: the whole read is at one main revision, `atRev`, fixed when it starts.
 * - Writes between slices only add revisions above atRev: invisible at atRev.
 * - A compaction at or below atRev removes nothing visible at atRev.
 * - A compaction above atRev could remove the rows the read still needs: the read pins atRev and
 *   such compactions wait until it ends (reads starting after the compaction was scheduled are at
 *   or above it, so they never hold it back).
 * - A snapshot install replaces the whole state: the read reports it (null) and is restarted.
 */

import type { KvBackend } from './kv_backend.js';
import { ErrCompacted, ErrFutureRev, invariant } from './errors.js';
import { finishRange, rangePlan, rowToKv, visitPath } from './kvstore_txn.js';
import type { TreeIndex } from './tree_index.js';
import { type KeyValue, numOf, type RangeRequest, type RangeResponse, type ResponseOp, type TxnRequest, type TxnResponse } from './types.js';

export interface RangeReadOptions {
  /** Index keys looked at per turn (counting is cheap). */
  keysPerTurn: number;
  /** Rows read from the backend per turn (~2–5 µs each). */
  rowsPerTurn: number;
}

export const DEFAULT_RANGE_READ: RangeReadOptions = { keysPerTurn: 10_000, rowsPerTurn: 1_000 };

export interface RangeReadTarget {
  readonly index: TreeIndex;
  readonly backend: KvBackend;
  readonly currentRev: number;
  readonly compactMainRev: number;
  /** Holds compactions above `rev` until the returned release is called. */
  pinRead(rev: number): () => void;
  /** False once the state the read started on was replaced (snapshot); throws if the store closed. */
  stillValid(): boolean;
}

export interface RangeReadResult extends RangeResponse {
  /** The store's revision when the read started: the response header's (etcd's rr.Rev). */
  revision: number;
  /** Every kv went to the read's spill (the read took more than one turn): `kvs` is empty, `more` unknown here. */
  spilled?: true;
}

/**
 * Takes a long range's kvs as they are read, so that the read does not hold them all: a range
 * over millions of keys built one KeyValue object (and two Buffer views) per row, ~400 bytes of
 * JavaScript heap each, and a range of 9,000,000 keys ran a member out of its 4 GB heap
 * (test/e2e/huge_range.test.ts). A read given a spill keeps a range it finishes within its first
 * turn as before (the common, small one); once it has to yield, it hands every kv read so far to
 * the spill, and every later one, and answers with none. Only for a request whose answer is its
 * kvs in key order, cut at its limit (no filters, no sort but by key ascending: `spillable`).
 */
export interface RangeSpill {
  /** The read starts, or starts again (a snapshot install restarted it): forget what was taken. */
  reset(): void;
  /** The next kvs in key order (the read's limit plus one at most, as an unspilled read keeps). */
  take(kvs: readonly KeyValue[]): void;
}

/** Whether a range's answer is its kvs as read, in key order, cut at its limit: what a spill can take. */
export function spillable(r: RangeRequest): boolean {
  const filtered = numOf(r.minModRevision) !== 0 || numOf(r.maxModRevision) !== 0 || numOf(r.minCreateRevision) !== 0 || numOf(r.maxCreateRevision) !== 0;
  // finishRange sorts only for another target or an explicit descending order; key ascending is the read's own order.
  const sorted = numOf(r.sortTarget) !== 0 || numOf(r.sortOrder) === 2;
  return !filtered && !sorted;
}

function nextTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/**
 * etcd's Range (rangeKeys plus the applier's filters, sort and limit) at one revision, sliced
 * over turns. A range done within the first slice answers without yielding. Resolves to null if
 * the store's state was replaced mid-read (the caller restarts it); rejects with the signal's
 * reason once `signal` aborts.
 */
export async function readRange(
  t: RangeReadTarget,
  req: RangeRequest,
  opts: RangeReadOptions,
  signal?: AbortSignal,
  spill?: RangeSpill,
): Promise<RangeReadResult | null> {
  invariant(opts.keysPerTurn > 0 && opts.rowsPerTurn > 0, 'range read slices must be positive');
  invariant(spill === undefined || spillable(req), 'a spill given for a range whose answer needs all its kvs at once');
  const plan = rangePlan(req);
  const curRev = t.currentRev;
  let atRev = plan.read.rev;
  if (atRev > curRev) throw new ErrFutureRev();
  if (atRev <= 0) atRev = curRev;
  if (atRev < t.compactMainRev) throw new ErrCompacted();
  const want = plan.read.countOnly ? 0 : plan.read.limit > 0 ? plan.read.limit : Number.POSITIVE_INFINITY;
  let kvs: KeyValue[] = [];
  /** kvs handed to the spill so far. */
  let spilled = 0;
  let count = 0;
  spill?.reset();
  const release = t.pinRead(atRev);
  try {
    let after: string | null = null;
    for (;;) {
      const revs: number[] = [];
      after = t.index.visitRangeSlice(plan.range, atRev, after, opts.keysPerTurn, (_key, rev) => {
        count++;
        if (spilled + kvs.length + revs.length < want) revs.push(rev);
        return revs.length < opts.rowsPerTurn;
      });
      for (const row of t.backend.peekKvs(revs)) {
        invariant(row !== undefined && !row.tombstone, 'index revision missing from backend');
        kvs.push(rowToKv(row));
      }
      if (after === null) break;
      if (spill !== undefined && kvs.length > 0) {
        spill.take(kvs);
        spilled += kvs.length;
        kvs = [];
      }
      await nextTurn();
      // The client went away: stop reading for nobody.
      signal?.throwIfAborted();
      if (!t.stillValid()) return null;
    }
  } finally {
    release();
  }
  if (spill !== undefined && spilled > 0) {
    spill.take(kvs);
    return { kvs: [], more: false, count, revision: curRev, spilled: true };
  }
  return { ...finishRange(plan, { kvs, count }), revision: curRev };
}

export interface TxnReadResult extends TxnResponse {
  /** The store's revision when the txn started: the response header's. */
  revision: number;
}

/**
 * A read-only txn's taken branches (`path`, decided at the target's revision) read with
 * readRange, every range at the txn's revision or its own older one. The oldest revision any of
 * them reads is pinned for the whole txn, so a compaction scheduled while an earlier range is
 * read cannot remove what a later one needs. Null if the state was replaced mid-read.
 */
export async function readTxn(
  t: RangeReadTarget,
  rt: TxnRequest,
  path: boolean[],
  opts: RangeReadOptions,
  signal?: AbortSignal,
): Promise<TxnReadResult | null> {
  let oldest = t.currentRev;
  visitPath(rt, path, { i: 0 }, (op) => {
    const rev = numOf(op.requestRange?.revision);
    if (rev > 0 && rev < oldest) oldest = rev;
  });
  const release = t.pinRead(oldest);
  try {
    const at = { i: 0 };
    const run = async (txn: TxnRequest): Promise<TxnResponse | null> => {
      const succeeded = path[at.i++];
      invariant(succeeded !== undefined, 'txn path shorter than the txn');
      const responses: ResponseOp[] = [];
      for (const op of (succeeded ? txn.success : txn.failure) ?? []) {
        invariant(!op.requestPut && !op.requestDeleteRange, 'readTxn of a txn that writes');
        if (op.requestRange) {
          const r = await readRange(t, op.requestRange, opts, signal);
          if (r === null) return null;
          responses.push({ responseRange: { header: { revision: t.currentRev }, kvs: r.kvs, more: r.more, count: r.count } });
        } else if (op.requestTxn) {
          const inner = await run(op.requestTxn);
          if (inner === null) return null;
          responses.push({ responseTxn: { header: {}, ...inner } });
        } else {
          responses.push({});
        }
      }
      return { succeeded, responses };
    };
    const response = await run(rt);
    return response === null ? null : { ...response, revision: t.currentRev };
  } finally {
    release();
  }
}
