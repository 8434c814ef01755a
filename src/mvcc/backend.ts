/**
 * The backend: one SQLite database (better-sqlite3) holding every revision of
 * every key, the meta bucket, and tables reserved for leases, members, alarms
 * and auth.
 *
 * Like etcd's batched bolt transaction, writes go into one open SQLite
 * transaction that is committed every `batchIntervalMs` or once `batchLimit`
 * writes are pending (checked between applies, never inside one). Reads use the
 * same connection, so they see every applied write, committed or not.
 * journal_mode=WAL and synchronous=OFF: the Raft WAL is the source of
 * durability; what SQLite loses in a crash is re-applied from the consistent
 * index, which is written in the same transaction as the data it covers.
 */

import fs from 'node:fs';
import Database from 'better-sqlite3';
import { invariant } from './errors.js';

export interface BackendOptions {
  /** Commit the batch transaction at least this often. etcd: 100 ms. */
  batchIntervalMs?: number;
  /** Commit once this many writes are pending. etcd: 10,000. */
  batchLimit?: number;
}

/** One stored revision of a key; tombstones have empty value and zero create/version/lease. */
export interface KvRow {
  rev: number;
  key: Buffer;
  value: Buffer;
  createRev: number;
  version: number;
  lease: number;
  tombstone: boolean;
}

type RawRow = [number, Buffer, Buffer | null, number, number, number, number];

const SCHEMA = `
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
CREATE TABLE IF NOT EXISTS members (id INTEGER PRIMARY KEY, value BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS members_removed (id INTEGER PRIMARY KEY);
CREATE TABLE IF NOT EXISTS alarms (member_id INTEGER NOT NULL, alarm INTEGER NOT NULL, PRIMARY KEY (member_id, alarm)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS auth (name TEXT PRIMARY KEY, value BLOB NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS auth_users (name BLOB PRIMARY KEY, value BLOB NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS auth_roles (name BLOB PRIMARY KEY, value BLOB NOT NULL) WITHOUT ROWID;
`;

const EMPTY = Buffer.alloc(0);

function toRow(r: RawRow): KvRow {
  return {
    rev: r[0],
    key: r[1],
    value: r[2] ?? EMPTY,
    createRev: r[3],
    version: r[4],
    lease: r[5],
    tombstone: r[6] !== 0,
  };
}

/** Bytes of recently written or read rows kept in memory (etcd's backend keeps a read buffer too). */
const ROW_CACHE_BYTES_MAX = 8 * 1024 * 1024;
/** Reads of at most this many rows go through the row cache (see Backend.peekKvs). */
const CACHED_READ_ROWS_MAX = 16;
/** Per-row overhead counted against the cache budget (object, Map entry, buffer headers). */
const ROW_OVERHEAD_BYTES = 200;

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

/**
 * Rows by revision, oldest inserted first out (a hot row read back after eviction is simply
 * cached again). Revisions are immutable, so a cached row can never
 * be stale; only deleting a revision (compaction) removes it.
 *
 * Eviction order is kept in a queue of its own, not read off the Map: V8's Map leaves a hole per
 * deleted entry and `keys().next()` walks over every hole at the front, which made each put pay
 * for all earlier evictions (a fifth of the leader's CPU at 1,000 clients).
 */
class RowCache {
  private readonly rows = new Map<number, KvRow>();
  /** Revisions in insertion order from `head`; entries deleted since are skipped when reached. */
  private order: number[] = [];
  private head = 0;
  private bytes = 0;

  get(rev: number): KvRow | undefined {
    return this.rows.get(rev);
  }

  set(row: KvRow): void {
    const cost = rowCost(row);
    if (cost > ROW_CACHE_BYTES_MAX / 64) return;
    const had = this.rows.get(row.rev);
    if (had !== undefined) this.bytes -= rowCost(had);
    else this.order.push(row.rev);
    this.rows.set(row.rev, row);
    this.bytes += cost;
    while (this.bytes > ROW_CACHE_BYTES_MAX) this.evictOldest();
    this.compactOrder();
  }

  delete(rev: number): void {
    const row = this.rows.get(rev);
    if (row === undefined) return;
    this.rows.delete(rev);
    this.bytes -= rowCost(row);
  }

