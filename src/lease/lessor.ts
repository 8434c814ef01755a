/**
 * The lessor (etcd's server/lease/lessor.go): grants, revokes, renews and checkpoints leases, and
 * tracks the keys attached to them.
 *
 * Two kinds of calls, as in etcd:
 * - Applied through Raft, identical on every member (deterministic, no clock involved in the
 *   outcome): grant, revoke, checkpoint, attach/detach (from the MVCC store), recover.
 * - Leader-local, decided by this member's clock: renew (keep-alive), timeToLive, promote/demote,
 *   and the two polls the server runs from its own timer: `expiredLeases()` (ids to revoke through
 *   Raft) and `dueCheckpoints()` (remaining TTLs to checkpoint through Raft).
 *
 * Only the primary lessor (the Raft leader's) lets leases expire. Other members hold every lease
 * "forever"; a member that becomes leader calls `promote(extendMs)`, which restarts every lease's
 * clock from its (checkpointed) remaining TTL plus the extension, and spreads leases that would
 * expire in the same second so that revokes do not pile up beyond `leaseRevokeRate`.
 *
 * The lessor owns no timer and never reads the wall clock: time comes from `options.now`.
 */
import type { Registry } from "prom-client";
import { LeaseExistsError, LeaseIdOutOfRangeError, LeaseNotFoundError, LeaseTtlTooLargeError, LessorNotPrimaryError } from "./errors.js";
import { FOREVER, Lease, keyFromString, keyToString } from "./lease.js";
import { LeaseIdGenerator, compareLeaseIds, isValidLeaseId } from "./lease_id.js";
import { LeaseQueue } from "./lease_queue.js";
import type { Backend } from "../backend/backend.js";
import type { BatchTx } from "../backend/batch_tx.js";
import { LEASE_SCHEMA, LeaseStore } from "./lease_store.js";
import { lessorMetrics, type LessorMetrics } from "./metrics.js";
import { DEFAULT_MIN_LEASE_TTL_SEC, MAX_LEASE_TTL_SEC } from "./ttl.js";
import type {
  Clock,
  LeaseCheckpoint,
  LeaseDatabase,
  LeaseGrantResult,
  LeaseHooks,
  LeaseId,
  LeaseTimeToLive,
  RangeDeleter,
} from "./types.js";

/** etcd's leaseRevokeRate: at most this many leases revoked per second. */
export const DEFAULT_LEASE_REVOKE_RATE = 1000;
/** etcd's defaultExpiredleaseRetryInterval: a lease handed out for revoke is handed out again after this. */
export const DEFAULT_EXPIRED_LEASE_RETRY_INTERVAL_MS = 3000;
/** etcd's defaultLeaseCheckpointInterval (5 minutes). */
export const DEFAULT_CHECKPOINT_INTERVAL_MS = 5 * 60 * 1000;
/** etcd's maxLeaseCheckpointBatchSize: checkpoints per Raft entry. */
export const DEFAULT_CHECKPOINT_BATCH_SIZE_MAX = 1000;
/** How often etcd's lessor loop looks for expired leases; the server's timer should use it. */
export const EXPIRY_POLL_INTERVAL_MS = 500;

const MS_PER_SEC = 1000;
/** Attempts nextLeaseId makes before giving up (ids collide only after the clock bits wrap). */
const ID_ATTEMPTS_MAX = 1024;

