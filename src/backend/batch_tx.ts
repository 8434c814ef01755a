/**
 * The one handle every store writes through (etcd's backend.BatchTx): statements on the backend's
 * connection, inside its open batch transaction. Each run of a write statement counts one write
 * toward the batch limit, so no store can write without the backend knowing; reads see every
 * write applied so far, committed or not.
 *
 * A handle belongs to one connection: after a snapshot restore the backend hands every store a
 * new one (BackendStore.recover), and statements prepared on the old one fail.
 */
import type { Database, Statement } from "better-sqlite3";
import { invariant } from "./errors.js";

/** A statement that writes; every run is one write of the batch. */
export interface WriteStatement<P extends unknown[]> {
  run(...params: P): void;
}

/** A statement that only reads. */
export interface ReadStatement<P extends unknown[], R> {
  get(...params: P): R | undefined;
  all(...params: P): R[];
  iterate(...params: P): IterableIterator<R>;
}

/** How a read returns its rows: objects by column name, arrays of values, or the first column. */
export type RowShape = "object" | "raw" | "pluck";

class CountedStatement<P extends unknown[]> implements WriteStatement<P> {
  constructor(
    private readonly stmt: Statement<P>,
    private readonly tx: BatchTx,
    private readonly writesPerRun: number,
  ) {}

  run(...params: P): void {
    this.tx.beforeWrite?.();
    this.stmt.run(...params);
    if (this.writesPerRun !== 0) this.tx.countWrites(this.writesPerRun);
  }
}

export class BatchTx {
  /** `countWrites` is the backend's batch counter (or a test's). */
  constructor(
    private readonly db: Database,
    readonly countWrites: (n: number) => void,
    /** Checked before every write runs (the backend refuses writes while a defrag holds it). */
    readonly beforeWrite?: () => void,
  ) {}

  /** Creates a store's tables if missing (CREATE ... IF NOT EXISTS only: schema, not data). */
  ensureSchema(ddl: string): void {
    invariant(!/\b(INSERT|UPDATE|DELETE|DROP)\b/i.test(ddl), `schema must only create tables: ${ddl}`);
    this.db.exec(ddl);
  }

  /**
   * A write statement; each run counts `writesPerRun` writes of the batch (a statement of several
   * rows counts each; 0 for rows already counted when the caller took them: see KvBackend.putKv).
   */
  write<P extends unknown[]>(sql: string, writesPerRun = 1): WriteStatement<P> {
    invariant(Number.isSafeInteger(writesPerRun) && writesPerRun >= 0, `writes per run ${writesPerRun}`);
    const stmt = this.db.prepare<P>(sql);
    invariant(!stmt.reader, `write statement returns rows: ${sql}`);
    return new CountedStatement(stmt, this, writesPerRun);
  }

  read<P extends unknown[], R>(sql: string, shape: RowShape = "object"): ReadStatement<P, R> {
    const stmt = this.db.prepare<P, R>(sql);
    invariant(stmt.reader, `read statement returns no rows: ${sql}`);
    if (shape === "raw") stmt.raw();
    else if (shape === "pluck") stmt.pluck();
    return stmt;
  }
}
