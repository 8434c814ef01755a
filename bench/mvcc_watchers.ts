/**
 * Memory per idle watcher (etcd ≈ 350 bytes), with 1,000,000 watchers on
 * distinct keys spread over 1,000 streams, then the cost of one put that
 * matches a single watcher among them.
 *   npx tsx bench/mvcc_watchers.ts [--watchers=N] [--streams=S]
 */
import fs from 'node:fs';
import path from 'node:path';
import { KvStore } from '../src/mvcc/kvstore.js';
import { WatchableStore } from '../src/mvcc/watchable_store.js';
import type { WatchStream } from '../src/mvcc/watch_stream.js';
import { fmtUs, heapUsed, intFlag, key, percentile, tmpDir } from './mvcc_util.js';

const nWatchers = intFlag('watchers', 1_000_000, 1_000_000);
const nStreams = intFlag('streams', 1_000, 1_000);

const dir = tmpDir();
const kv = KvStore.open({ path: path.join(dir, 'db.sqlite') });
const ws = new WatchableStore(kv);
// Keys are built before measuring: the request buffers belong to the gRPC layer, not to the watcher.
const keys = Array.from({ length: nWatchers }, (_, i) => key(i));
const streams: WatchStream[] = [];
const before = heapUsed();
for (let s = 0; s < nStreams; s++) streams.push(ws.watchStream());
for (let i = 0; i < nWatchers; i++) streams[i % nStreams]!.watch({ key: keys[i]! });
const after = heapUsed();
console.log(`watchers: ${nWatchers.toLocaleString('en-US')} on ${nStreams} streams (synced: ${ws.syncedCount})`);
console.log(`memory per idle watcher: ${((after - before) / nWatchers).toFixed(1)} B   etcd ≈ 350 B`);

const lat: number[] = [];
for (let i = 0; i < 2000; i++) {
  const s = performance.now();
  kv.put({ key: keys[Math.floor(Math.random() * nWatchers)]!, value: Buffer.from('v') });
  lat.push(performance.now() - s);
}
lat.sort((a, b) => a - b);
console.log(`put with 1 matching watcher among them: p50 ${fmtUs(percentile(lat, 50))}, p99 ${fmtUs(percentile(lat, 99))}`);
ws.close();
kv.close();
fs.rmSync(dir, { recursive: true, force: true });
