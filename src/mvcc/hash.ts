/**
 * Corruption checks (etcd Maintenance.Hash / HashKV): CRC-32C over the
 * key-value contents, identical on every member that applied the same entries
 * whatever their compaction progress.
 *
 * HashKV is etcd's own (mvcc/kvstore.go hashKV): the bucket name "key", then for each revision in
 * order the bytes etcd's bbolt holds for it, its 17-byte revision key ('t' appended for a
 * tombstone) and the row as a marshalled mvccpb.KeyValue (a tombstone's holding its key alone). So
 * a store holds etcd's HashKV for the same data: `etcdctl endpoint hashkv` on an etcd cluster and
 * on etcetera after its data dir was imported (or the same requests were applied) agree.
 */

import type { BatchTx } from '../backend/batch_tx.js';
import type { KvBackend, KvRow } from './kv_backend.js';
import { Crc32c } from './crc32c.js';
import { KeyValueBytes } from './key_value_bytes.js';
import { revMain } from './revision.js';

function encodeInt(n: number): Buffer {
  const b = Buffer.alloc(8);
  b.writeDoubleBE(n);
  return b;
}

function encodeBytes(h: Crc32c, b: Uint8Array): void {
  h.update(encodeInt(b.length));
  h.update(b);
}

/**
 * HashKV at `rev`: every revision ≤ rev, except those ≤ compactRev that the
 * compaction drops (only `keep` survives there) so a half-done compaction does
 * not change the result. Feed rows in revision order.
 */
export class HashKvAccumulator {
  private readonly h = new Crc32c();
  private readonly kv = new KeyValueBytes();

  constructor(
    private readonly rev: number,
    private readonly compactRev: number,
    private readonly keep: Set<number>,
  ) {
    this.h.update(Buffer.from('key'));
  }

  add(row: KvRow): void {
    const main = revMain(row.rev);
    if (main > this.rev) return;
    if (main <= this.compactRev && !this.keep.has(row.rev)) return;
    this.h.update(this.kv.revisionKey(row));
    this.h.update(this.kv.marshal(row));
  }

  digest(): number {
    return this.h.digest();
  }
}

/**
 * The revisions at or below the compaction that a HashKV at `at` counts: etcd's Keep(at), the
 * live revision of each key alive at `at`. When no key is alive at `at`, etcd skips nothing below
 * the compaction and hashes every row its compaction left there, which is Keep(compactRev): that
 * set then, so the hash is etcd's and still does not depend on how far a compaction has got.
 */
export function hashKvKeep(keep: (rev: number) => Set<number>, at: number, compactRev: number): Set<number> {
  const live = keep(at);
  return live.size > 0 || compactRev <= 0 ? live : keep(compactRev);
}

export function hashKvRevisions(backend: KvBackend, rev: number, compactRev: number, keep: Set<number>): number {
  const acc = new HashKvAccumulator(rev, compactRev, keep);
  for (const row of backend.allRows()) {
    if (revMain(row.rev) > rev) break;
    acc.add(row);
  }
  return acc.digest();
}

/** Meta entries that legitimately differ between members (apply position, compaction progress). */
const IGNORED_META = new Set(['consistent_index', 'term', 'compact_cursor_rev', 'compact_cursor_key']);

/** Hash of the whole backend (every store's tables, read through its handle), rows in primary key order. */
export function hashBackend(tx: BatchTx): number {
  const h = new Crc32c();
  const tables = tx.read<[], string>("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name", 'pluck').all();
  for (const t of tables) {
    h.update(Buffer.from(t));
    const stmt = tx.read<[], unknown[]>(`SELECT * FROM "${t.replaceAll('"', '""')}"`, 'raw');
    for (const row of stmt.iterate()) {
      if (t === 'meta' && IGNORED_META.has(row[0] as string)) continue;
      for (const v of row) {
        if (v === null) h.update(Buffer.from([0]));
        else if (typeof v === 'number') h.update(encodeInt(v));
        else if (typeof v === 'bigint') h.update(Buffer.from(v.toString()));
        else if (typeof v === 'string') encodeBytes(h, Buffer.from(v));
        else if (Buffer.isBuffer(v)) encodeBytes(h, v);
      }
    }
  }
  return h.digest();
}