export interface LessorOptions {
  /**
   * The member's backend: the lessor registers the `lease` table there, writes through its
   * counted handle and reloads when a snapshot restore replaces it.
   */
  backend?: Backend;
  /** Otherwise a bare SQLite handle holding the `lease` table (created if missing): tests, tools. */
  db?: LeaseDatabase;
  /** Monotonic milliseconds; the only source of time. */
  now: Clock;
  /** With `db`: called with the number of rows written through it (a batch counter). */
  noteWrites?: (n: number) => void;
  /** Deletes a revoked lease's keys; may also be set later with setRangeDeleter (the store is built after the lessor). */
  rangeDeleter?: RangeDeleter;
  /** Shorter TTLs are raised to this (etcd: see minLeaseTtlSec in ttl.ts). Default 2 s (etcd's defaults). */
  minLeaseTtlSec?: number;
  /** etcd's leaseRevokeRate (default 1000/s): bounds expiredLeases() batches and promote's spreading. */
  leaseRevokeRate?: number;
  /** etcd's ExpiredLeasesRetryInterval (default 3 s). Must be > 0. */
  expiredLeaseRetryIntervalMs?: number;
  /** Enable remaining-TTL checkpoints (etcd --experimental-enable-lease-checkpoint). Default false. */
  checkpointing?: boolean;
  /** etcd --experimental-lease-checkpoint-interval (default 5 min). */
  checkpointIntervalMs?: number;
  /** Checkpoints per dueCheckpoints() batch (etcd's maxLeaseCheckpointBatchSize, 1000). */
  checkpointBatchSizeMax?: number;
  /** Persist checkpointed remaining TTLs so they survive a restart (etcd 3.6 always does; default true). */
  checkpointPersist?: boolean;
  /** This member's id (its low bits prefix server-chosen lease ids). Default 0. */
  memberId?: bigint;
  /** Wall-clock milliseconds at startup, seeding server-chosen lease ids (pass Date.now()). Default 0. */
  idSeedMs?: number;
  /** Prometheus registry for etcd_debugging_lease_* metrics. */
  registry?: Registry;
}

export interface TimeToLiveOptions {
  /** Also list the attached keys (LeaseTimeToLiveRequest.keys). */
  keys?: boolean;
}

function positiveInteger(name: string, value: number): number {
  if (!Number.isSafeInteger(value) || value <= 0) throw new RangeError(`${name} must be a positive integer, got ${value}`);
  return value;
}

export class Lessor implements LeaseHooks {
  private readonly now: Clock;
  private readonly minLeaseTtlSec: number;
  private readonly leaseRevokeRate: number;
  private readonly retryIntervalMs: number;
  private readonly checkpointing: boolean;
  private readonly checkpointIntervalMs: number;
  private readonly checkpointBatchSizeMax: number;
  private readonly checkpointPersist: boolean;
  private readonly ids: LeaseIdGenerator;
  private readonly metrics: LessorMetrics;
  private store!: LeaseStore;
  private readonly noteWrites: ((n: number) => void) | undefined;
  private rangeDeleter: RangeDeleter | undefined;
  private primary = false;
  private readonly leaseMap = new Map<LeaseId, Lease>();
  /** Leases by next time to look at them for expiry; holds every lease while primary, none otherwise. */
  private readonly expiryQueue = new LeaseQueue<Lease>({
    key: (l) => l.notifyAtMs,
    getIndex: (l) => l.expiryQueueIndex,
    setIndex: (l, i) => {
      l.expiryQueueIndex = i;
    },
  });
  /** Leases by next checkpoint time (only with checkpointing, only while primary). */
  private readonly checkpointQueue = new LeaseQueue<Lease>({
    key: (l) => l.checkpointAtMs,
    getIndex: (l) => l.checkpointQueueIndex,
    setIndex: (l, i) => {
      l.checkpointQueueIndex = i;
    },
  });
  /** Renewed leases whose checkpointed remaining TTL must be cleared through Raft (bounded by the lease count). */
  private readonly pendingClears = new Set<LeaseId>();

