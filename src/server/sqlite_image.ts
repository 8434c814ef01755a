/**
 * etcetera's own backend file as input for the offline snapshot tools (`snapshot status` and
 * `snapshot restore` of src/snapshot_cli.ts): a member's `member/snap/db`, or a snapshot of the
 * SQLite days (what Maintenance.Snapshot sent before commit 720c826: that same file followed by its
 * SHA-256). It is turned into the etcd 3.4 snapshot a running member would stream for the same
 * state (src/server/etcd_snapshot.ts reads the same tables), so both tools then work on etcd's
 * format only, and `snapshot status` of a stopped member's db prints what `etcdctl snapshot status`
 * prints for a snapshot saved from it just before it stopped.
 *
 * The input is never opened in place: a member's db may have a `-wal` beside it holding committed
 * transactions (a member killed before its checkpoint), and opening it would replay and checkpoint
 * that WAL into the user's file. The db (and its -wal) are copied into a scratch directory first,
 * and only the copy is opened.
 */
import Database from "better-sqlite3";
import { closeSync, copyFileSync, existsSync, fstatSync, mkdtempSync, openSync, readSync, rmSync, statSync, truncateSync, writeSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { EtcdFileError } from "../etcd_format/file_error.js";
import { streamEtcdSnapshot, type SnapshotStreamResult } from "../etcd_format/index.js";
import { verifySnapshotHash } from "../etcd_format/snapshot_hash.js";
import { etcdBackendContent } from "./etcd_snapshot.js";

/** The tables (and the columns read from them) every etcetera backend has had since its first snapshot. */
const REQUIRED_COLUMNS: Readonly<Record<string, readonly string[]>> = {
  kv: ["rev", "key", "value", "create_rev", "version", "lease", "tombstone"],
  meta: ["name", "value"],
  lease: ["id", "ttl", "remaining_ttl"],
  members: ["id", "value"],
  members_removed: ["id"],
  alarms: ["member_id", "alarm"],
};

export interface SqliteImageSnapshot {
  /** The etcd 3.4 snapshot file written (bbolt, then its SHA-256). */
  readonly path: string;
  /** True when the input carried a SHA-256 trailer and it matched. */
  readonly hashVerified: boolean;
  readonly stream: SnapshotStreamResult;
  /** Removes the scratch directory and the snapshot in it. */
  readonly dispose: () => void;
}

/**
 * Writes the etcd snapshot of the etcetera backend at `input` into a scratch directory (under
 * `scratchParent`, default the system's temporary directory). With `requireHash`, an input
 * without a SHA-256 trailer is refused, as etcd's restore refuses a bbolt file without one unless
 * told --skip-hash-check.
 */
export async function sqliteImageToEtcdSnapshot(input: string, options: { requireHash: boolean; scratchParent?: string }): Promise<SqliteImageSnapshot> {
  const { dbBytes, hashed } = verifySnapshotHash(input, { required: options.requireHash });
  checkWholePages(input, dbBytes, !hashed && existsSync(`${input}-wal`));
  const scratch = mkdtempSync(join(options.scratchParent ?? tmpdir(), "etcetera-sqlite-image-"));
  const dispose = () => rmSync(scratch, { recursive: true, force: true });
  try {
    const copy = join(scratch, "db");
    copyFileSync(input, copy);
    if (hashed) truncateSync(copy, dbBytes);
    // A WAL left beside a member's db belongs to it; a snapshot file never has one.
    if (!hashed && existsSync(`${input}-wal`)) copyFileSync(`${input}-wal`, `${copy}-wal`);
    const path = join(scratch, "snapshot.db");
    const stream = await writeSnapshotOf(input, copy, path);
    return { path, hashVerified: hashed, stream, dispose };
  } catch (err) {
    dispose();
    // A row that does not decode (a damaged page SQLite itself did not notice) is named by the input's file.
    if (err instanceof EtcdFileError || !(err instanceof Error)) throw err;
    throw new EtcdFileError(input, 0, `an etcetera SQLite backend that cannot be read: ${err.message}`);
  }
}

const SQLITE_MAGIC = Buffer.from("SQLite format 3\0", "latin1");
const SQLITE_HEADER_BYTES = 100;

/**
 * A SQLite file is whole pages, as many as its header counts (when that count is valid and no WAL
 * beside it holds pages the file does not have yet). A copy cut inside its last page's unused
 * tail reads back the same (SQLite zero-fills a short read), so quick_check cannot see such a
 * cut: the size must. Files that are not SQLite at all are left to the open's refusal.
 */
function checkWholePages(input: string, dbBytes: number, walBeside: boolean): void {
  const header = Buffer.alloc(SQLITE_HEADER_BYTES);
  const fd = openSync(input, "r");
  try {
    if (readSync(fd, header, 0, SQLITE_HEADER_BYTES, 0) < SQLITE_HEADER_BYTES || !header.subarray(0, SQLITE_MAGIC.length).equals(SQLITE_MAGIC)) return;
  } finally {
    closeSync(fd);
  }
  const raw = header.readUInt16BE(16);
  const pageSize = raw === 1 ? 65536 : raw;
  if (pageSize < 512 || (pageSize & (pageSize - 1)) !== 0) return;
  if (dbBytes % pageSize !== 0) {
    throw new EtcdFileError(input, dbBytes, `a SQLite database cut short: ${dbBytes} bytes are not a whole number of ${pageSize}-byte pages`);
  }
  // The header's page count is valid when its version-valid-for number is the change counter.
  const headerPages = header.readUInt32BE(28);
  const countValid = headerPages > 0 && header.readUInt32BE(92) === header.readUInt32BE(24);
  if (countValid && !walBeside && dbBytes / pageSize < headerPages) {
    throw new EtcdFileError(input, dbBytes, `a SQLite database cut short: ${dbBytes / pageSize} pages of the ${headerPages} its header counts`);
  }
}

async function writeSnapshotOf(input: string, copy: string, out: string): Promise<SnapshotStreamResult> {
  const db = openCopy(input, copy);
  try {
    checkSchema(input, db);
    db.exec("BEGIN");
    const fd = openSync(out, "wx");
    try {
      const result = await streamEtcdSnapshot(
        () => etcdBackendContent(db),
        (chunk) => {
          writeSync(fd, chunk.blob);
        },
      );
      // Postcondition: the file is the bbolt bytes the stream planned, then the 32-byte SHA-256.
      if (fstatSync(fd).size !== result.sizeBytes + result.sha256.length) {
        throw new Error(`snapshot of ${input}: wrote ${fstatSync(fd).size} bytes, the stream planned ${result.sizeBytes} + ${result.sha256.length}`);
      }
      return result;
    } finally {
      closeSync(fd);
      db.exec("COMMIT");
    }
  } finally {
    db.close();
  }
}

/** Opens the scratch copy, refusing (by the input's name) what is not a sound SQLite database. */
function openCopy(input: string, copy: string): Database.Database {
  let db: Database.Database | undefined;
  try {
    db = new Database(copy, { fileMustExist: true });
    // SQLite checks little at open: quick_check reads every page and index (etcd's status runs
    // bbolt's consistency check for the same reason).
    const problems = db.pragma("quick_check(10)", { simple: false }) as Array<{ quick_check: string }>;
    const bad = problems.map((p) => p.quick_check).filter((p) => p !== "ok");
    if (bad.length > 0) throw new Error(`integrity check failed: ${bad.join("; ")}`);
    db.pragma("query_only = 1");
    return db;
  } catch (err) {
    db?.close();
    if (err instanceof EtcdFileError) throw err;
    throw new EtcdFileError(input, 0, `an etcetera SQLite backend that cannot be read: ${(err as Error).message} (size ${statSync(input).size} bytes)`);
  }
}

/** Refuses a SQLite file that is not an etcetera backend, naming the missing table or column. */
function checkSchema(input: string, db: Database.Database): void {
  for (const [table, columns] of Object.entries(REQUIRED_COLUMNS)) {
    const have = new Set((db.pragma(`table_info(${table})`) as Array<{ name: string }>).map((c) => c.name));
    if (have.size === 0) throw new EtcdFileError(input, 0, `a SQLite database but not an etcetera backend: it has no table "${table}"`);
    const missing = columns.filter((c) => !have.has(c));
    if (missing.length > 0) throw new EtcdFileError(input, 0, `a SQLite database but not an etcetera backend: table "${table}" has no column ${missing.map((c) => `"${c}"`).join(", ")}`);
  }
}
