/**
 * etcd's ids are exact uint64s/int64s (bigint here, as read from its files). etcetera's member,
 * cluster, raft and lease ids are exact 64-bit too (lease ids in LeaseId's one representation).
 * This is the one place an import converts them, and it refuses what is not an id instead of
 * rounding: an id that changed would be another member or another lease.
 */
import { leaseIdFromInt64 } from "../../lease/lease_id.js";
import type { LeaseId } from "../../lease/types.js";
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

/** A lease id as etcetera holds it (exact: a number while safe, a bigint beyond); every int64 is one. */
export function importLeaseId(id: bigint, what: string): LeaseId {
  try {
    return leaseIdFromInt64(id);
  } catch {
    throw new ImportRefusedError(`${what} ${id} is not an int64`);
  }
}