  constructor(options: LessorOptions) {
    this.now = options.now;
    this.rangeDeleter = options.rangeDeleter;
    this.minLeaseTtlSec = options.minLeaseTtlSec ?? DEFAULT_MIN_LEASE_TTL_SEC;
    if (!Number.isSafeInteger(this.minLeaseTtlSec) || this.minLeaseTtlSec < 0) {
      throw new RangeError(`minLeaseTtlSec must be a non-negative integer, got ${this.minLeaseTtlSec}`);
    }
    // 3/4 of the rate must be at least one lease per second for promote's spreading.
    this.leaseRevokeRate = positiveInteger("leaseRevokeRate", options.leaseRevokeRate ?? DEFAULT_LEASE_REVOKE_RATE);
    if (this.leaseRevokeRate < 4) throw new RangeError(`leaseRevokeRate must be at least 4, got ${this.leaseRevokeRate}`);
    // A zero retry interval would hand the same lease out again within one poll.
    this.retryIntervalMs = positiveInteger("expiredLeaseRetryIntervalMs", options.expiredLeaseRetryIntervalMs ?? DEFAULT_EXPIRED_LEASE_RETRY_INTERVAL_MS);
    this.checkpointing = options.checkpointing ?? false;
    this.checkpointIntervalMs = positiveInteger("checkpointIntervalMs", options.checkpointIntervalMs ?? DEFAULT_CHECKPOINT_INTERVAL_MS);
    this.checkpointBatchSizeMax = positiveInteger("checkpointBatchSizeMax", options.checkpointBatchSizeMax ?? DEFAULT_CHECKPOINT_BATCH_SIZE_MAX);
    this.checkpointPersist = options.checkpointPersist ?? true;
    this.ids = new LeaseIdGenerator(options.memberId ?? 0n, options.idSeedMs ?? 0);
    this.metrics = lessorMetrics(options.registry);
    this.noteWrites = options.noteWrites;
    if (options.backend !== undefined) {
      // Registering loads the leases now; a snapshot restore reloads them before the mvcc store re-attaches keys.
      options.backend.register({ name: "lease", schema: LEASE_SCHEMA, recover: (tx) => this.recoverFrom(tx) });
    } else {
      if (options.db === undefined) throw new TypeError("the lessor needs a backend or a db");
      this.store = LeaseStore.onDatabase(options.db, this.noteWrites);
      this.load();
    }
  }

  setRangeDeleter(rangeDeleter: RangeDeleter): void {
    this.rangeDeleter = rangeDeleter;
  }

  /** True while this member's lessor decides expiry (between promote and demote). */
  get isPrimary(): boolean {
    return this.primary;
  }

  /** Number of leases held. */
  get size(): number {
    return this.leaseMap.size;
  }

  /**
   * A server-chosen id for a LeaseGrant with ID 0, picked BEFORE proposing (every member must apply
   * the same id): unique, positive (int63, as etcd's), not held by a lease this member knows.
   */
  nextLeaseId(): LeaseId {
    for (let attempt = 0; attempt < ID_ATTEMPTS_MAX; attempt++) {
      const id = this.ids.next();
      if (!this.leaseMap.has(id)) return id;
    }
    throw new Error(`no free lease id after ${ID_ATTEMPTS_MAX} attempts`);
  }

  // ---- Applied through Raft ------------------------------------------------------------------

  /**
   * Grants a lease (apply of LeaseGrant). `ttlSec` below the minimum TTL is raised to it.
   * Throws LeaseNotFoundError for id 0 (as etcd's lessor: the server must have chosen an id),
   * LeaseIdOutOfRangeError for an id not in LeaseId's one representation, LeaseTtlTooLargeError above MaxLeaseTTL, LeaseExistsError.
   */
  grant(id: LeaseId, ttlSec: number): LeaseGrantResult {
    if (id === 0) throw new LeaseNotFoundError();
    if (!isValidLeaseId(id)) throw new LeaseIdOutOfRangeError(id);
    if (!Number.isSafeInteger(ttlSec)) throw new RangeError(`lease TTL must be an integer, got ${ttlSec}`);
    if (ttlSec > MAX_LEASE_TTL_SEC) throw new LeaseTtlTooLargeError();
    if (this.leaseMap.has(id)) throw new LeaseExistsError();

    const lease = new Lease(id, Math.max(ttlSec, this.minLeaseTtlSec));
    this.leaseMap.set(id, lease);
    this.store.put({ id, ttlSec: lease.ttlSec, remainingTtlSec: 0 });
    this.metrics.ttl.observe(lease.ttlSec);
    this.metrics.granted.inc();
    if (this.primary) {
      const nowMs = this.now();
      lease.refresh(nowMs, 0);
      this.expiryQueue.upsert(lease);
      this.scheduleCheckpoint(lease, nowMs);
    }
    return { id, ttlSec: lease.ttlSec };
  }

  /**
   * Revokes a lease (apply of LeaseRevoke, including revokes of expired leases): its keys are
   * deleted through the RangeDeleter in one call (one revision), in byte order, then the lease row.
   * Throws LeaseNotFoundError for an unknown id.
   */
  revoke(id: LeaseId): void {
    const lease = this.leaseMap.get(id);
    if (lease === undefined) throw new LeaseNotFoundError();
    const keys = lease.sortedKeys();
    if (keys.length > 0) {
      if (this.rangeDeleter === undefined) throw new Error(`lessor has no RangeDeleter to delete the ${keys.length} keys of lease ${id}`);
      // Deleted before the lease is forgotten: if the store throws, the lease and its keys stay together.
      this.rangeDeleter.deleteKeys(keys.map(keyFromString));
    }
    this.forget(lease);
    this.store.delete(id);
    this.metrics.revoked.inc();
  }

