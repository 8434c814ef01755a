/**
 * The lease table (etcd's "lease" bucket, schema/lease.go): id, granted TTL and the last
 * checkpointed remaining TTL. Expiry is not stored: it is per-member clock state, rebuilt when a
 * member becomes leader. Attached keys are not stored either: the MVCC store re-attaches them from
 * its key-values at startup.
 *
 * Writes go through the backend's counted handle, so inside a member's backend they fall into its
 * batched transaction together with the key deletions of a revoke and the consistent index, and
 * count toward its batch limit.
 */
import { BatchTx, type ReadStatement, type WriteStatement } from "../backend/batch_tx.js";
import { isValidLeaseId, leaseIdFromInt64 } from "./lease_id.js";
import type { LeaseDatabase, LeaseId } from "./types.js";

/** The lease table, registered with the backend. */
export const LEASE_SCHEMA = "CREATE TABLE IF NOT EXISTS lease (id INTEGER PRIMARY KEY, ttl INTEGER NOT NULL, remaining_ttl INTEGER NOT NULL DEFAULT 0)";

export interface LeaseRow {
  id: LeaseId;
  ttlSec: number;
  remainingTtlSec: number;
}

interface RawLeaseRow {
  /** Decimal text (CAST AS TEXT): SQLite's INTEGER holds the whole int64, a JS number would not. */
  id: string;
  ttl: number;
  remaining_ttl: number;
}

export class LeaseStore {
  private readonly putStmt: WriteStatement<[LeaseId, number, number]>;
  private readonly deleteStmt: WriteStatement<[LeaseId]>;
  private readonly allStmt: ReadStatement<[], RawLeaseRow>;

  constructor(tx: BatchTx) {
    this.putStmt = tx.write("INSERT OR REPLACE INTO lease (id, ttl, remaining_ttl) VALUES (?, ?, ?)");
    this.deleteStmt = tx.write("DELETE FROM lease WHERE id = ?");
    this.allStmt = tx.read("SELECT CAST(id AS TEXT) AS id, ttl, remaining_ttl FROM lease ORDER BY lease.id");
  }

  /**
   * The table on a bare SQLite handle (tests, tools), created if missing; `noteWrites` hears of
   * each write, as a backend's batch counter would.
   */
  static onDatabase(db: LeaseDatabase, noteWrites: (n: number) => void = () => {}): LeaseStore {
    const tx = new BatchTx(db, noteWrites);
    tx.ensureSchema(LEASE_SCHEMA);
    return new LeaseStore(tx);
  }

  put(row: LeaseRow): void {
    this.putStmt.run(row.id, row.ttlSec, row.remainingTtlSec);
  }

  delete(id: LeaseId): void {
    this.deleteStmt.run(id);
  }

  /** Visits every stored lease, validated: a corrupt row is an error, never a silently wrong lease. */
  forEach(visit: (row: LeaseRow) => void): void {
    for (const raw of this.allStmt.iterate()) {
      let id: LeaseId;
      try {
        id = leaseIdFromInt64(raw.id);
      } catch {
        throw new Error(`lease table corrupt: bad id ${String(raw.id)}`);
      }
      if (!isValidLeaseId(id)) throw new Error(`lease table corrupt: bad id ${String(raw.id)}`);
      if (!Number.isSafeInteger(raw.ttl)) throw new Error(`lease table corrupt: lease ${raw.id} has bad ttl ${String(raw.ttl)}`);
      if (!Number.isSafeInteger(raw.remaining_ttl) || raw.remaining_ttl < 0) {
        throw new Error(`lease table corrupt: lease ${raw.id} has bad remaining_ttl ${String(raw.remaining_ttl)}`);
      }
      visit({ id, ttlSec: raw.ttl, remainingTtlSec: raw.remaining_ttl });
    }
  }
}
