/**
 * One lease (etcd's lease.Lease): its TTL, the last checkpointed remaining TTL, its expiry on this
 * member's clock (Infinity = "forever", i.e. not the leader), and the keys attached to it.
 */
import type { LeaseId } from "./types.js";

/** Expiry of every lease on a member that is not the leader: it never expires by itself there. */
export const FOREVER = Infinity;

const MS_PER_SEC = 1000;

export class Lease {
  /** Seconds, already raised to the minimum TTL. */
  readonly ttlSec: number;
  /** Last checkpointed remaining TTL in seconds; 0 = unset (the full TTL applies). */
  remainingTtlSec: number;
  /** When the lease expires, in the lessor clock's milliseconds; FOREVER when not primary. */
  expiryMs = FOREVER;
  /** When the expiry queue next looks at this lease (its expiry, or a revoke retry time). */
  notifyAtMs = FOREVER;
  expiryQueueIndex = -1;
  /** When the checkpoint queue next checkpoints this lease. */
  checkpointAtMs = FOREVER;
  checkpointQueueIndex = -1;
  /**
   * Attached keys as latin1 strings (one char per byte: compact in V8, and string order is byte
   * order). Allocated on first attach: many leases carry one key or none.
   */
  private keySet: Set<string> | null = null;

  constructor(
    readonly id: LeaseId,
    ttlSec: number,
    remainingTtlSec = 0,
  ) {
    this.ttlSec = ttlSec;
    this.remainingTtlSec = remainingTtlSec;
  }

  /** etcd's getRemainingTTL: the checkpointed remaining TTL if set, else the full TTL. */
  effectiveTtlSec(): number {
    return this.remainingTtlSec > 0 ? this.remainingTtlSec : this.ttlSec;
  }

  /** etcd's refresh(extend): expire `extendMs` plus the (remaining) TTL from now. */
  refresh(nowMs: number, extendMs: number): void {
    this.expiryMs = nowMs + extendMs + this.effectiveTtlSec() * MS_PER_SEC;
    this.notifyAtMs = this.expiryMs;
  }

  /** Renew: the full TTL from now (the checkpoint is cleared through Raft separately). */
  refreshFull(nowMs: number): void {
    this.expiryMs = nowMs + this.ttlSec * MS_PER_SEC;
    this.notifyAtMs = this.expiryMs;
  }

  forever(): void {
    this.expiryMs = FOREVER;
    this.notifyAtMs = FOREVER;
  }

  remainingMs(nowMs: number): number {
    return this.expiryMs - nowMs;
  }

  expired(nowMs: number): boolean {
    return this.expiryMs <= nowMs;
  }

  attach(key: string): void {
    if (this.keySet === null) this.keySet = new Set();
    this.keySet.add(key);
  }

  detach(key: string): void {
    if (this.keySet === null) return;
    this.keySet.delete(key);
    if (this.keySet.size === 0) this.keySet = null;
  }

  get keyCount(): number {
    return this.keySet === null ? 0 : this.keySet.size;
  }

  /** Attached keys in byte order (the order every member deletes them in). */
  sortedKeys(): string[] {
    if (this.keySet === null) return [];
    return [...this.keySet].sort();
  }
}

/** Key bytes <-> the latin1 string a lease stores (one char per byte, so order is preserved). */
export function keyToString(key: Uint8Array): string {
  return Buffer.from(key.buffer, key.byteOffset, key.byteLength).toString("latin1");
}

export function keyFromString(key: string): Uint8Array {
  return new Uint8Array(Buffer.from(key, "latin1"));
}
