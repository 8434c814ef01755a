/** rangeAsync: the same answers as range, one revision throughout, other work between its slices, compaction held only when needed. */
import fs from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { ErrClosed, ErrCompacted, ErrFutureRev } from '../../src/mvcc/errors.js';
import type { KvStore, KvStoreOptions } from '../../src/mvcc/kvstore.js';
import { type RangeRequest, type RequestOp, SortOrder, SortTarget, type TxnRequest, type TxnResponse } from '../../src/mvcc/types.js';
import { b, macrotask, openStore, plainKv, seedFor, tmpDir } from './helpers.js';
import { mulberry32 } from '../prng.js';

const cleanup: (() => void)[] = [];
afterEach(() => {
  for (const f of cleanup.splice(0).reverse()) f();
});

function fresh(opts: Partial<KvStoreOptions> = {}): KvStore {
  const dir = tmpDir();
  const kv = openStore(dir, opts);
  cleanup.push(() => fs.rmSync(dir, { recursive: true, force: true }));
  cleanup.push(() => {
    if (!kv.isClosed) kv.close();
  });
  return kv;
}

const key = (i: number): string => `k${String(i).padStart(3, '0')}`;

function plain(r: { kvs: Parameters<typeof plainKv>[0][]; more: boolean; count: number }) {
  return { kvs: r.kvs.map(plainKv), more: r.more, count: r.count };
}

/** A txn response with plain kvs (comparable with toEqual). */
function plainTxn(r: TxnResponse): unknown {
  return {
    succeeded: r.succeeded,
    responses: r.responses.map((op) =>
      op.responseRange ? { range: plain(op.responseRange) } : op.responseTxn ? { txn: plainTxn(op.responseTxn) } : {},
    ),
  };
}

describe('rangeAsync', () => {
  it('answers every kind of range exactly as range does (slices of a few keys)', async () => {
    const seed = seedFor('range_async.same');
    const rand = mulberry32(seed);
    const kv = fresh({ rangeRead: { keysPerTurn: 4, rowsPerTurn: 3 } });
    for (let i = 0; i < 300; i++) {
      const k = key(Math.floor(rand() * 60));
      if (rand() < 0.15) kv.deleteRange({ key: b(k) });
      else kv.put({ key: b(k), value: b(`v${i}`) });
    }
    const cur = kv.currentRevision();
    const pick = <T>(xs: T[]): T => xs[Math.floor(rand() * xs.length)]!;
    for (let n = 0; n < 150; n++) {
      const lo = Math.floor(rand() * 60);
      const req: RangeRequest = { key: b(key(lo)) };
      const shape = rand();
      if (shape < 0.7) req.rangeEnd = b(key(lo + 1 + Math.floor(rand() * 40)));
      else if (shape < 0.85) req.rangeEnd = Buffer.from([0]);
      if (rand() < 0.3) req.limit = 1 + Math.floor(rand() * 10);
      if (rand() < 0.3) req.revision = 1 + Math.floor(rand() * cur);
      if (rand() < 0.2) req.sortOrder = pick([SortOrder.ASCEND, SortOrder.DESCEND]);
      if (rand() < 0.2) req.sortTarget = pick([SortTarget.KEY, SortTarget.VERSION, SortTarget.CREATE, SortTarget.MOD, SortTarget.VALUE]);
      if (rand() < 0.1) req.countOnly = true;
      if (rand() < 0.1) req.keysOnly = true;
      if (rand() < 0.1) req.minModRevision = Math.floor(rand() * cur);
      if (rand() < 0.1) req.maxCreateRevision = Math.floor(rand() * cur);
      const got = await kv.rangeAsync(req);
      expect(plain(got), JSON.stringify({ seed, n, req })).toEqual(plain(kv.range(req)));
      expect(got.revision).toBe(cur);
    }
    await expect(kv.rangeAsync({ key: b('k'), rangeEnd: b('l'), revision: cur + 1 })).rejects.toBeInstanceOf(ErrFutureRev);
    await kv.compact(cur - 5);
    await expect(kv.rangeAsync({ key: b('k'), rangeEnd: b('l'), revision: cur - 6 })).rejects.toBeInstanceOf(ErrCompacted);
  });

  it('stays at its revision while writes and a compaction above it run between its slices', async () => {
    const kv = fresh({ rangeRead: { keysPerTurn: 10, rowsPerTurn: 10 } });
    for (let v = 0; v < 2; v++) for (let i = 0; i < 200; i++) kv.put({ key: b(key(i)), value: b(`v${v}.${i}`) });
    const req = { key: b('k'), rangeEnd: b('l') };
    const expected = plain(kv.range(req));
    const rev0 = kv.currentRevision();

    const order: string[] = [];
    const read = kv.rangeAsync(req).then((r) => {
      order.push('read');
      return r;
    });
    let compaction: Promise<void> | undefined;
    let writesDuringRead = 0;
    for (let i = 0; !order.includes('read'); i++) {
      await macrotask();
      if (order.includes('read')) break;
      // Changes to keys already read, keys not yet read, and new keys inside the range.
      kv.put({ key: b(key(i % 200)), value: b(`new${i}`) });
      kv.deleteRange({ key: b(key(199 - (i % 200))) });
      kv.put({ key: b(`k${i}x`), value: b('created') });
      writesDuringRead++;
      if (i === 2) compaction = kv.compact(kv.currentRevision()).then(() => void order.push('compaction'));
    }
    const got = await read;
    await compaction;
    // Progress: the read took many turns and other writes were applied in between...
    expect(writesDuringRead).toBeGreaterThan(5);
    // ...yet it answers the state at its start, and the compaction above it waited for it.
    expect(got.revision).toBe(rev0);
    expect(plain(got)).toEqual(expected);
    expect(order).toEqual(['read', 'compaction']);
    expect(() => kv.range({ ...req, revision: rev0 })).toThrow(ErrCompacted);
  });

  it('does not hold back a compaction at or below its revision', async () => {
    const kv = fresh({ rangeRead: { keysPerTurn: 1, rowsPerTurn: 1 }, compactionBatchKeys: 10_000 });
    for (let v = 0; v < 3; v++) for (let i = 0; i < 200; i++) kv.put({ key: b(key(i)), value: b(`v${v}.${i}`) });
    const req = { key: b('k'), rangeEnd: b('l') };
    const expected = plain(kv.range(req));
    const order: string[] = [];
    const read = kv.rangeAsync(req).then((r) => {
      order.push('read');
      return r;
    });
    await kv.compact(kv.currentRevision() - 1);
    order.push('compaction');
    expect(plain(await read)).toEqual(expected);
    expect(order).toEqual(['compaction', 'read']);
  });

  it('stops reading once its signal aborts (the client went away) and releases its pin', async () => {
    const kv = fresh({ rangeRead: { keysPerTurn: 5, rowsPerTurn: 5 } });
    for (let v = 0; v < 2; v++) for (let i = 0; i < 100; i++) kv.put({ key: b(key(i)), value: b(`v${v}`) });
    const abort = new AbortController();
    const read = kv.rangeAsync({ key: b('k'), rangeEnd: b('l') }, abort.signal);
    abort.abort(new Error('client canceled'));
    await expect(read).rejects.toThrow('client canceled');
    // A compaction above the aborted read's revision is not held back by it any more.
    kv.put({ key: b('k000'), value: b('after') });
    await kv.compact(kv.currentRevision());
  });

  it('a store closed mid-read rejects the read', async () => {
    const kv = fresh({ rangeRead: { keysPerTurn: 5, rowsPerTurn: 5 } });
    for (let i = 0; i < 100; i++) kv.put({ key: b(key(i)), value: b('v') });
    const read = kv.rangeAsync({ key: b('k'), rangeEnd: b('l') });
    kv.close();
    await expect(read).rejects.toBeInstanceOf(ErrClosed);
  });
});

