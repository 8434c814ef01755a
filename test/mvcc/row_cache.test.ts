/**
 * The row cache (src/mvcc/row_cache.ts) on its own: its written part (ascending revisions,
 * bisected) and its read part share one budget and one oldest-first order; a cached row is always
 * the row last given for its revision; deleted rows never come back; the bytes it counts are the
 * bytes of what it serves; and dead slots stay bounded however many rows compaction deletes.
 */
import { describe, expect, it } from 'vitest';
import { type CachedRow, RowCache, rowCost } from '../../src/mvcc/row_cache.js';
import { mulberry32 } from '../prng.js';
import { seedFor } from './helpers.js';

interface Row extends CachedRow {
  readonly tag: number;
}

function row(rev: number, valueBytes: number, tag = 0): Row {
  return { rev, key: { byteLength: 8 }, value: { byteLength: valueBytes }, tag };
}

const COST_100 = rowCost(row(1, 100));

describe('row cache', () => {
  it('keeps exactly the newest written rows that fit, oldest out first', () => {
    const cache = new RowCache<Row>(COST_100 * 100);
    for (let rev = 1; rev <= 1000; rev++) cache.set(row(rev * 1024, 100));
    expect(cache.size).toBe(100);
    expect(cache.bytes).toBe(COST_100 * 100);
    for (let rev = 1; rev <= 1000; rev++) expect(cache.get(rev * 1024) !== undefined).toBe(rev > 900);
    expect(cache.get(1000 * 1024 + 1)).toBeUndefined();
    expect(cache.get(0)).toBeUndefined();
  });

  it('gives a row read back from the table its turn in the same order as written ones', () => {
    const cache = new RowCache<Row>(COST_100 * 100);
    for (let rev = 1; rev <= 200; rev++) cache.set(row(rev, 100));
    expect(cache.get(5)).toBeUndefined();
    expect(cache.get(101)).toBeDefined();
    cache.set(row(5, 100, 7)); // a read of an evicted revision caches it again
    expect(cache.get(5)?.tag).toBe(7);
    expect(cache.get(101)).toBeUndefined(); // it took the place of the oldest
    for (let rev = 201; rev <= 299; rev++) cache.set(row(rev, 100));
    expect(cache.get(5)?.tag).toBe(7); // 99 writes later it is still there...
    cache.set(row(300, 100));
    expect(cache.get(5)).toBeUndefined(); // ...and the 100th evicts it
    expect(cache.size).toBe(100);
  });

  it('never replaces a cached revision and skips rows above a 64th of the budget', () => {
    const cache = new RowCache<Row>(COST_100 * 64);
    cache.set(row(10, 100, 1));
    cache.set(row(10, 100, 2));
    expect(cache.get(10)?.tag).toBe(1);
    cache.set(row(20, 10_000));
    expect(cache.get(20)).toBeUndefined();
    cache.set(row(15, 100, 3)); // below the highest written: the read part
    expect(cache.get(15)?.tag).toBe(3);
    expect(cache.size).toBe(2);
  });

  // 300 rows: the written ring wraps around its first capacity; 5,000: it grows while wrapped.
  it.each([300, 5000])('matches a model over a seeded run of writes, reads, deletes and lookups (budget %i rows)', (rows) => {
    const seed = seedFor('row_cache.model');
    const rnd = mulberry32(seed);
    const budget = COST_100 * rows;
    const cache = new RowCache<Row>(budget);
    /** What the table holds: a row per revision not deleted. */
    const table = new Map<number, Row>();
    let next = 1;
    let tag = 0;
    for (let step = 0; step < 40_000; step++) {
      const p = rnd();
      if (p < 0.5) {
        const r = row(next * 1024 + Math.floor(rnd() * 3), 50 + Math.floor(rnd() * 200), ++tag);
        next++;
        table.set(r.rev, r);
        cache.set(r);
      } else if (p < 0.7 && table.size > 0) {
        // A read of an older revision: the cache or the table, then cached (as getKv does).
        const revs = [...table.keys()];
        const rev = revs[Math.floor(rnd() * Math.min(revs.length, 2000))]!;
        const hit = cache.get(rev) ?? table.get(rev)!;
        expect(hit).toBe(table.get(rev));
        cache.set(hit);
      } else if (p < 0.85 && table.size > 0) {
        // Compaction deletes mostly old revisions.
        const revs = [...table.keys()];
        const rev = revs[Math.floor(rnd() * Math.min(revs.length, 500))]!;
        table.delete(rev);
        cache.delete(rev);
        expect(cache.get(rev)).toBeUndefined();
      } else {
        const rev = Math.floor(rnd() * (next + 5)) * 1024;
        const got = cache.get(rev);
        if (got !== undefined) expect(got).toBe(table.get(rev));
      }
      if (step % 997 === 0) {
        let bytes = 0;
        let size = 0;
        for (const [rev, r] of table) {
          const got = cache.get(rev);
          if (got === undefined) continue;
          expect(got).toBe(r);
          bytes += rowCost(r);
          size++;
        }
        expect(cache.bytes).toBe(bytes);
        expect(cache.size).toBe(size);
        expect(cache.bytes).toBeLessThanOrEqual(budget);
      }
    }
  });

  it('grows its written ring while it wraps around, keeping every row in order', () => {
    const cache = new RowCache<Row>(COST_100 * 1000);
    let rev = 0;
    for (; rev < 1500; rev++) cache.set(row(rev + 1, 100, rev + 1)); // 1,000 held, the oldest 500 out: wrapped
    // Half the held rows deleted (dead slots, room in the budget), then as many new rows: more
    // slots than the ring had, so it grows with its head mid-ring.
    for (let r = 502; r <= 1500; r += 2) cache.delete(r);
    for (; rev < 2000; rev++) cache.set(row(rev + 1, 100, rev + 1));
    expect(cache.size).toBe(1000);
    expect(cache.slotsHeld).toBe(1500);
    for (let r = 1; r <= 2000; r++) {
      const held = (r > 500 && r <= 1500 && r % 2 === 1) || r > 1500;
      expect(cache.get(r)?.tag).toBe(held ? r : undefined);
    }
  });

  it('keeps dead slots bounded when compaction deletes behind a row that stays', () => {
    const cache = new RowCache<Row>(COST_100 * 1000);
    cache.set(row(1, 100)); // the latest revision of a key no one writes again: compaction keeps it
    for (let rev = 2; rev <= 200_000; rev++) {
      cache.set(row(rev, 100));
      cache.delete(rev - 1 === 1 ? -1 : rev - 1);
    }
    expect(cache.size).toBe(2);
    expect(cache.get(1)).toBeDefined();
    expect(cache.get(200_000)).toBeDefined();
    expect(cache.slotsHeld).toBeLessThan(10_000);
  });

  it('keeps the read queue bounded when the same rows are read, deleted and read again', () => {
    const cache = new RowCache<Row>(COST_100 * 1000);
    cache.set(row(1_000_000, 100));
    for (let i = 0; i < 100_000; i++) {
      const rev = 1 + (i % 50);
      cache.set(row(rev, 100));
      if (i % 2 === 0) cache.delete(rev);
    }
    expect(cache.size).toBeLessThanOrEqual(51);
    expect(cache.slotsHeld).toBeLessThan(10_000);
  });
});
