/**
 * Restart tests: the store is closed cleanly or crashed (uncommitted batch
 * lost) at random points, reopened, and the Raft log above its consistent
 * index re-applied; the result must match the reference model exactly.
 * Also: a staged compaction interrupted by a crash resumes where it stopped.
 */
import fs from 'node:fs';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { KvStore } from '../../src/mvcc/kvstore.js';
import type { KvOp } from '../../src/mvcc/types.js';
import { b, macrotask, openStore, seedFor, tmpDir } from './helpers.js';
import { Model } from './model.js';
import { compareAllRevisions, opGen, runOp } from './ops.js';

const RUNS = Number(process.env.MVCC_RESTART_RUNS ?? 30);

describe('restart', () => {
  it('re-applying the log above the consistent index after close or crash matches the model', async () => {
    const seed = seedFor('restart.property');
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.oneof({ weight: 8, arbitrary: opGen }, { weight: 1, arbitrary: fc.constantFrom('close' as const, 'crash' as const) }), {
          minLength: 10,
          maxLength: 80,
        }),
        fc.integer({ min: 1, max: 20 }),
        async (script, batchLimit) => {
          const dir = tmpDir();
          // Commits happen only by batch size (and forced ones), so crashes lose real work.
          const open = (): KvStore => openStore(dir, { compactionBatchKeys: 2, batchLimit, batchIntervalMs: 3_600_000 });
          let store = open();
          const model = new Model();
          const log: { index: number; entry: KvOp }[] = [];
          let index = 0;
          try {
            for (const step of script) {
              if (step === 'close' || step === 'crash') {
                if (step === 'close') store.close();
                else store.crashForTest();
                store = open();
                const ci = store.consistentIndex();
                expect(ci).toBeLessThanOrEqual(index);
                for (const e of log) {
                  if (e.index <= ci) {
                    expect(store.apply(e.index, 1, e.entry)).toBeNull();
                    continue;
                  }
                  expect(store.apply(e.index, 1, e.entry)).not.toBeNull();
                }
                expect(store.currentRevision()).toBe(model.rev);
                continue;
              }
              const r = runOp(step, store, model, ++index);
              expect(r.store, r.desc).toEqual(r.model);
              if (r.entry) log.push({ index, entry: r.entry });
              else index--; // reads are not log entries
              if (step.kind === 'yield') await macrotask();
            }
            compareAllRevisions(store, model);
            await store.compactionDone();
            compareAllRevisions(store, model);
          } finally {
            store.close();
            fs.rmSync(dir, { recursive: true, force: true });
          }
        },
      ),
      { seed, numRuns: RUNS },
    );
  }, 120_000);

  it('a staged compaction interrupted by a crash resumes from its persisted cursor', async () => {
    const dir = tmpDir();
    const opts = { compactionBatchKeys: 10, batchLimit: 50, batchIntervalMs: 3_600_000 };
    let store = openStore(dir, opts);
    let index = 0;
    for (let round = 0; round < 3; round++) {
      for (let k = 0; k < 100; k++) store.apply(++index, 1, { put: { key: b(`k${String(k).padStart(3, '0')}`), value: b(`v${round}`) } });
    }
    for (let k = 0; k < 100; k += 10) store.apply(++index, 1, { deleteRange: { key: b(`k${String(k).padStart(3, '0')}`) } });
    const rowsBefore = (store.db.prepare('SELECT count(*) FROM kv').pluck().get() as number);
    expect(rowsBefore).toBe(310);
    const compactAt = store.currentRevision();
    const done = store.compact(compactAt);
    // Let a few batches run, then crash.
    for (let i = 0; i < 4; i++) await macrotask();
    store.backend.forceCommit();
    const cursor = store.db.prepare("SELECT value FROM meta WHERE name = 'compact_cursor_key'").pluck().get() as Buffer;
    expect(cursor).toBeInstanceOf(Buffer);
    store.crashForTest();
    await done; // the interrupted job stops at its next batch boundary

    store = openStore(dir, opts);
    const rowsAtRestart = store.db.prepare('SELECT count(*) FROM kv').pluck().get() as number;
    // Progress survived the crash: some but not all old revisions were already gone.
    expect(rowsAtRestart).toBeLessThan(rowsBefore);
    expect(rowsAtRestart).toBeGreaterThan(90);
    expect(store.compactRevision()).toBe(compactAt);
    await store.compactionDone();
    // Live keys keep their latest revision; deleted keys vanish with their tombstones.
    expect(store.db.prepare('SELECT count(*) FROM kv').pluck().get()).toBe(90);
    expect(store.db.prepare("SELECT value FROM meta WHERE name = 'finished_compact_rev'").pluck().get()).toBe(compactAt);
    const r = store.range({ key: b('k'), rangeEnd: b('l') });
    expect(r.count).toBe(90);
    expect(r.kvs.every((kv) => kv.version === 3 && Buffer.from(kv.value).toString() === 'v2')).toBe(true);
    expect(() => store.range({ key: b('k000'), revision: compactAt - 1 })).toThrow('required revision has been compacted');
    store.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });
});
