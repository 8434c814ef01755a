/** Test fixtures for the lessor: a fake clock, a real SQLite file in a temp dir, a recording RangeDeleter. */
import Database from "better-sqlite3";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Lessor, type LessorOptions } from "../../src/lease/lessor.js";
import type { LeaseDatabase, RangeDeleter } from "../../src/lease/types.js";

export class FakeClock {
  constructor(public ms = 1_000_000) {}
  readonly now = (): number => this.ms;
  advance(ms: number): void {
    this.ms += ms;
  }
}

/** A temp directory holding one SQLite file, opened as the MVCC backend would open it. */
export class TempDb {
  readonly dir = mkdtempSync(join(tmpdir(), "etcetera-lease-"));
  readonly path = join(this.dir, "db.sqlite");
  db: LeaseDatabase = this.open();

  open(): LeaseDatabase {
    const db = new Database(this.path);
    db.pragma("journal_mode = WAL");
    db.pragma("synchronous = OFF");
    return db;
  }

  /** Closes and reopens the file: a restart. */
  reopen(): LeaseDatabase {
    this.db.close();
    this.db = this.open();
    return this.db;
  }

  cleanup(): void {
    if (this.db.open) this.db.close();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** Records every deleteKeys call: a unit-test double for the MVCC store's deleter. */
export class RecordingDeleter implements RangeDeleter {
  readonly calls: string[][] = [];
  failNext = false;

  deleteKeys(keys: Uint8Array[]): void {
    if (this.failNext) {
      this.failNext = false;
      throw new Error("injected store failure");
    }
    this.calls.push(keys.map((k) => Buffer.from(k).toString("latin1")));
  }
}

export const enc = (s: string): Uint8Array => new Uint8Array(Buffer.from(s, "latin1"));
export const dec = (b: Uint8Array): string => Buffer.from(b).toString("latin1");

export interface Fixture {
  clock: FakeClock;
  tmp: TempDb;
  deleter: RecordingDeleter;
  lessor: Lessor;
  /** A new lessor on a reopened database (same clock, same deleter), as after a restart. */
  restart(extra?: Partial<LessorOptions>): Lessor;
}

export function fixture(extra: Partial<LessorOptions> = {}): Fixture {
  const clock = new FakeClock();
  const tmp = new TempDb();
  const deleter = new RecordingDeleter();
  const make = (more: Partial<LessorOptions>): Lessor => {
    return new Lessor({ db: tmp.db, now: clock.now, rangeDeleter: deleter, minLeaseTtlSec: 1, ...extra, ...more });
  };
  const f: Fixture = {
    clock,
    tmp,
    deleter,
    lessor: make({}),
    restart(more = {}) {
      tmp.reopen();
      f.lessor = make(more);
      return f.lessor;
    },
  };
  return f;
}
