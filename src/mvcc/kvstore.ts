/**
 * The kv store (etcd mvcc/kvstore.go + the kv part of etcdserver's applier):
 * the state machine Raft entries are applied to.
 *
 * - `apply(index, term, op)` applies one committed entry exactly once: entries
 *   at or below the stored consistent index are skipped, so re-applying the
 *   Raft log after a restart is idempotent. The consistent index is written in
 *   the same backend transaction as the changes it covers.
 * - Every modifying request is one main revision; the empty store is at
 *   revision 1 (as etcd), so the first write gets revision 2.
 * - Compaction is staged (see kvstore_compaction.ts).
 */

import fs from 'node:fs';
import { Backend, type BackendOptions } from '../backend/backend.js';
import type { BatchTx } from '../backend/batch_tx.js';
import { ErrClosed, ErrCompacted, ErrFutureRev, ErrLeaseNotFound, invariant, MvccError } from './errors.js';
import { HashKvAccumulator, hashBackend, hashKvKeep, hashKvRevisions } from './hash.js';
import { type ImageRebuild, IndexRebuild, rebuildFromImage } from './index_rebuild.js';
import { KV_SCHEMA, KvBackend } from './kv_backend.js';
import {
  META_FINISHED_COMPACT,
  META_SCHEDULED_COMPACT,
  runCompaction,
} from './kvstore_compaction.js';
import {
  DEFAULT_RANGE_READ,
  type RangeReadOptions,
  type RangeReadResult,
  type RangeReadTarget,
  type RangeSpill,
  readRange,
  readTxn,
  type TxnReadResult,
} from './kvstore_range.js';
import { applyDeleteRange, applyPut, applyRange, applyTxn, KvTxn, readOnlyTxnPath, rowToKv, type StoreCore } from './kvstore_txn.js';
import { type LeaseHooks, NO_LEASES } from './lease_hooks.js';
import { lastOfMain, revMain } from './revision.js';
import { keyFromString, keyToString, TreeIndex } from './tree_index.js';
import { checkKvOp } from './txn_check.js';
import { OpCounters } from './op_counters.js';
import type { CompactionStats } from './kvstore_compaction.js';

/** Durations the store reports for metrics (etcd's mvcc hash and compaction histograms). */
export interface KvTimings {
  compaction: CompactionStats;
  hashSeconds(s: number): void;
  hashRevSeconds(s: number): void;
}
import {
  type CompactionRequest,
  type DeleteRangeRequest,
  type DeleteRangeResponse,
  type Event,
  type KeyValue,
  type KvOp,
  leaseOf,
  type LeaseId,
  numOf,
  type PutRequest,
  type PutResponse,
  type RangeRequest,
  type RangeResponse,
  type TxnRequest,
  type TxnResponse,
} from './types.js';

export const META_CONSISTENT_INDEX = 'consistent_index';
export const META_TERM = 'term';

export interface KvStoreOptions extends BackendOptions {
  /** The member's backend: the store registers its tables there (the server's way). */
  backend?: Backend;
  /** Otherwise, a SQLite database file the store opens a backend of its own on (tests, tools). */
  path?: string;
  /** The lessor's hooks; may also be set later with setLeaseHooks. */
  leases?: LeaseHooks;
  /** Keys per compaction batch. etcd: 1,000. */
  compactionBatchKeys?: number;
  /** Pause between compaction batches. etcd: 10 ms. */
  compactionSleepMs?: number;
  /** Slices of rangeAsync (defaults: DEFAULT_RANGE_READ). */
  rangeRead?: Partial<RangeReadOptions>;
}

/** Result of applying one kv entry. `revision` is the header revision to report. */
export interface ApplyResult {
  revision: number;
  range?: RangeResponse;
  put?: PutResponse;
  deleteRange?: DeleteRangeResponse;
  txn?: TxnResponse;
  /** Set for compactions: resolves once the old revisions are physically gone (for `physical`). */
  compaction?: Promise<void>;
  /** A client-visible failure; the entry still counts as applied. */
  error?: MvccError;
}

/** Receives the events of every revision, synchronously, right after it is applied. */
export type ChangeObserver = (rev: number, events: Event[]) => void;