  private evictOldest(): void {
    while (this.head < this.order.length) {
      const rev = this.order[this.head++]!;
      if (this.rows.has(rev)) {
        this.delete(rev);
        return;
      }
    }
    invariant(this.rows.size === 0 && this.bytes === 0, `row cache: ${this.rows.size} rows (${this.bytes} bytes) missing from the eviction queue`);
  }

  /** Drops the consumed prefix and, after many deletions, the queue entries of deleted rows. */
  private compactOrder(): void {
    const queued = this.order.length - this.head;
    if (this.head > 4096 && this.head * 2 > this.order.length) {
      this.order = this.order.slice(this.head);
      this.head = 0;
    } else if (queued > 4096 && queued > 2 * this.rows.size) {
      const seen = new Set<number>();
      this.order = this.order.slice(this.head).filter((rev) => {
        if (!this.rows.has(rev) || seen.has(rev)) return false;
        seen.add(rev);
        return true;
      });
      this.head = 0;
    }
  }
}

function rowCost(row: KvRow): number {
  return row.key.byteLength + row.value.byteLength + ROW_OVERHEAD_BYTES;
}

export class Backend {
  readonly path: string;
  private readonly cache = new RowCache();
  /** The connection; writes through it join the open batch transaction. */
  readonly db: Database.Database;
  private readonly batchLimit: number;
  private pending = 0;
  private timer: NodeJS.Timeout | null = null;
  private closed = false;
  private readonly stmts;
  private preCommit: (() => void) | null = null;

  private constructor(path: string, opts: BackendOptions) {
    this.path = path;
    this.batchLimit = opts.batchLimit ?? 10_000;
    invariant(this.batchLimit > 0, 'batchLimit must be positive');
    this.db = new Database(path);
    this.db.pragma('journal_mode = WAL');
    this.db.pragma('synchronous = OFF');
    this.db.exec(SCHEMA);
    const db = this.db;
    this.stmts = {
      put: db.prepare('INSERT INTO kv (rev, key, value, create_rev, version, lease, tombstone) VALUES (?, ?, ?, ?, ?, ?, ?)'),
      get: db.prepare('SELECT rev, key, value, create_rev, version, lease, tombstone FROM kv WHERE rev = ?').raw(),
      del: db.prepare('DELETE FROM kv WHERE rev = ?'),
      range: db
        .prepare('SELECT rev, key, value, create_rev, version, lease, tombstone FROM kv WHERE rev >= ? AND rev <= ? ORDER BY rev LIMIT ?')
        .raw(),
      all: db.prepare('SELECT rev, key, value, create_rev, version, lease, tombstone FROM kv ORDER BY rev').raw(),
      maxRev: db.prepare('SELECT max(rev) FROM kv').pluck(),
      metaGet: db.prepare('SELECT value FROM meta WHERE name = ?').pluck(),
      metaSet: db.prepare('INSERT OR REPLACE INTO meta (name, value) VALUES (?, ?)'),
      begin: db.prepare('BEGIN'),
      commit: db.prepare('COMMIT'),
    };
    this.stmts.begin.run();
    const interval = opts.batchIntervalMs ?? 100;
    invariant(interval > 0, 'batchIntervalMs must be positive');
    this.timer = setInterval(() => this.commitIfPending(), interval);
    this.timer.unref();
  }

  static open(path: string, opts: BackendOptions = {}): Backend {
    return new Backend(path, opts);
  }

  // ---- kv rows

  putKv(row: KvRow): void {
    this.stmts.put.run(row.rev, row.key, row.value, row.createRev, row.version, row.lease, row.tombstone ? 1 : 0);
    this.pending++;
    this.cache.set(ownRow(row));
  }

  getKv(rev: number): KvRow | undefined {
    const cached = this.cache.get(rev);
    if (cached !== undefined) return cached;
    const r = this.stmts.get.get(rev) as RawRow | undefined;
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
    return revs.map((rev) => {
      const cached = this.cache.get(rev);
      if (cached !== undefined) return cached;
      const r = this.stmts.get.get(rev) as RawRow | undefined;
      return r === undefined ? undefined : toRow(r);
    });
  }

  deleteKv(rev: number): void {
    this.cache.delete(rev);
    this.stmts.del.run(rev);
    this.pending++;
  }

  /** Rows with packed revision in [fromRev, toRev], in revision order, at most `limit`. */
  rowsBetween(fromRev: number, toRev: number, limit: number): KvRow[] {
    invariant(limit > 0, 'row limit must be positive');
    return (this.stmts.range.all(fromRev, toRev, limit) as RawRow[]).map(toRow);
  }

