/**
 * The mvcc store's tables in the backend (etcd's "key" and "meta" buckets): every revision of
 * every key, with a read cache of recent rows, and the meta bucket (consistent index, compaction
 * progress). Writes go through the backend's counted handle, so they join its batch transaction
 * and count toward its batch limit; the statements are prepared again on the new handle after a
 * snapshot restore (bind), and the cache is dropped with the old file's rows.
 *
 * A put's row is held back and inserted with the next HELD_ROWS_MAX - 1 in one statement: a
 * statement per row cost 1.6 µs per row in isolation, one per 20 rows 0.87 (issue 18; the INSERT
 * was ~7% of the core's main thread under put load). What is held is in no table yet, so
 * everything that reads or writes the tables on this connection inserts it first (flushHeld): each
 * read here, the meta writes, the handle given out (hashing), and the backend's pre-commit hook,
 * which runs before every commit, so a commit never lacks a row applied before it. A held row is
 * counted toward the batch limit when it is taken. An insert that fails (a bug: revisions are
 * unique) then fails a later put or the commit instead of the put that made the row; either way
 * the apply fails and the member stops, as before.
 */

import { Backend, type BackendOptions } from '../backend/backend.js';
import type { BatchTx } from '../backend/batch_tx.js';
import { invariant } from './errors.js';
import { leaseColumnSql, leaseFromColumn, type LeaseId } from './types.js';
import { INDEX_ROW_COLUMNS, indexRowOf, type IndexRow, type RawIndexRow } from './index_rebuild.js';
import { RowCache } from './row_cache.js';

/** One stored revision of a key; tombstones have empty value and zero create/version/lease. */
export interface KvRow {
  rev: number;
  key: Buffer;
  value: Buffer;
  createRev: number;
  version: number;
  lease: LeaseId;
  tombstone: boolean;
}

/** The lease as leaseColumnSql reads it: a number, or decimal text beyond 2^53. */
type RawRow = [number, Buffer, Buffer | null, number, number, number | string, number];

/** The tables this store registers with the backend. */
export const KV_SCHEMA = `
CREATE TABLE IF NOT EXISTS kv (
  rev INTEGER PRIMARY KEY,     -- packed revision (main * 2^20 + sub)
  key BLOB NOT NULL,
  value BLOB NOT NULL,
  create_rev INTEGER NOT NULL,
  version INTEGER NOT NULL,
  lease INTEGER NOT NULL,
  tombstone INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value) WITHOUT ROWID;
`;

const EMPTY = Buffer.alloc(0);

/** Rows a put holds back and inserts in one statement (see the file comment). */
export const HELD_ROWS_MAX = 20;
const KV_COLUMNS = 7;

function toRow(r: RawRow): KvRow {
  return {
    rev: r[0],
    key: r[1],
    value: r[2] ?? EMPTY,
    createRev: r[3],
    version: r[4],
    lease: leaseFromColumn(r[5]),
    tombstone: r[6] !== 0,
  };
}

/** Bytes of recently written or read rows kept in memory (etcd's backend keeps a read buffer too). */
const ROW_CACHE_BYTES_MAX = 8 * 1024 * 1024;
/** Reads of at most this many rows go through the row cache (see Backend.peekKvs). */
const CACHED_READ_ROWS_MAX = 16;

/** Backing-store bytes a cached row may hold beyond twice its own bytes (pool slabs are 8 KiB). */
const ROW_SLACK_BYTES = 256;

/** Bytes of the allocations a row's key and value are views into. */
function pinnedBytes(row: KvRow): number {
  const k = row.key.buffer;
  const v = row.value.byteLength === 0 ? undefined : row.value.buffer;
  return v === undefined || v === k ? k.byteLength : k.byteLength + v.byteLength;
}

/**
 * The row as the cache keeps it: key and value copied into one exact-size allocation of their own
 * when they are views into something much larger. Applied values are views into the raft entry
 * they were decoded from, whose buffer can be far larger than the request (the encoder sizes it by
 * its learned hint, up to 64 KiB; a follower's entries are views into a whole peer frame): a cache
 * of ~40k small rows must not pin ~40k such buffers. Not into the shared 8 KiB pool either
 * (Buffer.from would slice it): allocUnsafeSlow gives a store of exactly the row's size.
 */
function ownRow(row: KvRow): KvRow {
  const ownBytes = row.key.byteLength + row.value.byteLength;
  if (pinnedBytes(row) <= 2 * ownBytes + ROW_SLACK_BYTES) return row;
  const own = Buffer.allocUnsafeSlow(ownBytes);
  row.key.copy(own, 0);
  row.value.copy(own, row.key.byteLength);
  const key = own.subarray(0, row.key.byteLength);
  const value = row.value.byteLength === 0 ? EMPTY : own.subarray(row.key.byteLength);
  return { ...row, key, value };
}

type KvStatements = ReturnType<typeof prepare>;