  /**
   * Applies a remaining-TTL checkpoint (apply of LeaseCheckpoint). Unknown leases are ignored, as
   * in etcd (the lease may have been revoked after the checkpoint was proposed).
   */
  checkpoint(id: LeaseId, remainingTtlSec: number): void {
    if (!Number.isSafeInteger(remainingTtlSec) || remainingTtlSec < 0) {
      throw new RangeError(`remaining TTL must be a non-negative integer, got ${remainingTtlSec}`);
    }
    const lease = this.leaseMap.get(id);
    if (lease === undefined) return;
    lease.remainingTtlSec = remainingTtlSec;
    if (this.checkpointPersist) this.store.put({ id, ttlSec: lease.ttlSec, remainingTtlSec });
    if (this.primary) this.scheduleCheckpoint(lease, this.now());
  }

  /** LeaseHooks: does the lease exist (a Put with this lease is accepted)? */
  exists(id: LeaseId): boolean {
    return this.leaseMap.has(id);
  }

  /** LeaseHooks: the key now carries this lease. Throws LeaseNotFoundError for an unknown lease. */
  attach(id: LeaseId, key: Uint8Array): void {
    const lease = this.leaseMap.get(id);
    if (lease === undefined) throw new LeaseNotFoundError();
    lease.attach(keyToString(key));
  }

  /** LeaseHooks: the key no longer carries this lease. No-op for an unknown lease. */
  detach(id: LeaseId, key: Uint8Array): void {
    this.leaseMap.get(id)?.detach(keyToString(key));
  }

  /**
   * Reloads every lease from the database (etcd's Recover, after the backend was replaced by a
   * snapshot). Attached keys are dropped: the MVCC store re-attaches them as it rebuilds its index.
   * If this member is primary, the reloaded leases start their clocks now.
   */
  recover(db?: LeaseDatabase): void {
    if (db !== undefined) this.store = LeaseStore.onDatabase(db, this.noteWrites);
    this.reload();
  }

  /** The backend (re)opened its file: the lease table on the new handle, every lease reloaded. */
  private recoverFrom(tx: BatchTx): void {
    this.store = new LeaseStore(tx);
    this.reload();
  }

  private reload(): void {
    this.expiryQueue.clear();
    this.checkpointQueue.clear();
    this.pendingClears.clear();
    this.leaseMap.clear();
    this.load();
    if (this.primary) {
      const nowMs = this.now();
      for (const lease of this.leaseMap.values()) this.startClock(lease, nowMs, 0);
    }
  }

  // ---- Leader-local --------------------------------------------------------------------------

  /**
   * Renews a lease (one LeaseKeepAlive request) and returns its granted TTL in seconds.
   * Throws LessorNotPrimaryError on a non-leader (the server forwards to the leader), and
   * LeaseNotFoundError for an unknown lease or one already expired (its revoke is on its way; etcd
   * waits for that revoke and then answers not found).
   */
  renew(id: LeaseId): number {
    if (!this.primary) throw new LessorNotPrimaryError();
    const lease = this.leaseMap.get(id);
    if (lease === undefined) throw new LeaseNotFoundError();
    const nowMs = this.now();
    if (lease.expired(nowMs)) throw new LeaseNotFoundError();
    // etcd clears a checkpointed remaining TTL through Raft on renew, so that a later leader
    // does not restore the stale remaining TTL; here the clear is queued for dueCheckpoints().
    if (this.checkpointing && lease.remainingTtlSec > 0) this.pendingClears.add(id);
    lease.refreshFull(nowMs);
    this.expiryQueue.upsert(lease);
    this.metrics.renewed.inc();
    return lease.ttlSec;
  }

  /**
   * The LeaseKeepAlive stream's answer for one request: the TTL, or 0 when the lease is unknown or
   * expired (etcd answers TTL 0 rather than an error). LessorNotPrimaryError still throws.
   */
  keepAlive(id: LeaseId): number {
    try {
      return this.renew(id);
    } catch (err) {
      if (err instanceof LeaseNotFoundError) return 0;
      throw err;
    }
  }