export interface HashKvResult {
  hash: number;
  /** Store revision when hashed (header revision). */
  revision: number;
  /** The compaction's revision, -1 before any (etcd's compactMainRev). */
  compactRevision: number;
}

export interface SnapshotInfo {
  consistentIndex: number;
  term: number;
  revision: number;
  sizeBytes: number;
}

/** A sliced HashKV turns the event loop after hashing this many bytes of keys and values. */
const HASH_TURN_BYTES = 1024 * 1024;

/** Restarts of one rangeAsync by snapshot installs before it gives up. */
const RANGE_READ_ATTEMPTS_MAX = 3;

export class KvStore implements StoreCore {
  readonly index = new TreeIndex();
  /** Requests served and applied, by kind (etcd_mvcc_*_total; read at scrape time). */
  readonly ops = new OpCounters();
  /** Where compactions and hashes report their durations (set by metrics.ts; none in unit tests). */
  timings: KvTimings | undefined;
  /** The kv and meta tables (the same object across snapshot restores). */
  readonly backend: KvBackend;
  private readonly shared: Backend;
  leases: LeaseHooks;
  currentRev = 1;
  compactMainRev = -1;
  private ci = 0;
  private term = 0;
  private closed = false;
  private observer: ChangeObserver | null = null;
  private compactionChain: Promise<void> = Promise.resolve();
  private epoch = 0;
  /** HashKV scans in progress: compaction batches wait for them. */
  private hashing = 0;
  /** Main revisions of the sliced reads in progress (a multiset): compactions above them wait. */
  private readonly readPins = new Map<number, number>();
  private readonly restoreListeners: (() => void)[] = [];
  private readonly restoredListeners: (() => void)[] = [];
  private readonly opts: KvStoreOptions;

  private constructor(opts: KvStoreOptions) {
    this.opts = opts;
    this.leases = opts.leases ?? NO_LEASES;
    if (opts.backend !== undefined) {
      this.shared = opts.backend;
      this.backend = new KvBackend(this.shared);
    } else {
      invariant(opts.path !== undefined, 'kv store needs a backend or a path');
      this.shared = Backend.open(opts.path, opts);
      this.backend = new KvBackend(this.shared, true);
    }
    this.shared.register({
      name: 'mvcc',
      schema: KV_SCHEMA,
      recover: (tx) => this.recover(tx),
      prepareInstall: async (imagePath) => {
        // A failure here only costs the fast path: the install then rebuilds synchronously.
        this.prebuilt = await rebuildFromImage(imagePath, META_CONSISTENT_INDEX).catch(() => undefined);
      },
      preCommit: () => {
        // Every row applied before the commit goes in with it (KvBackend holds puts back).
        this.backend.flushHeld();
        this.persistConsistentIndex();
      },
    });
  }

  /** Writes the consistent index and term into the batch about to commit. */
  private persistConsistentIndex(): void {
    this.backend.setMeta(META_CONSISTENT_INDEX, this.ci);
    this.backend.setMeta(META_TERM, this.term);
  }

  /** Opens (or creates) the store in opts.backend or at opts.path, rebuilding the index and resuming any compaction. */
  static open(opts: KvStoreOptions): KvStore {
    return new KvStore(opts);
  }

  /**
   * The backend opened its file (at registration) or replaced it with a snapshot: the tables are
   * bound to the new handle and the whole in-memory state is rebuilt from them. Jobs and sliced
   * reads of the previous file stop at their next step (epoch).
   */
  private recover(tx: BatchTx): void {
    this.backend.bind(tx);
    this.epoch++;
    this.index.clear();
    this.keyLeases = new Map();
    this.currentRev = 1;
    this.compactMainRev = -1;
    this.compactionChain = Promise.resolve();
    // Listeners (a lessor of a standalone store) reload first, so the rebuild can re-attach leased keys.
    for (const l of this.restoreListeners) l();
    this.restore();
    for (const l of this.restoredListeners) l();
  }