function prepare(tx: BatchTx) {
  const cols = 'rev, key, value, create_rev, version, lease, tombstone';
  // SQLite's INTEGER holds the whole int64 lease; a JS number would round one beyond 2^53.
  const selectCols = `rev, key, value, create_rev, version, ${leaseColumnSql('lease')}, tombstone`;
  const row = '(?, ?, ?, ?, ?, ?, ?)';
  // Held rows were counted when taken (putKv): their inserts count nothing more.
  return {
    put: tx.write<[number, Buffer, Buffer, number, number, LeaseId, number]>(`INSERT INTO kv (${cols}) VALUES ${row}`, 0),
    putMany: tx.write<unknown[]>(`INSERT INTO kv (${cols}) VALUES ${Array<string>(HELD_ROWS_MAX).fill(row).join(', ')}`, 0),
    get: tx.read<[number], RawRow>(`SELECT ${selectCols} FROM kv WHERE rev = ?`, 'raw'),
    del: tx.write<[number]>('DELETE FROM kv WHERE rev = ?'),
    range: tx.read<[number, number, number], RawRow>(`SELECT ${selectCols} FROM kv WHERE rev >= ? AND rev <= ? ORDER BY rev LIMIT ?`, 'raw'),
    all: tx.read<[], RawRow>(`SELECT ${selectCols} FROM kv ORDER BY rev`, 'raw'),
    allIndexRows: tx.read<[], RawIndexRow>(`SELECT ${INDEX_ROW_COLUMNS} FROM kv ORDER BY rev`, 'raw'),
    maxRev: tx.read<[], number | null>('SELECT max(rev) FROM kv', 'pluck'),
    metaGet: tx.read<[string], unknown>('SELECT value FROM meta WHERE name = ?', 'pluck'),
    metaHas: tx.read<[string], number>('SELECT 1 FROM meta WHERE name = ? AND value IS NOT NULL', 'pluck'),
    metaSet: tx.write<[string, number | Buffer | null]>('INSERT OR REPLACE INTO meta (name, value) VALUES (?, ?)'),
  };
}

export class KvBackend {
  private cache = new RowCache<KvRow>(ROW_CACHE_BYTES_MAX);
  private stmts: KvStatements | undefined;
  /** Rows taken and not yet inserted (fewer than HELD_ROWS_MAX), in revision order. */
  private held: KvRow[] = [];
  /** putMany's parameters, reused. */
  private readonly manyParams: unknown[] = new Array<unknown>(HELD_ROWS_MAX * KV_COLUMNS);
  /** The handle of the current connection (hashing reads every table through it). */
  private tx: BatchTx | undefined;

  /** The backend the tables live in; `owned` when this object opened it (a store of its own). */
  constructor(
    readonly shared: Backend,
    private readonly owned = false,
  ) {}

  /** A backend holding only these tables, in a file of their own (tests and tools). */
  static open(path: string, opts: BackendOptions = {}): KvBackend {
    const kb = new KvBackend(Backend.open(path, opts), true);
    kb.shared.register({ name: 'mvcc', schema: KV_SCHEMA, recover: (tx) => kb.bind(tx), preCommit: () => kb.flushHeld() });
    return kb;
  }

  /** The backend (re)opened its file: statements on the new handle, no rows of the old file cached. */
  bind(tx: BatchTx): void {
    // The backend commits (and so inserts what is held) before it replaces its file.
    invariant(this.held.length === 0, `${this.held.length} held kv rows when the backend was bound again`);
    this.tx = tx;
    this.stmts = prepare(tx);
    this.cache = new RowCache<KvRow>(ROW_CACHE_BYTES_MAX);
  }

  /** The statements, with every held row inserted first: what any use of the tables but a put goes through. */
  private get tables(): KvStatements {
    this.flushHeld();
    return this.s;
  }

  private get s(): KvStatements {
    invariant(this.stmts !== undefined, 'kv tables used before the backend bound them');
    return this.stmts;
  }

  /** The counted handle the tables are bound to, with every held row in them (its user may read them). */
  get handle(): BatchTx {
    invariant(this.tx !== undefined, 'kv tables used before the backend bound them');
    this.flushHeld();
    return this.tx;
  }

  /** Counts writes toward the backend's batch limit (inserts nothing held). */
  countWrites(n: number): void {
    invariant(this.tx !== undefined, 'kv tables used before the backend bound them');
    this.tx.countWrites(n);
  }

  // ---- kv rows

  /** Writes a row: held back, inserted with the next ones (see the file comment); cached now. */
  putKv(row: KvRow): void {
    const tx = this.tx;
    invariant(tx !== undefined, 'kv tables used before the backend bound them');
    const last = this.held.length === 0 ? undefined : this.held[this.held.length - 1]!;
    invariant(last === undefined || row.rev > last.rev, () => `kv row ${row.rev} held after row ${last?.rev}`);
    tx.beforeWrite?.();
    tx.countWrites(1);
    this.held.push(row);
    if (this.held.length === HELD_ROWS_MAX) this.insertHeld();
    this.cache.set(ownRow(row));
  }

