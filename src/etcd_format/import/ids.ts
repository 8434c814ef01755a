/**
 * etcd's ids are exact uint64s (bigint here, as read from its files). etcetera's member, cluster
 * and raft ids are exact 64-bit too; its lease ids are still safe integers. This is the one place
 * an import narrows them, and it refuses what does not fit instead of rounding: an id that
 * changed would be another member or another lease.
 */
import type { NodeId } from "../../raft/types.js";


export class ImportRefusedError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ImportRefusedError";
  }
}

export function importNodeId(id: bigint, what: string): NodeId {
  if (id <= 0n || id >= 1n << 64n) throw new ImportRefusedError(`${what} ${id} is not a uint64 id`);
  return id;
}

export function importLeaseId(id: bigint, what: string): number {
  if (id < BigInt(Number.MIN_SAFE_INTEGER) || id > BigInt(Number.MAX_SAFE_INTEGER)) {
    throw new ImportRefusedError(`${what} ${id.toString(16)} needs 64 bits; etcetera's lease ids are below 2^53: cannot import without changing it`);
  }
  return Number(id);
}
