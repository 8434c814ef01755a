/**
 * The contracts between the lessor and the rest of etcetera. The lessor never imports the MVCC
 * store nor the server: they meet through these structural interfaces (TypeScript's structural
 * typing makes an identical interface declared in src/mvcc compatible).
 */
import type { Database } from "better-sqlite3";

/**
 * A lease id: etcd's LeaseID, an int64, held exactly in ONE representation per value: a number
 * while it is a safe integer (|id| <= 2^53 - 1: client-chosen ids, old data, cheap), a bigint
 * beyond (etcd's server-chosen ids use 63 bits). Because each value has one form, ids compare with
 * === and key Maps; lease_id.ts makes and checks the form (leaseIdFromInt64, isCanonicalLeaseId),
 * the codecs decode lease fields in it. 0 (a number) means "no lease" (etcd's NoLease).
 */
export type LeaseId = number | bigint;

/** etcd's NoLease: a key without a lease carries lease id 0. */
export const NO_LEASE: LeaseId = 0;

/** Milliseconds from an arbitrary origin, never going backwards (e.g. performance.now()). */
export type Clock = () => number;

/** A bare SQLite handle holding the lease table (tests, tools); in a member the lessor registers with the backend instead. */
export type LeaseDatabase = Database;

/**
 * Deletes keys for a revoked lease. Provided by the MVCC store; all keys of one call are deleted in
 * ONE revision (etcd's RangeDeleter/TxnDelete), in the order given (sorted bytewise, so every member
 * produces the same backend contents and hash). Never called with an empty list.
 */
export interface RangeDeleter {
  deleteKeys(keys: Uint8Array[]): void;
}

/**
 * What the MVCC store calls on the lessor (etcd's Lessor.Lookup/Attach/Detach):
 * - `exists` before accepting a Put with a lease (else "etcdserver: requested lease not found");
 * - `attach` when a key is written with a lease, and again for every leased key when the store
 *   rebuilds its index at startup (recovery). Throws LeaseNotFoundError for an unknown lease, as
 *   etcd's Attach errors (etcd logs it during recovery and panics during a Put).
 * - `detach` when a key leaves its lease (overwritten with another lease or none, or deleted).
 *   A no-op for an unknown lease: the lease may be the one being revoked (etcd only logs this).
 */
export interface LeaseHooks {
  exists(id: LeaseId): boolean;
  attach(id: LeaseId, key: Uint8Array): void;
  detach(id: LeaseId, key: Uint8Array): void;
}

/** A remaining-TTL checkpoint the leader proposes through Raft (etcd's pb.LeaseCheckpoint). */
export interface LeaseCheckpoint {
  id: LeaseId;
  /** Seconds; 0 clears a previous checkpoint (the full TTL applies again). */
  remainingTtlSec: number;
}

/** LeaseGrant's answer (the parts the lessor knows). */
export interface LeaseGrantResult {
  id: LeaseId;
  /** The granted TTL in seconds, after raising it to the minimum TTL. */
  ttlSec: number;
}

/** LeaseTimeToLive's answer, field for field as etcd's LeaseTimeToLiveResponse. */
export interface LeaseTimeToLive {
  id: LeaseId;
  /** Remaining seconds, truncated as etcd does; -1 for an unknown (revoked or expired) lease. */
  ttlSec: number;
  /** The TTL granted (after the minimum TTL was applied); 0 for an unknown lease. */
  grantedTtlSec: number;
  /** Attached keys, sorted bytewise; empty unless asked for. */
  keys: Uint8Array[];
}
