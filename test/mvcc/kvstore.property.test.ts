/**
 * Property tests: random sequences of put/delete/txn/compact/range applied to
 * the store and to the reference model must produce the same responses,
 * errors and revisions; afterwards every readable revision must hold the same
 * key space. Compaction runs staged (batches of 2 keys) and interleaves with
 * the operations at the 'yield' steps.
 */
import fs from 'node:fs';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Model } from './model.js';
import { compareAllRevisions, opGen, runOp } from './ops.js';
import { macrotask, openStore, seedFor, tmpDir } from './helpers.js';

const RUNS = Number(process.env.MVCC_PROP_RUNS ?? 60);

describe('kv store vs reference model', () => {
  it('matches the model on random operation sequences', async () => {
    const seed = seedFor('kvstore.property');
    await fc.assert(
      fc.asyncProperty(fc.array(opGen, { minLength: 10, maxLength: 80 }), async (ops) => {
        const dir = tmpDir();
        const store = openStore(dir, { compactionBatchKeys: 2 });
        const model = new Model();
        try {
          let index = 0;
          for (const op of ops) {
            const step = runOp(op, store, model, ++index);
            expect(step.store, step.desc).toEqual(step.model);
            expect(step.storeRev, step.desc).toBe(step.modelRev);
            // etcd_debugging_mvcc_keys_total: the keys alive at the current revision.
            expect(store.index.aliveCount, step.desc).toBe(model.stateAt(0).size);
            if (op.kind === 'yield') await macrotask();
          }
          compareAllRevisions(store, model);
          await store.compactionDone();
          compareAllRevisions(store, model);
          expect(store.index.aliveCount).toBe(model.stateAt(0).size);
        } finally {
          store.close();
          fs.rmSync(dir, { recursive: true, force: true });
        }
      }),
      { seed, numRuns: RUNS },
    );
  }, 120_000);
});
