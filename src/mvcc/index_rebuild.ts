/**
 * The key index rebuilt from a backend's rows (etcd's restoreIntoIndex), in one place for both
 * ways it runs:
 *
 * - at open, synchronously (nothing is served yet): `IndexRebuild.add` for every row;
 * - before a received snapshot image is installed (issue 19), from the image file on a read-only
 *   connection of its own, a page of rows at a time with a turn of the event loop between pages
 *   (`rebuildFromImage`), while the old backend and index still serve and heartbeats flow; the
 *   install then adopts the finished index instead of scanning a multi-GiB table on the event
 *   loop. A rebuild is checked against the installed file (max revision, consistent index) before
 *   it is adopted: one for another file is dropped and the index rebuilt the synchronous way.
 */
import Database from 'better-sqlite3';
import { revMain } from './revision.js';
import { leaseColumnSql, leaseFromColumn, type LeaseId } from './types.js';
import { keyToString, TreeIndex } from './tree_index.js';

/** What the rebuild needs of a kv row (kv_backend.ts's KvRow less its value). */
export interface IndexRow {
  rev: number;
  key: Uint8Array;
  createRev: number;
  version: number;
  lease: LeaseId;
  tombstone: boolean;
}

/** Rows read per page of an image rebuild: a few ms of work between two turns of the event loop. */
const REBUILD_PAGE_ROWS = 2_000;

export class IndexRebuild {
  readonly index = new TreeIndex();
  /** The highest main revision seen. */
  currentRev = 1;
  /** Tombstones whose history was compacted away (deleted from the backend after the rebuild). */
  readonly orphans: number[] = [];
  /** The latest lease of every live key (re-attached once the index is rebuilt). */
  readonly keyToLease = new Map<string, LeaseId>();
  /** The highest packed revision added (to check a rebuild against the file it is adopted for). */
  maxRev = 0;

  /** One row, in revision order. */
  add(row: IndexRow): void {
    const k = keyToString(row.key);
    if (row.tombstone || row.lease === 0) this.keyToLease.delete(k);
    else this.keyToLease.set(k, row.lease);
    this.maxRev = Math.max(this.maxRev, row.rev);
    if (row.tombstone && !this.index.isAlive(k)) {
      this.orphans.push(row.rev);
      return;
    }
    this.index.restore(k, row.rev, row.tombstone, row.createRev, row.version);
    const main = revMain(row.rev);
    if (main > this.currentRev) this.currentRev = main;
  }
}

/** A rebuild from an image file, with what identifies the file it was built from. */
export interface ImageRebuild {
  build: IndexRebuild;
  /** The image's consistent index (meta), to match it with the file installed. */
  consistentIndex: number;
}

/** An index row as SQLite returns it in raw mode for INDEX_ROW_COLUMNS. */
export type RawIndexRow = [number, Buffer, number, number, number | string, number];

/** The kv columns the rebuild reads: everything but the value, whose blobs it never needs. */
export const INDEX_ROW_COLUMNS = `rev, key, create_rev, version, ${leaseColumnSql('lease')}, tombstone`;

export function indexRowOf(r: RawIndexRow): IndexRow {
  return { rev: r[0], key: r[1], createRev: r[2], version: r[3], lease: leaseFromColumn(r[4]), tombstone: r[5] !== 0 };
}

/**
 * Rebuilds the index from the image at `path` (a SQLite file with the kv and meta tables), a page
 * at a time, yielding to the event loop between pages (setImmediate: timers and sockets run).
 */
export async function rebuildFromImage(path: string, consistentIndexName: string): Promise<ImageRebuild> {
  const db = new Database(path, { readonly: true, fileMustExist: true });
  try {
    const page = db.prepare<[number, number], RawIndexRow>(`SELECT ${INDEX_ROW_COLUMNS} FROM kv WHERE rev > ? ORDER BY rev LIMIT ?`).raw();
    const ciValue = db.prepare<[string], unknown>('SELECT value FROM meta WHERE name = ?').pluck().get(consistentIndexName);
    const build = new IndexRebuild();
    for (let after = -1; ; ) {
      const rows = page.all(after, REBUILD_PAGE_ROWS);
      for (const r of rows) build.add(indexRowOf(r));
      if (rows.length < REBUILD_PAGE_ROWS) break;
      after = rows[rows.length - 1]![0];
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
    return { build, consistentIndex: typeof ciValue === 'number' ? ciValue : 0 };
  } finally {
    db.close();
  }
}
