/**
 * Range latency over a large key space (default 200,000 keys; `--full`: 1,000,000).
 *   npx tsx bench/mvcc_range.ts [--full] [--keys=N] [--ops=N]
 */
import fs from 'node:fs';
import path from 'node:path';
import { KvStore } from '../src/mvcc/kvstore.js';
import type { RangeRequest } from '../src/mvcc/types.js';
import { fmtUs, intFlag, key, percentile, tmpDir } from './mvcc_util.js';

const nKeys = intFlag('keys', 200_000, 1_000_000);
const ops = intFlag('ops', 5_000, 10_000);

const dir = tmpDir();
const store = KvStore.open({ path: path.join(dir, 'db.sqlite') });
const value = Buffer.alloc(64, 'v');
let t0 = performance.now();
for (let i = 0; i < nKeys; i++) store.apply(i + 1, 1, { put: { key: key(i), value } });
store.backend.forceCommit();
console.log(`loaded ${nKeys.toLocaleString('en-US')} keys in ${((performance.now() - t0) / 1000).toFixed(1)} s`);

function measure(name: string, n: number, req: (i: number) => RangeRequest, check: (count: number) => void): void {
  const lat: number[] = [];
  for (let i = 0; i < n; i++) {
    const r = req(i);
    const s = performance.now();
    const resp = store.range(r);
    lat.push(performance.now() - s);
    check(resp.kvs.length + resp.count * 0);
  }
  lat.sort((a, b) => a - b);
  console.log(`${name.padEnd(44)} p50 ${fmtUs(percentile(lat, 50)).padStart(12)}  p99 ${fmtUs(percentile(lat, 99)).padStart(12)}  (${n} ops)`);
}

const rnd = (): number => Math.floor(Math.random() * nKeys);
measure('get one key', ops, () => ({ key: key(rnd()) }), (c) => { if (c !== 1) throw new Error('miss'); });
measure('range 100 keys, limit 10 (count all 100)', ops, () => {
  const i = Math.min(rnd(), nKeys - 101);
  return { key: key(i), rangeEnd: key(i + 100), limit: 10 };
}, (c) => { if (c !== 10) throw new Error('bad'); });
measure('range 1,000 keys', Math.max(50, ops / 20), () => {
  const i = Math.min(rnd(), nKeys - 1001);
  return { key: key(i), rangeEnd: key(i + 1000) };
}, (c) => { if (c !== 1000) throw new Error('bad'); });
measure('get one key at an old revision', ops, () => ({ key: key(rnd()), revision: 2 + Math.floor(Math.random() * nKeys) }), () => {});
t0 = performance.now();
const all = store.range({ key: Buffer.from([0]), rangeEnd: Buffer.from([0]), countOnly: true });
console.log(`count-only over all ${all.count.toLocaleString('en-US')} keys: ${((performance.now() - t0)).toFixed(1)} ms`);
t0 = performance.now();
const lim = store.range({ key: Buffer.from([0]), rangeEnd: Buffer.from([0]), limit: 1 });
console.log(`limit 1 over all keys (count still exact, ${lim.count}): ${((performance.now() - t0)).toFixed(1)} ms`);
store.close();
fs.rmSync(dir, { recursive: true, force: true });