  /**
   * LeaseTimeToLive. Unknown lease: TTL -1, granted TTL 0, not an error (as etcd's gRPC layer).
   * On the leader TTL is the remaining time truncated to seconds, as etcd. etcd forwards this
   * request to the leader; if it is served on a non-leader here, TTL is the best estimate this
   * member has: the checkpointed remaining TTL, else the granted TTL.
   */
  timeToLive(id: LeaseId, options: TimeToLiveOptions = {}): LeaseTimeToLive {
    const lease = this.leaseMap.get(id);
    if (lease === undefined) return { id, ttlSec: -1, grantedTtlSec: 0, keys: [] };
    const ttlSec = lease.expiryMs === FOREVER ? lease.effectiveTtlSec() : Math.trunc(lease.remainingMs(this.now()) / MS_PER_SEC);
    const keys = options.keys === true ? lease.sortedKeys().map(keyFromString) : [];
    return { id, ttlSec, grantedTtlSec: lease.ttlSec, keys };
  }

  /** LeaseLeases: every lease id, soonest expiry first (ties by id). */
  leases(): LeaseId[] {
    return [...this.leaseMap.values()].sort(byExpiryThenId).map((l) => l.id);
  }

  /**
   * Becomes the primary lessor (this member became Raft leader). Every lease expires `extendMs`
   * plus its (checkpointed) remaining TTL from now (etcd extends by the election timeout, so that
   * clients have time to find the new leader). With at least `leaseRevokeRate` leases, leases that
   * would expire within the same second beyond 3/4 of the revoke rate are pushed later, as etcd.
   */
  promote(extendMs: number): void {
    if (!Number.isFinite(extendMs) || extendMs < 0) throw new RangeError(`extendMs must be a non-negative number, got ${extendMs}`);
    this.primary = true;
    const nowMs = this.now();
    for (const lease of this.leaseMap.values()) this.startClock(lease, nowMs, extendMs);
    if (this.leaseMap.size < this.leaseRevokeRate) return; // no possible pile-up
    this.spreadExpiries(nowMs, extendMs);
  }

  /** Stops deciding expiry (this member lost leadership): every lease lives forever here. */
  demote(): void {
    this.primary = false;
    for (const lease of this.leaseMap.values()) lease.forever();
    this.expiryQueue.clear();
    this.checkpointQueue.clear();
    this.pendingClears.clear();
  }

  /**
   * Expired leases the leader should revoke through Raft, at most `limit` (default half the revoke
   * rate: the server polls every EXPIRY_POLL_INTERVAL_MS, as etcd's loop). A returned lease is not
   * returned again until the retry interval passes, unless renewed meanwhile; once revoked, never.
   * Empty on a non-leader.
   */
  expiredLeases(limit = Math.floor(this.leaseRevokeRate / 2)): LeaseId[] {
    positiveInteger("limit", limit);
    if (!this.primary) return [];
    const nowMs = this.now();
    const ids: LeaseId[] = [];
    // Each step pushes the head past now, so the loop ends within one pass over the queue.
    while (ids.length < limit) {
      const head = this.expiryQueue.peek();
      if (head === undefined || head.notifyAtMs > nowMs) break;
      head.notifyAtMs = nowMs + this.retryIntervalMs;
      this.expiryQueue.upsert(head);
      if (head.expired(nowMs)) ids.push(head.id);
    }
    return ids;
  }

  /**
   * Remaining-TTL checkpoints the leader should propose through Raft (one LeaseCheckpointRequest),
   * at most `limit`. Includes clears (remaining 0) for leases renewed since their last checkpoint.
   * Empty unless checkpointing is enabled and this member is primary.
   */
  dueCheckpoints(limit = this.checkpointBatchSizeMax): LeaseCheckpoint[] {
    positiveInteger("limit", limit);
    if (!this.checkpointing || !this.primary) return [];
    const nowMs = this.now();
    const out: LeaseCheckpoint[] = [];
    for (const id of this.pendingClears) {
      if (out.length >= limit) return out;
      this.pendingClears.delete(id);
      if (this.leaseMap.has(id)) out.push({ id, remainingTtlSec: 0 });
    }
    while (out.length < limit) {
      const head = this.checkpointQueue.peek();
      if (head === undefined || head.checkpointAtMs > nowMs) break;
      this.checkpointQueue.pop();
      if (head.expired(nowMs)) continue;
      const remainingTtlSec = Math.ceil(head.remainingMs(nowMs) / MS_PER_SEC);
      if (remainingTtlSec >= head.ttlSec) continue;
      out.push({ id: head.id, remainingTtlSec });
    }
    return out;
  }

