/**
 * The backend's row cache under eviction: far more rows than its 8 MiB budget, some revisions
 * deleted (as compaction deletes them) between writes, every row read back. A cached row must
 * always equal the stored one, and a deleted revision must never come back from the cache.
 */
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { KvBackend as Backend, type KvRow } from '../../src/mvcc/kv_backend.js';
import { tmpDir } from './helpers.js';

const ROWS = 20_000;
const VALUE_BYTES = 1024; // 20 MB of rows against the 8 MiB cache

function row(rev: number): KvRow {
  const value = Buffer.alloc(VALUE_BYTES, rev % 251);
  value.writeUInt32BE(rev, 0);
  return { rev, key: Buffer.from(`k${rev % 97}`), value, createRev: rev, version: 1, lease: 0, tombstone: false };
}

describe('backend row cache', () => {
  it('evicts oldest first, never serves a deleted or wrong row', () => {
    const be = Backend.open(path.join(tmpDir('backend-cache-'), 'db'));
    try {
      const deleted = new Set<number>();
      for (let rev = 1; rev <= ROWS; rev++) {
        be.putKv(row(rev));
        // Delete every third revision a while after writing it, as a compaction would.
        if (rev > 500 && rev % 3 === 0) {
          be.deleteKv(rev - 500);
          deleted.add(rev - 500);
        }
        // Read back an old row now and then so evicted rows are cached again.
        if (rev % 1000 === 0) expect(be.getKv(rev - 900)?.value.readUInt32BE(0)).toBe(deleted.has(rev - 900) ? undefined : rev - 900);
      }
      for (let rev = 1; rev <= ROWS; rev++) {
        const got = be.getKv(rev);
        if (deleted.has(rev)) expect(got).toBeUndefined();
        else expect(got?.value.readUInt32BE(0), `rev ${rev}`).toBe(rev);
      }
    } finally {
      be.close();
    }
  });
});
