/**
 * Puts per second into the kv store alone (apply path: consistent index,
 * index, batched SQLite transaction), no Raft, no gRPC.
 * etcd's benchmark defaults: 8-byte keys and values. `--full` uses 1,000,000 puts.
 *   npx tsx bench/mvcc_put.ts [--full] [--n=N] [--keys=K] [--value=BYTES]
 */
import fs from 'node:fs';
import path from 'node:path';
import { KvStore } from '../src/mvcc/kvstore.js';
import { intFlag, tmpDir } from './mvcc_util.js';

const n = intFlag('n', 200_000, 1_000_000);
const keySpace = intFlag('keys', 100_000, 100_000);
const valueBytes = intFlag('value', 8, 8);

const dir = tmpDir();
const store = KvStore.open({ path: path.join(dir, 'db.sqlite') });
const value = Buffer.alloc(valueBytes, 'v');
const keys = Array.from({ length: keySpace }, (_, i) => Buffer.from(String(i).padStart(8, '0')));
const t0 = performance.now();
for (let i = 0; i < n; i++) {
  store.apply(i + 1, 1, { put: { key: keys[i % keySpace]!, value } });
}
store.backend.forceCommit();
const ms = performance.now() - t0;
console.log(`puts: ${n}, key space ${keySpace}, value ${valueBytes} B`);
console.log(`puts/s into the store: ${Math.round(n / (ms / 1000)).toLocaleString('en-US')} (${((ms * 1000) / n).toFixed(2)} µs/put)`);
console.log(`backend size: ${(store.sizeBytes() / 1e6).toFixed(1)} MB`);
store.close();
fs.rmSync(dir, { recursive: true, force: true });
