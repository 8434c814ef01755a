import type { LeaseId } from './types.js';

/**
 * What the kv store needs from the lessor, injected so mvcc never imports lease.
 * All calls happen synchronously inside the apply of one Raft entry.
 */
export interface LeaseHooks {
  /** True when the lease is currently granted (a put with this lease is allowed). */
  exists(id: LeaseId): boolean;
  /** The key now belongs to the lease (put with lease ≠ 0). */
  attach(id: LeaseId, key: Uint8Array): void;
  /** The key no longer belongs to the lease (overwritten with another lease, or deleted). */
  detach(id: LeaseId, key: Uint8Array): void;
}

/** Used when no lessor is plugged in: every lease is unknown. */
export const NO_LEASES: LeaseHooks = {
  exists: () => false,
  attach: () => {},
  detach: () => {},
};