  /** Inserts the rows held back, if any: before anything else uses the tables, and before every commit. */
  flushHeld(): void {
    const held = this.held;
    if (held.length === 0) return;
    if (held.length === HELD_ROWS_MAX) {
      this.insertHeld();
      return;
    }
    const put = this.s.put;
    this.held = [];
    for (const r of held) put.run(r.rev, r.key, r.value, r.createRev, r.version, r.lease, r.tombstone ? 1 : 0);
  }

  private insertHeld(): void {
    const p = this.manyParams;
    const held = this.held;
    invariant(held.length === HELD_ROWS_MAX, () => `${held.length} rows for the ${HELD_ROWS_MAX}-row insert`);
    for (let i = 0, at = 0; i < HELD_ROWS_MAX; i++, at += KV_COLUMNS) {
      const r = held[i]!;
      p[at] = r.rev;
      p[at + 1] = r.key;
      p[at + 2] = r.value;
      p[at + 3] = r.createRev;
      p[at + 4] = r.version;
      p[at + 5] = r.lease;
      p[at + 6] = r.tombstone ? 1 : 0;
    }
    this.held = [];
    this.s.putMany.run(...p);
    // The parameters hold the rows' buffers until the next insert: let them go now.
    p.fill(undefined);
  }

  /** The row of a revision if the cache holds it; never reads the table. */
  cachedKv(rev: number): KvRow | undefined {
    return this.cache.get(rev);
  }

  getKv(rev: number): KvRow | undefined {
    const cached = this.cache.get(rev);
    if (cached !== undefined) return cached;
    const r = this.tables.get.get(rev);
    if (r === undefined) return undefined;
    const row = toRow(r);
    this.cache.set(row);
    return row;
  }

  /**
   * Rows for many revisions, in the order asked (undefined where absent).
   * Point lookups: a json_each IN-query measured no faster, as the cost is in
   * materialising the blobs.
   */
  getKvs(revs: number[]): (KvRow | undefined)[] {
    return revs.map((r) => this.getKv(r));
  }

  /**
   * Rows for many revisions. A large read does not cache the rows it reads from SQLite: it would
   * evict every hot row and pay the cache's bookkeeping per row (measured: 670 ms through the
   * cache vs 235 ms around it for 100,000 rows). A small one (a get of a few keys) does, so a hot
   * key evicted by a burst of writes is cached again on its next read.
   */
  peekKvs(revs: readonly number[]): (KvRow | undefined)[] {
    if (revs.length <= CACHED_READ_ROWS_MAX) return revs.map((rev) => this.getKv(rev));
    const get = this.tables.get;
    return revs.map((rev) => {
      const cached = this.cache.get(rev);
      if (cached !== undefined) return cached;
      const r = get.get(rev);
      return r === undefined ? undefined : toRow(r);
    });
  }

  deleteKv(rev: number): void {
    this.cache.delete(rev);
    this.tables.del.run(rev);
  }

  /** Rows with packed revision in [fromRev, toRev], in revision order, at most `limit`. */
  rowsBetween(fromRev: number, toRev: number, limit: number): KvRow[] {
    invariant(limit > 0, 'row limit must be positive');
    return this.tables.range.all(fromRev, toRev, limit).map(toRow);
  }

  /** Every row in revision order (restart, hashing). */
  *allRows(): IterableIterator<KvRow> {
    for (const r of this.tables.all.iterate()) yield toRow(r);
  }

  /** Every row less its value, in revision order (the key index rebuild at open). */
  *indexRows(): IterableIterator<IndexRow> {
    for (const r of this.tables.allIndexRows.iterate()) yield indexRowOf(r);
  }

  maxRev(): number {
    return this.tables.maxRev.get() ?? 0;
  }

  // ---- meta bucket

  metaNumber(name: string): number {
    const v = this.tables.metaGet.get(name);
    return typeof v === 'number' ? v : 0;
  }

  metaBytes(name: string): Buffer | null {
    const v = this.tables.metaGet.get(name);
    return Buffer.isBuffer(v) ? v : null;
  }

  /** True when `name` is set (to anything but NULL). */
  hasMeta(name: string): boolean {
    return this.tables.metaHas.get(name) !== undefined;
  }

  setMeta(name: string, value: number | Buffer | null): void {
    this.tables.metaSet.run(name, value);
  }

  // ---- the backend's batch

  /** Called between applies: the backend commits when its batch is full. */
  commitIfFull(): void {
    this.shared.commitIfFull();
  }

  /** Commits the backend's batch now (a scheduled compaction must survive a crash, as in etcd). */
  forceCommit(): void {
    this.flushHeld();
    this.shared.forceCommit();
  }

  /** Closes the backend when this object opened it. */
  close(): void {
    this.flushHeld();
    if (this.owned) this.shared.close();
  }
}