  /**
   * The index rebuilt from a received image before it was installed (Backend.installImage calls
   * prepareInstall, index_rebuild.ts): adopted by the next recover if it matches the file.
   */
  private prebuilt: ImageRebuild | undefined;

  /**
   * etcd store.restore: rebuild the index from every stored revision, or adopt the one built
   * from the installed image beforehand, in slices between turns of the event loop.
   */
  private restore(): void {
    const b = this.backend;
    this.ci = b.metaNumber(META_CONSISTENT_INDEX);
    this.term = b.metaNumber(META_TERM);
    const finished = b.metaNumber(META_FINISHED_COMPACT);
    const scheduled = b.metaNumber(META_SCHEDULED_COMPACT);
    this.compactMainRev = this.hasMeta(META_FINISHED_COMPACT) ? finished : -1;
    const prebuilt = this.prebuilt;
    this.prebuilt = undefined;
    let build: IndexRebuild;
    if (prebuilt !== undefined && prebuilt.consistentIndex === this.ci && prebuilt.build.maxRev === b.maxRev()) {
      build = prebuilt.build;
    } else {
      build = new IndexRebuild();
      for (const row of b.indexRows()) build.add(row);
    }
    invariant(this.index.size === 0, 'the index must be cleared before a rebuild is adopted');
    this.index.adopt(build.index);
    this.currentRev = Math.max(this.currentRev, build.currentRev);
    // Tombstones whose history was compacted away, and the latest lease of every live key
    // (re-attached once the index is rebuilt, as etcd's restore does).
    const orphans = build.orphans;
    const keyToLease = build.keyToLease;
    if (this.currentRev < this.compactMainRev) this.currentRev = this.compactMainRev;
    const hasScheduled = this.hasMeta(META_SCHEDULED_COMPACT);
    if (hasScheduled && scheduled > this.compactMainRev) {
      this.compactMainRev = scheduled;
      this.scheduleCompaction(scheduled);
    }
    for (const r of orphans) {
      invariant(revMain(r) <= Math.max(this.compactMainRev, 0), 'tombstone without history above the compaction');
      b.deleteKv(r);
    }
    this.keyLeases = keyToLease;
    this.attachLeasedKeys();
  }

  /** StoreCore: every live key's lease (0 not kept), rebuilt with the index, kept by each put and delete. */
  keyLeases = new Map<string, LeaseId>();

  /**
   * Recovery: tells the lessor which keys carry which lease (etcd restore calls
   * Attach for each). An unknown lease is skipped, as etcd only logs it.
   */
  private attachLeasedKeys(): void {
    if (this.leases === NO_LEASES) return;
    for (const [k, id] of this.keyLeases) {
      try {
        this.leases.attach(id, keyFromString(k));
      } catch {
        // The lease is gone (revoked in a later entry being re-applied); the key will be deleted then.
      }
    }
  }

  private hasMeta(name: string): boolean {
    return this.backend.hasMeta(name);
  }

  private assertOpen(): void {
    if (this.closed) throw new ErrClosed();
  }

  // ---------------------------------------------------------------- state

  currentRevision(): number {
    return this.currentRev;
  }

  /** Revision of the last compaction (reads below it fail); 0 if never compacted. */
  compactRevision(): number {
    return Math.max(this.compactMainRev, 0);
  }

  consistentIndex(): number {
    return this.ci;
  }

  consistentTerm(): number {
    return this.term;
  }

  /**
   * The backend's bare connection, for tests and tools on a store of its own. Stores in a
   * member's backend do not use it: they register with the backend and write through its handle.
   */
  get db(): Backend['connection'] {
    this.backend.flushHeld();
    return this.shared.connection;
  }

  /** Counts writes made through `db` toward the backend's batch limit (see `db`). */
  noteWrites(n: number): void {
    this.backend.handle.countWrites(n);
  }

  /** Plugs in the lessor; keys found with leases at startup are attached to it now. */
  setLeaseHooks(hooks: LeaseHooks): void {
    this.leases = hooks;
    this.attachLeasedKeys();
  }

  /** The watchable store listens here. One observer. */
  setObserver(observer: ChangeObserver | null): void {
    invariant(observer === null || this.observer === null, 'kv store already has an observer');
    this.observer = observer;
  }