  /**
   * Every live lease's remaining TTL now, whether due or not, for a checkpoint before leadership
   * moves away on purpose (MoveLeader). Leases at their full TTL are left out (nothing to keep).
   * Empty unless checkpointing is enabled and this member is primary.
   */
  allCheckpoints(): LeaseCheckpoint[] {
    if (!this.checkpointing || !this.primary) return [];
    const nowMs = this.now();
    const out: LeaseCheckpoint[] = [];
    for (const lease of this.leaseMap.values()) {
      if (lease.expired(nowMs)) continue;
      const remainingTtlSec = Math.ceil(lease.remainingMs(nowMs) / MS_PER_SEC);
      if (remainingTtlSec < lease.ttlSec) out.push({ id: lease.id, remainingTtlSec });
    }
    return out;
  }

  // ---- Internals -----------------------------------------------------------------------------

  /** etcd's initAndRecover: leases come back with expiry "forever" and their checkpointed remaining TTL. */
  private load(): void {
    this.store.forEach((row) => {
      if (this.leaseMap.has(row.id)) throw new Error(`lease table corrupt: lease ${row.id} stored twice`);
      this.leaseMap.set(row.id, new Lease(row.id, Math.max(row.ttlSec, this.minLeaseTtlSec), row.remainingTtlSec));
    });
  }

  private forget(lease: Lease): void {
    this.leaseMap.delete(lease.id);
    this.expiryQueue.remove(lease);
    this.checkpointQueue.remove(lease);
    this.pendingClears.delete(lease.id);
  }

  private startClock(lease: Lease, nowMs: number, extendMs: number): void {
    lease.refresh(nowMs, extendMs);
    this.expiryQueue.upsert(lease);
    this.scheduleCheckpoint(lease, nowMs);
  }

  /** etcd's scheduleCheckpointIfNeeded: only leases that outlive one checkpoint interval. */
  private scheduleCheckpoint(lease: Lease, nowMs: number): void {
    if (!this.checkpointing) return;
    if (lease.effectiveTtlSec() * MS_PER_SEC <= this.checkpointIntervalMs) return;
    lease.checkpointAtMs = nowMs + this.checkpointIntervalMs;
    this.checkpointQueue.upsert(lease);
  }

  /**
   * etcd's Promote overlap adjustment: walk leases by expiry in one-second windows; once a window
   * holds more than 3/4 of the revoke rate, delay each further lease in proportion to the excess.
   * Leases n seconds ahead of the window's base are delayed n seconds less.
   */
  private spreadExpiries(nowMs: number, extendMs: number): void {
    const leases = [...this.leaseMap.values()].sort(byExpiryThenId);
    const first = leases[0];
    if (first === undefined) return;
    const targetExpiresPerSec = Math.floor((3 * this.leaseRevokeRate) / 4);
    let baseWindowMs = first.remainingMs(nowMs);
    let nextWindowMs = baseWindowMs + MS_PER_SEC;
    let expires = 0;
    for (const lease of leases) {
      const remainingMs = lease.remainingMs(nowMs);
      if (remainingMs > nextWindowMs) {
        baseWindowMs = remainingMs;
        nextWindowMs = baseWindowMs + MS_PER_SEC;
        expires = 1;
        continue;
      }
      expires++;
      if (expires <= targetExpiresPerSec) continue;
      const rateDelayMs = MS_PER_SEC * (expires / targetExpiresPerSec) - (remainingMs - baseWindowMs);
      const delayMs = Math.trunc(rateDelayMs);
      nextWindowMs = baseWindowMs + delayMs;
      this.startClock(lease, nowMs, delayMs + extendMs);
    }
  }
}

function byExpiryThenId(a: Lease, b: Lease): number {
  if (a.expiryMs !== b.expiryMs) return a.expiryMs < b.expiryMs ? -1 : 1;
  return compareLeaseIds(a.id, b.id);
}
