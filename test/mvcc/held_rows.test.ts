/**
 * A put's row is held back and inserted with the next ones in one statement (kv_backend.ts): what
 * is held must be in the table before anything reads or writes the tables on the connection, and
 * before every commit, whatever started the commit (the backend's timer, its batch limit, a forced
 * commit, the store's close); and held rows count toward the batch limit when taken.
 */
import path from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { HELD_ROWS_MAX, KvBackend, type KvRow } from '../../src/mvcc/kv_backend.js';
import { KvStore } from '../../src/mvcc/kvstore.js';
import { tmpDir } from './helpers.js';

/** A row whose value is `bytes` long and starts with its revision. */
function row(rev: number, bytes = 16): KvRow {
  const value = Buffer.alloc(bytes, 7);
  value.writeUInt32BE(rev, 0);
  return { rev, key: Buffer.from(`k${rev}`), value, createRev: rev, version: 1, lease: 0, tombstone: false };
}

/** What another connection sees committed: the kv table's row count and highest revision. */
function committed(file: string): { rows: number; maxRev: number } {
  const db = new Database(file, { readonly: true });
  try {
    return db.prepare<[], { rows: number; maxRev: number }>('SELECT count(*) AS rows, coalesce(max(rev), 0) AS maxRev FROM kv').get()!;
  } finally {
    db.close();
  }
}

describe('held kv rows', () => {
  it('refuse a row whose revision is not above the last held one, naming both', () => {
    const be = KvBackend.open(path.join(tmpDir('held-rows-'), 'db'));
    try {
      be.putKv(row(5));
      // The check's message is built only when it fails (kv_backend.ts): it must still say which rows.
      expect(() => be.putKv(row(5))).toThrow('mvcc invariant violated: kv row 5 held after row 5');
      expect(() => be.putKv(row(3))).toThrow('kv row 3 held after row 5');
      be.putKv(row(6));
      expect(be.getKv(6)?.value.readUInt32BE(0)).toBe(6);
    } finally {
      be.close();
    }
  });

  it('are in the table for every read on the connection, cached or not', () => {
    const file = path.join(tmpDir('held-rows-'), 'db');
    const be = KvBackend.open(file);
    try {
      be.putKv(row(1));
      // Larger than a 64th of the row cache's budget: never cached, so only the table has it.
      be.putKv(row(2, 200 * 1024));
      expect(be.cachedKv(2)).toBeUndefined();
      expect(be.getKv(2)?.value.readUInt32BE(0)).toBe(2);
      be.putKv(row(3));
      expect(be.maxRev()).toBe(3);
      be.putKv(row(4));
      expect(be.rowsBetween(1, 10, 10).map((r) => r.rev)).toEqual([1, 2, 3, 4]);
      be.putKv(row(5));
      expect([...be.allRows()].map((r) => r.rev)).toEqual([1, 2, 3, 4, 5]);
      be.putKv(row(6));
      expect([...be.indexRows()].length).toBe(6);
      be.putKv(row(7));
      const raw = be.handle; // hashing reads every table through it
      expect(raw).toBeDefined();
      expect(be.peekKvs(Array.from({ length: 30 }, (_, i) => i + 1)).filter((r) => r !== undefined).length).toBe(7);
      be.putKv(row(8));
      be.deleteKv(8); // a compaction's delete of a row still held
      expect(be.getKv(8)).toBeUndefined();
      expect(committed(file).rows).toBe(0); // nothing committed yet: one open batch
      be.forceCommit();
      expect(committed(file)).toEqual({ rows: 7, maxRev: 7 });
    } finally {
      be.close();
    }
  });

  it('go into every commit, whatever starts it, in statements of HELD_ROWS_MAX and the rest one by one', async () => {
    const file = path.join(tmpDir('held-rows-'), 'db');
    const be = KvBackend.open(file, { batchIntervalMs: 20, batchLimit: 1_000_000 });
    try {
      const n = 2 * HELD_ROWS_MAX + 5;
      for (let rev = 1; rev <= n; rev++) be.putKv(row(rev));
      await new Promise((resolve) => setTimeout(resolve, 200)); // the backend's timer commits
      expect(committed(file)).toEqual({ rows: n, maxRev: n });
    } finally {
      be.close();
    }
  });

  it('count toward the batch limit when taken', () => {
    const file = path.join(tmpDir('held-rows-'), 'db');
    const be = KvBackend.open(file, { batchIntervalMs: 60_000, batchLimit: 10 });
    try {
      for (let rev = 1; rev <= 9; rev++) be.putKv(row(rev));
      be.commitIfFull();
      expect(committed(file).rows).toBe(0);
      be.putKv(row(10));
      be.commitIfFull(); // ten writes taken, none inserted before this commit
      expect(committed(file)).toEqual({ rows: 10, maxRev: 10 });
    } finally {
      be.close();
    }
  });

  it('commit with the consistent index that covers them, and survive the store closing', () => {
    const file = path.join(tmpDir('held-rows-'), 'db');
    const store = KvStore.open({ path: file, batchIntervalMs: 60_000 });
    for (let i = 1; i <= 7; i++) store.apply(i, 1, { put: { key: Buffer.from(`k${i}`), value: Buffer.from(`v${i}`) } });
    store.backend.forceCommit();
    const db = new Database(file, { readonly: true });
    const ci = db.prepare<[], number>("SELECT value FROM meta WHERE name = 'consistent_index'").pluck().get();
    db.close();
    expect(ci).toBe(7);
    expect(committed(file).rows).toBe(7);
    for (let i = 8; i <= 10; i++) store.apply(i, 1, { put: { key: Buffer.from(`k${i}`), value: Buffer.from(`v${i}`) } });
    store.close();
    expect(committed(file).rows).toBe(10);
    const again = KvStore.open({ path: file });
    try {
      expect(again.range({ key: Buffer.from('k'), rangeEnd: Buffer.from('l') }).kvs.map((kv) => kv.key.toString())).toEqual(['k1', 'k10', 'k2', 'k3', 'k4', 'k5', 'k6', 'k7', 'k8', 'k9']);
    } finally {
      again.close();
    }
  });
});