  /** Every row in revision order (restart, hashing). */
  *allRows(): IterableIterator<KvRow> {
    for (const r of this.stmts.all.iterate() as IterableIterator<RawRow>) yield toRow(r);
  }

  maxRev(): number {
    return (this.stmts.maxRev.get() as number | null) ?? 0;
  }

  // ---- meta bucket

  metaNumber(name: string): number {
    const v = this.stmts.metaGet.get(name);
    return typeof v === 'number' ? v : 0;
  }

  metaBytes(name: string): Buffer | null {
    const v = this.stmts.metaGet.get(name);
    return Buffer.isBuffer(v) ? v : null;
  }

  setMeta(name: string, value: number | Buffer | null): void {
    this.stmts.metaSet.run(name, value);
    this.pending++;
  }

  // ---- batching

  /**
   * Runs inside the batch transaction right before every commit (etcd's
   * OnPreCommitUnsafe): the place to write state, like the consistent index,
   * that must land atomically with the batch but need not be written per change.
   */
  setPreCommit(hook: (() => void) | null): void {
    this.preCommit = hook;
  }

  /** Counts writes made by others through `db` so the batch limit sees them. */
  noteWrites(n: number): void {
    this.pending += n;
  }

  /** Called between applies: commits when the batch is full. */
  commitIfFull(): void {
    if (this.pending >= this.batchLimit) this.forceCommit();
  }

  private commitIfPending(): void {
    if (!this.closed && this.pending > 0) this.forceCommit();
  }

  /** Commits the batch transaction now and opens the next one. */
  forceCommit(): void {
    invariant(!this.closed, 'backend is closed');
    invariant(this.db.inTransaction, 'batch transaction must be open');
    this.preCommit?.();
    this.stmts.commit.run();
    this.pending = 0;
    this.stmts.begin.run();
  }

  // ---- whole-file operations

  /**
   * Writes the committed state as one SQLite file via the online backup API.
   * Commits first, so the file holds every write applied so far; the copy
   * runs from a second, read-only connection holding a read transaction
   * (WAL snapshot isolation), so applies continue meanwhile.
   */
  async snapshot(destPath: string): Promise<void> {
    this.forceCommit();
    const reader = new Database(this.path, { readonly: true });
    try {
      reader.exec('BEGIN');
      reader.prepare('SELECT count(*) FROM meta').get(); // starts the read transaction now
      await reader.backup(destPath);
      reader.exec('COMMIT');
    } finally {
      reader.close();
    }
  }

  /** Bytes on disk: database file plus its WAL. */
  sizeBytes(): number {
    let size = 0;
    for (const f of [this.path, `${this.path}-wal`]) {
      try {
        size += fs.statSync(f).size;
      } catch {
        // absent WAL file counts as 0
      }
    }
    return size;
  }

  /** Rewrites the file without free pages (VACUUM), blocking like etcd's defrag. */
  defragment(): { sizeBeforeBytes: number; sizeAfterBytes: number } {
    this.preCommit?.();
    this.stmts.commit.run();
    this.pending = 0;
    this.db.pragma('wal_checkpoint(TRUNCATE)');
    const sizeBeforeBytes = this.sizeBytes();
    this.db.exec('VACUUM');
    this.db.pragma('wal_checkpoint(TRUNCATE)');
    const sizeAfterBytes = this.sizeBytes();
    this.stmts.begin.run();
    return { sizeBeforeBytes, sizeAfterBytes };
  }

  close(): void {
    if (this.closed) return;
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
    this.preCommit?.();
    this.stmts.commit.run();
    this.closed = true;
    this.db.close();
  }

  /** Test hook: drop the connection without committing, as a crash would. */
  crashForTest(): void {
    if (this.closed) return;
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
    this.closed = true;
    this.db.close(); // closing with an open transaction rolls it back
  }

  get isClosed(): boolean {
    return this.closed;
  }
}

/** Replaces the database at `dbPath` with a snapshot file (the store must be closed). */
export function installSnapshotFile(snapshotPath: string, dbPath: string): void {
  for (const suffix of ['-wal', '-shm']) fs.rmSync(`${dbPath}${suffix}`, { force: true });
  fs.copyFileSync(snapshotPath, dbPath);
}
