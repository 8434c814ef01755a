/**
 * Memory of the in-memory key index (treeIndex + keyIndex), the figure etcd
 * publishes as c1 ≈ 120 bytes per key and c2 ≈ 30 bytes per extra revision.
 * Keys are "key0000000042"-style (13 bytes). Default 1,000,000 keys.
 *   npx tsx bench/mvcc_index_memory.ts [--keys=N] [--revs=R]
 */
import { packRev } from '../src/mvcc/revision.js';
import { keyToString, TreeIndex } from '../src/mvcc/tree_index.js';
import { heapUsed, intFlag, key } from './mvcc_util.js';

const nKeys = intFlag('keys', 1_000_000, 1_000_000);
const extraRevs = intFlag('revs', 10, 10);

// Key strings are created first and counted apart: etcd's figure covers the index, and the
// strings are what the index must hold anyway (latin1, 13 bytes + V8 header).
const before = heapUsed();
const keys = Array.from({ length: nKeys }, (_, i) => keyToString(key(i)));
const afterKeys = heapUsed();
const index = new TreeIndex();
let rev = 2;
for (const k of keys) index.put(k, packRev(rev++, 0));
const afterIndex = heapUsed();
for (let r = 0; r < extraRevs; r++) for (const k of keys) index.put(k, packRev(rev++, 0));
const afterRevs = heapUsed();

const perKeyStrings = (afterKeys - before) / nKeys;
const perKey = (afterIndex - afterKeys) / nKeys;
const perRev = (afterRevs - afterIndex) / (nKeys * extraRevs);
console.log(`keys: ${nKeys.toLocaleString('en-US')}, extra revisions per key: ${extraRevs}`);
console.log(`key strings:            ${perKeyStrings.toFixed(1)} B/key`);
console.log(`index per key (1 rev):  ${perKey.toFixed(1)} B/key (+ key string: ${(perKey + perKeyStrings).toFixed(1)})   etcd c1 ≈ 120 B/key`);
console.log(`index per extra rev:    ${perRev.toFixed(1)} B/revision   etcd c2 ≈ 30 B/revision`);
if (index.size !== nKeys) throw new Error('index size mismatch');
