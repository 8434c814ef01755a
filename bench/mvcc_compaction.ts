/**
 * Compaction of 1,000,000 revisions (100,000 keys × 10 revisions) while
 * serving reads: a client issues a get every millisecond; its latency counts
 * from issue to answer, so time spent waiting behind a compaction batch counts.
 *   npx tsx bench/mvcc_compaction.ts [--keys=N] [--revs=R] [--batch=K] [--sleep=MS]
 */
import fs from 'node:fs';
import path from 'node:path';
import { KvStore } from '../src/mvcc/kvstore.js';
import { fmtUs, intFlag, key, percentile, tmpDir } from './mvcc_util.js';

const nKeys = intFlag('keys', 100_000, 100_000);
const revsPerKey = intFlag('revs', 10, 10);
const batchKeys = intFlag('batch', 1000, 1000);
const sleepMs = intFlag('sleep', 10, 10);

const dir = tmpDir();
const store = KvStore.open({ path: path.join(dir, 'db.sqlite'), compactionBatchKeys: batchKeys, compactionSleepMs: sleepMs });
const value = Buffer.alloc(32, 'v');
let t0 = performance.now();
let index = 0;
for (let r = 0; r < revsPerKey; r++) for (let i = 0; i < nKeys; i++) store.apply(++index, 1, { put: { key: key(i), value } });
store.backend.forceCommit();
const rows = (): number => store.db.prepare('SELECT count(*) FROM kv').pluck().get() as number;
console.log(`loaded ${(nKeys * revsPerKey).toLocaleString('en-US')} revisions in ${((performance.now() - t0) / 1000).toFixed(1)} s`);

async function readLoop(stop: () => boolean): Promise<number[]> {
  const lat: number[] = [];
  while (!stop()) {
    const issued = performance.now();
    await new Promise((r) => setTimeout(r, 1));
    const resp = store.range({ key: key(Math.floor(Math.random() * nKeys)) });
    if (resp.count !== 1) throw new Error('read miss');
    // Latency beyond the 1 ms the client waited on purpose.
    lat.push(Math.max(0, performance.now() - issued - 1));
  }
  return lat.sort((a, b) => a - b);
}

function report(name: string, lat: number[]): void {
  console.log(
    `${name.padEnd(28)} reads ${String(lat.length).padStart(6)}  p50 ${fmtUs(percentile(lat, 50)).padStart(10)}  p99 ${fmtUs(percentile(lat, 99)).padStart(10)}  max ${fmtUs(lat[lat.length - 1] ?? NaN).padStart(10)}`,
  );
}

const baseEnd = performance.now() + 2000;
report('reads, idle store:', await readLoop(() => performance.now() > baseEnd));

const rowsBefore = rows();
let done = false;
t0 = performance.now();
const compaction = store.compact(store.currentRevision()).then(() => {
  done = true;
});
const during = await readLoop(() => done);
await compaction;
const ms = performance.now() - t0;
report('reads during compaction:', during);
console.log(`compaction: ${rowsBefore.toLocaleString('en-US')} → ${rows().toLocaleString('en-US')} rows in ${(ms / 1000).toFixed(1)} s (batches of ${batchKeys} keys, ${sleepMs} ms pause)`);
store.close();
fs.rmSync(dir, { recursive: true, force: true });
