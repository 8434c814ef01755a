/**
 * The lease table (etcd's "lease" bucket, schema/lease.go): id, granted TTL and the last
 * checkpointed remaining TTL. Expiry is not stored: it is per-member clock state, rebuilt when a
 * member becomes leader. Attached keys are not stored either: the MVCC store re-attaches them from
 * its key-values at startup.
 *
 * Statements run on the caller's handle, so inside the MVCC backend they fall into its batched
 * transaction together with the key deletions of a revoke and the consistent index.
 */
import type { Statement } from "better-sqlite3";
import type { LeaseDatabase, LeaseId } from "./types.js";

export interface LeaseRow {
  id: LeaseId;
  ttlSec: number;
  remainingTtlSec: number;
}

interface RawLeaseRow {
  id: number;
  ttl: number;
  remaining_ttl: number;
}

export class LeaseStore {
  private readonly putStmt: Statement<[number, number, number]>;
  private readonly deleteStmt: Statement<[number]>;
  private readonly allStmt: Statement<[], RawLeaseRow>;

  /** `noteWrites` tells the MVCC backend about each write, so its batch-size limit counts them. */
  constructor(
    db: LeaseDatabase,
    private readonly noteWrites: (n: number) => void = () => {},
  ) {
    db.exec("CREATE TABLE IF NOT EXISTS lease (id INTEGER PRIMARY KEY, ttl INTEGER NOT NULL, remaining_ttl INTEGER NOT NULL DEFAULT 0)");
    this.putStmt = db.prepare("INSERT OR REPLACE INTO lease (id, ttl, remaining_ttl) VALUES (?, ?, ?)");
    this.deleteStmt = db.prepare("DELETE FROM lease WHERE id = ?");
    this.allStmt = db.prepare<[], RawLeaseRow>("SELECT id, ttl, remaining_ttl FROM lease ORDER BY id");
  }

  put(row: LeaseRow): void {
    this.putStmt.run(row.id, row.ttlSec, row.remainingTtlSec);
    this.noteWrites(1);
  }

  delete(id: LeaseId): void {
    this.deleteStmt.run(id);
    this.noteWrites(1);
  }

  /** Visits every stored lease, validated: a corrupt row is an error, never a silently wrong lease. */
  forEach(visit: (row: LeaseRow) => void): void {
    for (const raw of this.allStmt.iterate()) {
      if (!Number.isSafeInteger(raw.id) || raw.id === 0) throw new Error(`lease table corrupt: bad id ${String(raw.id)}`);
      if (!Number.isSafeInteger(raw.ttl)) throw new Error(`lease table corrupt: lease ${raw.id} has bad ttl ${String(raw.ttl)}`);
      if (!Number.isSafeInteger(raw.remaining_ttl) || raw.remaining_ttl < 0) {
        throw new Error(`lease table corrupt: lease ${raw.id} has bad remaining_ttl ${String(raw.remaining_ttl)}`);
      }
      visit({ id: raw.id, ttlSec: raw.ttl, remainingTtlSec: raw.remaining_ttl });
    }
  }
}