  // ---------------------------------------------------------------- applying

  /**
   * Applies one committed Raft entry. Returns null when `index` is at or below
   * the consistent index (already applied: skipped). Client-visible failures
   * come back in `error`; the entry is still consumed.
   */
  apply(index: number, term: number, op: KvOp): ApplyResult | null {
    this.assertOpen();
    if (!this.advanceConsistentIndex(index, term)) return null;
    let result: ApplyResult;
    try {
      result = this.execute(op);
    } catch (e) {
      if (!(e instanceof MvccError)) throw e;
      result = { revision: this.currentRev, error: e };
    }
    this.backend.commitIfFull();
    return result;
  }

  /**
   * Marks an entry that is not a kv op (lease grant/revoke, auth, members...)
   * as applied; false when it already was — the caller must then skip it.
   * Whatever the caller writes right after, in the same turn, shares the batch
   * transaction with this index.
   */
  markApplied(index: number, term: number): boolean {
    this.assertOpen();
    const fresh = this.advanceConsistentIndex(index, term);
    if (fresh) this.backend.commitIfFull();
    return fresh;
  }

  private advanceConsistentIndex(index: number, term: number): boolean {
    if (index <= this.ci) return false;
    invariant(term >= this.term, 'term of applied entries must not decrease');
    this.ci = index;
    this.term = term;
    // Persisted by the pre-commit hook, in the same transaction as the changes it covers.
    this.backend.countWrites(1);
    return true;
  }

  private execute(op: KvOp): ApplyResult {
    checkKvOp(op, Number.MAX_SAFE_INTEGER);
    if (op.range) return { range: this.range(op.range), revision: this.currentRev };
    if (op.put) return { put: this.put(op.put), revision: this.currentRev };
    if (op.deleteRange) return { deleteRange: this.deleteRange(op.deleteRange), revision: this.currentRev };
    if (op.txn) return { txn: this.txn(op.txn), revision: this.currentRev };
    if (op.compaction) return { compaction: this.compact(op.compaction), revision: this.currentRev };
    throw new Error('mvcc: empty kv op');
  }

  private write<T>(f: (txn: KvTxn) => T): T {
    const txn = new KvTxn(this);
    let out: T;
    try {
      out = f(txn);
    } catch (e) {
      // Validation happens before the first change; a throw after it would leave a half-applied revision.
      invariant(txn.changes.length === 0, `write transaction failed after changes: ${String(e)}`);
      throw e;
    }
    const events = txn.end();
    if (events.length > 0 && this.observer !== null) this.observer(this.currentRev, events);
    return out;
  }

  // ---------------------------------------------------------------- requests

  /** Range at the current state (serializable/linearizable reads and raft range ops). */
  range(req: RangeRequest): RangeResponse {
    this.assertOpen();
    this.ops.ranges++;
    return applyRange(new KvTxn(this), req);
  }

  put(req: PutRequest): PutResponse {
    this.assertOpen();
    const lease = leaseOf(req.lease);
    if (lease !== 0 && !this.leases.exists(lease)) throw new ErrLeaseNotFound();
    const res = this.write((txn) => applyPut(txn, req));
    this.ops.put(req);
    return res;
  }

  deleteRange(req: DeleteRangeRequest): DeleteRangeResponse {
    this.assertOpen();
    this.ops.deletes++;
    return this.write((txn) => applyDeleteRange(txn, req));
  }

  txn(req: TxnRequest): TxnResponse {
    this.assertOpen();
    const res = this.write((txn) => applyTxn(txn, req, this.leases));
    this.ops.txn(res);
    return res;
  }

  /**
   * Deletes the given keys in ONE revision (lease revoke). Keys are deleted in
   * byte order, as etcd sorts them, so every member hashes the same. Absent
   * keys are skipped. Calls leases.detach for each deleted key.
   * Returns the number deleted and the store revision afterwards.
   */
  deleteKeys(keys: Uint8Array[]): { deleted: number; revision: number } {
    this.assertOpen();
    const sorted = keys.map((k) => keyToString(k)).sort();
    const deleted = this.write((txn) => {
      let n = 0;
      let last: string | null = null;
      for (const k of sorted) {
        if (k === last) continue;
        last = k;
        n += txn.deleteRange({ start: k });
      }
      return n;
    });
    return { deleted, revision: this.currentRev };
  }

