/**
 * Staged compaction (etcd mvcc/kvstore_compaction.go, reshaped): the key
 * index is compacted in batches of at most `batchKeys` keys that drop at most
 * about `batchKeys` revisions (etcd's CompactionBatchLimit counts backend keys,
 * which are revisions; a key's revisions are never split), and the revisions
 * each batch drops are deleted from the backend in the same batch transaction
 * as a progress cursor (compaction revision, last key done). Between batches the
 * event loop runs, so requests keep flowing; after a crash the cursor says
 * where to resume.
 */

import type { KvBackend } from './kv_backend.js';
import { invariant } from './errors.js';
import type { TreeIndex } from './tree_index.js';

export const META_SCHEDULED_COMPACT = 'scheduled_compact_rev';
export const META_FINISHED_COMPACT = 'finished_compact_rev';
export const META_CURSOR_REV = 'compact_cursor_rev';
export const META_CURSOR_KEY = 'compact_cursor_key';

export interface CompactionOptions {
  /** Index keys visited / revisions dropped per batch. etcd: 1,000. */
  batchKeys: number;
  /** Pause between batches. etcd: 10 ms. 0 still yields (setImmediate). */
  sleepMs: number;
  /** What the job reports for metrics (etcd_debugging_mvcc_db_compaction_*). */
  stats?: CompactionStats;
}

/**
 * A compaction's measures. A batch here compacts the index and deletes the revisions it drops in
 * one step (etcd does the index first, then the db in batches): each batch's time is the pause.
 */
export interface CompactionStats {
  /** Revisions deleted from the backend by one batch. */
  keys(n: number): void;
  /** One batch (the event loop held), in ms. */
  pauseMs(ms: number): void;
  /** The whole compaction, first batch to finish, in ms. */
  totalMs(ms: number): void;
}

export interface CompactionTarget {
  readonly index: TreeIndex;
  readonly backend: KvBackend;
  /** False once the store closed: the job stops at the next batch boundary. */
  isOpen(): boolean;
  /** False while something (HashKV) needs the backend rows to stay: the job waits. */
  mayRun(): boolean;
}

function pause(ms: number): Promise<void> {
  return new Promise((resolve) => (ms > 0 ? setTimeout(resolve, ms) : setImmediate(resolve)));
}

/** Where a compaction at `rev` left off (null: start from the first key). */
export function savedCursor(backend: KvBackend, rev: number): string | null {
  if (backend.metaNumber(META_CURSOR_REV) !== rev) return null;
  const key = backend.metaBytes(META_CURSOR_KEY);
  return key === null ? null : key.toString('latin1');
}

/**
 * Runs (or resumes) the compaction at main revision `rev`. Resolves when every
 * batch is done and the finished revision is recorded, or when the store closed.
 */
export async function runCompaction(t: CompactionTarget, rev: number, opts: CompactionOptions): Promise<void> {
  invariant(opts.batchKeys > 0, 'compaction batch must be positive');
  if (!t.isOpen()) return;
  let cursor = savedCursor(t.backend, rev);
  const startMs = performance.now();
  for (;;) {
    if (!t.isOpen()) return;
    if (!t.mayRun()) {
      await pause(Math.max(opts.sleepMs, 1));
      continue;
    }
    const batchStartMs = performance.now();
    let removed = 0;
    const last = t.index.compactBatch(cursor, rev, opts.batchKeys, (r) => {
      removed++;
      t.backend.deleteKv(r);
    });
    opts.stats?.keys(removed);
    opts.stats?.pauseMs(performance.now() - batchStartMs);
    if (last === null) break;
    t.backend.setMeta(META_CURSOR_REV, rev);
    t.backend.setMeta(META_CURSOR_KEY, Buffer.from(last, 'latin1'));
    cursor = last;
    t.backend.commitIfFull();
    await pause(opts.sleepMs);
  }
  t.backend.setMeta(META_FINISHED_COMPACT, rev);
  t.backend.setMeta(META_CURSOR_REV, null);
  t.backend.setMeta(META_CURSOR_KEY, null);
  t.backend.commitIfFull();
  opts.stats?.totalMs(performance.now() - startMs);
}