describe('txnReadOnlyAsync', () => {
  it('answers read-only txns (compares, nested txns, older revisions) exactly as txn does', async () => {
    const seed = seedFor('range_async.txn');
    const rand = mulberry32(seed);
    const kv = fresh({ rangeRead: { keysPerTurn: 4, rowsPerTurn: 3 } });
    for (let i = 0; i < 200; i++) kv.put({ key: b(key(Math.floor(rand() * 40))), value: b(`v${i}`) });
    const cur = kv.currentRevision();
    const range = (): RequestOp => {
      const lo = Math.floor(rand() * 40);
      const r: RangeRequest = { key: b(key(lo)), rangeEnd: b(key(lo + 1 + Math.floor(rand() * 20))) };
      if (rand() < 0.3) r.revision = 1 + Math.floor(rand() * cur);
      if (rand() < 0.3) r.limit = 1 + Math.floor(rand() * 5);
      return { requestRange: r };
    };
    const txn = (depth: number): TxnRequest => {
      const branch = (): RequestOp[] =>
        Array.from({ length: Math.floor(rand() * 3) }, () => (depth < 2 && rand() < 0.3 ? { requestTxn: txn(depth + 1) } : range()));
      return {
        compare: rand() < 0.7 ? [{ key: b(key(Math.floor(rand() * 40))), target: 0, result: Math.floor(rand() * 4), version: Math.floor(rand() * 4) }] : [],
        success: branch(),
        failure: branch(),
      };
    };
    for (let n = 0; n < 80; n++) {
      const req = txn(0);
      const got = await kv.txnReadOnlyAsync(req);
      expect(plainTxn(got), JSON.stringify({ seed, n })).toEqual(plainTxn(kv.txn(req)));
      expect(got.revision).toBe(cur);
    }
    await expect(kv.txnReadOnlyAsync({ success: [{ requestRange: { key: b('k'), rangeEnd: b('l'), revision: cur + 1 } }] })).rejects.toBeInstanceOf(ErrFutureRev);
  });

  it('a compaction scheduled while its first range is read does not remove what a later range needs', async () => {
    const kv = fresh({ rangeRead: { keysPerTurn: 10, rowsPerTurn: 10 }, compactionBatchKeys: 10_000 });
    for (let v = 0; v < 3; v++) for (let i = 0; i < 100; i++) kv.put({ key: b(key(i)), value: b(`v${v}.${i}`) });
    const old = kv.currentRevision() - 150; // in the middle of the second round of writes
    const req: TxnRequest = {
      success: [{ requestRange: { key: b('k'), rangeEnd: b('l') } }, { requestRange: { key: b('k'), rangeEnd: b('l'), revision: old } }],
    };
    const expected = plainTxn(kv.txn(req));
    const order: string[] = [];
    const read = kv.txnReadOnlyAsync(req).then((r) => {
      order.push('read');
      return r;
    });
    await macrotask();
    // At the txn's own revision: nothing the first range reads, but the second's history.
    const compaction = kv.compact(kv.currentRevision()).then(() => void order.push('compaction'));
    expect(plainTxn(await read)).toEqual(expected);
    await compaction;
    expect(order).toEqual(['read', 'compaction']);
  });
});