  /**
   * Compacts at `rev`: reads below it fail at once; old revisions are removed
   * in stages. Returns a promise that resolves when they are gone.
   * Throws ErrCompacted if rev ≤ the last compaction, ErrFutureRev if rev > current.
   */
  compact(req: CompactionRequest | number): Promise<void> {
    this.assertOpen();
    const rev = typeof req === 'number' ? req : numOf(req.revision);
    if (rev <= this.compactMainRev) throw new ErrCompacted();
    if (rev > this.currentRev) throw new ErrFutureRev();
    this.compactMainRev = rev;
    this.backend.setMeta(META_SCHEDULED_COMPACT, rev);
    // etcd forces a commit so the scheduled compaction survives a crash.
    this.backend.forceCommit();
    return this.scheduleCompaction(rev);
  }

  private scheduleCompaction(rev: number): Promise<void> {
    // A job belongs to one backend generation: closing or installing a snapshot stops it.
    const epoch = this.epoch;
    const target = {
      index: this.index,
      backend: this.backend,
      isOpen: () => !this.closed && epoch === this.epoch,
      mayRun: () => this.hashing === 0 && !this.readsBelow(rev) && !this.shared.applyInProgress,
    };
    const opts = { batchKeys: this.opts.compactionBatchKeys ?? 1000, sleepMs: this.opts.compactionSleepMs ?? 10, stats: this.timings?.compaction };
    const job = this.compactionChain.then(() => runCompaction(target, rev, opts));
    // Later compactions still run after a failed one; the failure surfaces through `job`.
    this.compactionChain = job.catch(() => undefined);
    return job;
  }

  /** Resolves when every scheduled compaction is done. */
  compactionDone(): Promise<void> {
    return this.compactionChain;
  }

  // ---------------------------------------------------------------- reads for watch

  /** The kv of `key` visible at main revision `rev`, or undefined (also when compacted). */
  kvAt(key: Uint8Array, rev: number): KeyValue | undefined {
    this.assertOpen();
    if (rev < this.compactMainRev || rev > this.currentRev || rev <= 0) return undefined;
    const r = this.index.get(keyToString(key), rev);
    if (r < 0) return undefined;
    const row = this.backend.getKv(r);
    return row === undefined ? undefined : rowToKv(row);
  }

  // ---------------------------------------------------------------- maintenance

  /** etcd HashKV(rev): rev 0 means the current revision. */
  hashKV(rev = 0): HashKvResult {
    const startMs = performance.now();
    try {
      return this.hashKVNow(rev);
    } finally {
      this.timings?.hashRevSeconds((performance.now() - startMs) / 1000);
    }
  }

  private hashKVNow(rev: number): HashKvResult {
    this.assertOpen();
    const compactRev = this.compactMainRev;
    if (rev > 0 && rev <= compactRev) throw new ErrCompacted();
    if (rev > 0 && rev > this.currentRev) throw new ErrFutureRev();
    const at = rev === 0 ? this.currentRev : rev;
    const keep = this.hashKeep(at, compactRev);
    return {
      hash: hashKvRevisions(this.backend, at, compactRev, keep),
      revision: this.currentRev,
      // etcd's HashByRev answers its compactMainRev as is: -1 before any compaction (found by
      // rpc_fields' field comparison: etcetera said 0).
      compactRevision: compactRev,
    };
  }

  /**
   * HashKV without blocking the event loop: rows are hashed in chunks with a
   * yield between them. Compaction batches wait meanwhile, since they could
   * delete rows the hash still has to read; new writes are above `rev`.
   */
  async hashKVAsync(rev = 0, chunkRows = 10_000): Promise<HashKvResult> {
    const startMs = performance.now();
    try {
      return await this.hashKVSliced(rev, chunkRows);
    } finally {
      this.timings?.hashRevSeconds((performance.now() - startMs) / 1000);
    }
  }

  /**
   * This store's backend as the base of an incremental snapshot (server/snapshot_delta.ts): what
   * a leader needs to know of it to send only what changed since.
   */
  deltaBase(): { consistentIndex: number; revision: number; maxRev: number; compactRevision: number } {
    this.assertOpen();
    return { consistentIndex: this.ci, revision: this.currentRev, maxRev: this.backend.maxRev(), compactRevision: this.compactMainRev };
  }

  /**
   * HashKV at `rev` computed at compaction revision `compactRev` (at or above this store's):
   * what a leader computed for a delta's base, whatever each side's own compaction progress.
   * Sliced as hashKVAsync.
   */
  async hashAtCompaction(rev: number, compactRev: number, chunkRows = 10_000): Promise<number> {
    invariant(compactRev >= this.compactMainRev, `hash at compaction ${compactRev}, below the store's ${this.compactMainRev}`);
    return (await this.hashKVSliced(rev, chunkRows, compactRev)).hash;
  }

  private async hashKVSliced(rev: number, chunkRows: number, compactAt?: number): Promise<HashKvResult> {
    this.assertOpen();
    const compactRev = compactAt ?? this.compactMainRev;
    // A delta's base may be compacted at its own revision (hashAtCompaction): only kept rows count then.
    if (rev > 0 && (compactAt === undefined ? rev <= compactRev : rev < compactRev)) throw new ErrCompacted();
    if (rev > 0 && rev > this.currentRev) throw new ErrFutureRev();
    const at = rev === 0 ? this.currentRev : rev;
    const result = { revision: this.currentRev, compactRevision: compactRev };
    const acc = new HashKvAccumulator(at, compactRev, this.hashKeep(at, compactRev));
    const backend = this.backend;
    const epoch = this.epoch;
    this.hashing++;
    try {
      let from = 0;
      for (;;) {
        const rows = backend.rowsBetween(from, lastOfMain(at), chunkRows);
        // Large values hash at ~100-200 MB/s here: a turn of the event loop every HASH_TURN_BYTES too.
        let bytes = 0;
        for (const row of rows) {
          acc.add(row);
          bytes += row.key.byteLength + row.value.byteLength;
          if (bytes >= HASH_TURN_BYTES) {
            bytes = 0;
            await new Promise((r) => setImmediate(r));
            this.assertOpen();
            invariant(epoch === this.epoch, 'backend replaced during HashKV');
          }
        }
        if (rows.length < chunkRows) break;
        from = rows[rows.length - 1]!.rev + 1;
        await new Promise((r) => setImmediate(r));
        this.assertOpen();
        invariant(epoch === this.epoch, 'backend replaced during HashKV');
      }
    } finally {
      this.hashing--;
    }
    return { hash: acc.digest(), ...result };
  }

  /** What a HashKV at `at` counts at or below the compaction (hash.ts hashKvKeep). */
  private hashKeep(at: number, compactRev: number): Set<number> {
    return hashKvKeep((rev) => this.index.keep(rev), at, compactRev);
  }

  /** etcd Hash: the whole backend (every table) except apply-position bookkeeping. */
  hash(): { hash: number; revision: number } {
    this.assertOpen();
    const startMs = performance.now();
    const hash = hashBackend(this.backend.handle);
    this.timings?.hashSeconds((performance.now() - startMs) / 1000);
    return { hash, revision: this.currentRev };
  }

  /** Writes the backend as one SQLite file (online backup); applies may continue meanwhile. */
  async snapshot(destPath: string): Promise<SnapshotInfo> {
    this.assertOpen();
    const info = { consistentIndex: this.ci, term: this.term, revision: this.currentRev };
    await this.shared.snapshot(destPath);
    return { ...info, sizeBytes: fs.statSync(destPath).size };
  }

  /** Defragments the backend (VACUUM). Blocks, as etcd's defrag does. */
  defragment(): { sizeBeforeBytes: number; sizeAfterBytes: number } {
    this.assertOpen();
    return this.shared.defragment();
  }

  /** Bytes of the database in use: its pages less the free ones (a defrag would shrink to about this). */
  sizeInUseBytes(): number {
    return this.shared.sizeInUseBytes();
  }

  /** Bytes the backend uses on disk. */
  sizeBytes(): number {
    return this.shared.sizeBytes();
  }

  /**
   * Range at the current state without holding the event loop: a large range is read in slices
   * with a yield between them, all at the revision current when it starts (see kvstore_range.ts).
   * `revision` is that revision, for the response header. Stops (rejects) once `signal` aborts.
   * A `spill` takes the kvs of a range that needs more than one turn (kvstore_range.ts).
   */
  async rangeAsync(req: RangeRequest, signal?: AbortSignal, spill?: RangeSpill): Promise<RangeReadResult> {
    const opts = { ...DEFAULT_RANGE_READ, ...this.opts.rangeRead };
    this.ops.ranges++;
    return this.readRestarting((target) => readRange(target, req, opts, signal, spill));
  }

  /**
   * A read-only txn (etcd serves those without a proposal) read like rangeAsync: compares and
   * checks at the revision current when it starts, then every range of the taken branches in
   * slices, all at that revision (or their own older one).
   */
  async txnReadOnlyAsync(req: TxnRequest, signal?: AbortSignal): Promise<TxnReadResult> {
    const opts = { ...DEFAULT_RANGE_READ, ...this.opts.rangeRead };
    const res = await this.readRestarting((target) => readTxn(target, req, readOnlyTxnPath(new KvTxn(this), req), opts, signal));
    this.ops.txn(res);
    return res;
  }

  /** Runs a sliced read on the current state; a snapshot install mid-read (null) restarts it. */
  private async readRestarting<T>(read: (target: RangeReadTarget) => Promise<T | null>): Promise<T> {
    // Installs are rare: a few tries suffice.
    for (let attempt = 0; attempt < RANGE_READ_ATTEMPTS_MAX; attempt++) {
      this.assertOpen();
      const epoch = this.epoch;
      const target: RangeReadTarget = {
        index: this.index,
        backend: this.backend,
        currentRev: this.currentRev,
        compactMainRev: this.compactMainRev,
        pinRead: (rev: number) => this.pinRead(rev),
        stillValid: () => {
          this.assertOpen();
          return epoch === this.epoch;
        },
      };
      const result = await read(target);
      if (result !== null) return result;
    }
    throw new Error(`read restarted ${RANGE_READ_ATTEMPTS_MAX} times by snapshot installs`);
  }

  private pinRead(rev: number): () => void {
    this.readPins.set(rev, (this.readPins.get(rev) ?? 0) + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const n = this.readPins.get(rev)! - 1;
      if (n === 0) this.readPins.delete(rev);
      else this.readPins.set(rev, n);
    };
  }

  /** True while a sliced read at a revision below `rev` is in progress. */
  private readsBelow(rev: number): boolean {
    for (const pinned of this.readPins.keys()) if (pinned < rev) return true;
    return false;
  }

  /**
   * Replaces the whole backend with a snapshot file (every store in it recovers, this one with
   * its index rebuilt). The same object stays valid for its users.
   */
  restoreFromSnapshot(snapshotPath: string): void {
    this.assertOpen();
    this.shared.restore(snapshotPath);
  }

  /**
   * Called when a snapshot restore has replaced the backend, before the index is rebuilt: `db`
   * is a new connection holding the snapshot's rows. A lessor on a store of its own reloads its
   * leases here (lessor.recover(kv.db)); leased keys are re-attached right after. (In a member's
   * backend the lessor registers before this store and recovers first by itself.)
   */
  onRestore(listener: () => void): void {
    this.restoreListeners.push(listener);
  }

  /** Called after a snapshot restore has rebuilt the index (the watchable store resyncs its watchers). */
  onRestored(listener: () => void): void {
    this.restoredListeners.push(listener);
  }

  /** Closes the store; the backend too when the store opened it (a member's backend is closed by the server). */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.backend.close();
  }

  /** Test hook: lose everything not yet committed, as a crash would. */
  crashForTest(): void {
    this.closed = true;
    this.shared.crashForTest();
  }

  get isClosed(): boolean {
    return this.closed;
  }
}
