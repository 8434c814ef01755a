/**
 * Incremental snapshots (issue 19; docs/incremental_catchup.md): the leader's side writes a delta
 * for a follower's base, the follower's side applies one to its backend.
 *
 * When a delta is possible (otherwise the leader sends the full image, as before):
 * 1. the leader still holds every revision after the follower's: its compaction (scheduled or
 *    finished) is at or below the follower's revision. Not weaker: a key deleted at a revision the
 *    leader compacted lost its tombstone, and the follower, holding the key's older rows, could
 *    not learn of the deletion;
 * 2. both histories agree up to the follower's revision: HashKV over every revision ≤ it, both
 *    computed at the same compaction revision c = max(leader's, follower's) (a revision ≤ c is
 *    hashed only if a compaction at c keeps it), so the two sides' compaction progress does not
 *    matter. The leader hashes in its read transaction; the follower when the delta arrives;
 * 3. the delta is clearly smaller than the image (at most half of the pages in use).
 *
 * What travels: the kv rows above the follower's revision (in revision order, a page at a time
 * from one read transaction), the meta entries, and every other table whole (leases, auth,
 * members, alarms: small). A compaction the leader did since travels as its revision only: the
 * follower schedules the same compaction and runs it itself (deterministic given the same rows).
 */
import type Database from "better-sqlite3";
import { HashKvAccumulator, hashKvKeep } from "../mvcc/hash.js";
import type { KvRow } from "../mvcc/kv_backend.js";
import { META_CURSOR_KEY, META_CURSOR_REV, META_FINISHED_COMPACT, META_SCHEDULED_COMPACT } from "../mvcc/kvstore_compaction.js";
import { META_CONSISTENT_INDEX, META_TERM } from "../mvcc/kvstore.js";
import { lastOfMain, packRev, revMain } from "../mvcc/revision.js";
import { leaseColumnSql, leaseFromColumn } from "../mvcc/types.js";
import { type DeltaHeader, DeltaWriter, DELTA_VERSION, readDelta, RecordType, type SnapshotBase, type SqlValue, type TableMode } from "./snapshot_delta_format.js";

/**
 * Rows read per page (hashing and writing): a few ms between two turns of the event loop, and a
 * bounded read (64 rows of etcd's largest 1.5 MiB request are under 100 MiB; of 64 KiB values, 4 MiB).
 */
export const PAGE_ROWS = 64;
/** Hashing turns the event loop after this many bytes of keys and values. */
const TURN_BYTES = 1024 * 1024;
/** A delta is sent only when its kv bytes are at most this share of the image's pages in use. */
const DELTA_SHARE_MAX = 0.5;
/** The meta entries of the compaction's progress: each member keeps its own (a compaction travels as its revision). */
const COMPACTION_META = new Set([META_SCHEDULED_COMPACT, META_FINISHED_COMPACT, META_CURSOR_REV, META_CURSOR_KEY]);

/** The receiver's backend is not the base the delta was made for. */
export class DeltaBaseMismatchError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "DeltaBaseMismatchError";
  }
}

function nextTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

function metaValue(db: Database.Database, name: string): unknown {
  return db.prepare<[string], unknown>("SELECT value FROM meta WHERE name = ?").pluck().get(name);
}

/** A meta revision (scheduled or finished compaction), -1 when unset. */
function metaRev(db: Database.Database, name: string): number {
  const v = metaValue(db, name);
  return typeof v === "number" ? v : typeof v === "bigint" ? Number(v) : -1;
}

/** The compaction's main revision as a store reopened on `db` would have it (scheduled or finished), -1 before any. */
export function compactionOf(db: Database.Database): number {
  return Math.max(metaRev(db, META_FINISHED_COMPACT), metaRev(db, META_SCHEDULED_COMPACT));
}

function tablesOf(db: Database.Database): string[] {
  return db.prepare<[], string>("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name").pluck().all();
}

function quoted(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}

type RawKvRow = [number, Buffer, Buffer | null, number, number, number | string, number];

/** HashKV over every revision ≤ rev at compaction revision compactRev, read from `db` a page at a time. */
export async function hashRows(db: Database.Database, rev: number, compactRev: number, keep: Set<number>): Promise<number> {
  const acc = new HashKvAccumulator(rev, compactRev, keep);
  const page = db
    .prepare<[number, number, number], RawKvRow>(`SELECT rev, key, value, create_rev, version, ${leaseColumnSql("lease")}, tombstone FROM kv WHERE rev >= ? AND rev <= ? ORDER BY rev LIMIT ?`)
    .raw();
  const last = lastOfMain(rev);
  for (let from = 0; ; ) {
    const rows = page.all(from, last, PAGE_ROWS);
    let bytes = 0;
    for (const r of rows) {
      const row: KvRow = { rev: r[0], key: r[1], value: r[2] ?? Buffer.alloc(0), createRev: r[3], version: r[4], lease: leaseFromColumn(r[5]), tombstone: r[6] !== 0 };
      acc.add(row);
      // Large values hash at ~100-200 MB/s: a turn of the event loop every TURN_BYTES too.
      bytes += row.key.byteLength + row.value.byteLength;
      if (bytes >= TURN_BYTES) {
        bytes = 0;
        await nextTurn();
      }
    }
    if (rows.length < PAGE_ROWS) break;
    from = rows[rows.length - 1]![0] + 1;
    await nextTurn();
  }
  return acc.digest();
}

export type DeltaPlan =
  /** imageBytes: the leader's pages in use, about what the follower reads to hash the base. */
  | { kind: "delta"; header: DeltaHeader; kvRows: number; kvBytes: number; imageBytes: number }
  | { kind: "full"; reason: string };

/**
 * Decides, inside the leader's read transaction on `reader`, whether a delta can bring `base` up
 * to date, and computes its header (the HashKV of the base). `keep` is the leader's key index's
 * Keep, asked synchronously at the call (the read transaction began in the same turn, so it is
 * the index of the same state at and below the base's revision; later writes are above it, and a
 * compaction at or below it keeps every key's latest revision there).
 */
export async function planDelta(reader: Database.Database, base: SnapshotBase, keep: (rev: number) => Set<number>): Promise<DeltaPlan> {
  const ci = metaValue(reader, META_CONSISTENT_INDEX);
  const term = metaValue(reader, META_TERM);
  const consistentIndex = typeof ci === "number" ? ci : 0;
  const compactL = compactionOf(reader);
  const maxRev = reader.prepare<[], number | null>("SELECT max(rev) FROM kv").pluck().get() ?? 0;
  if (consistentIndex < base.consistentIndex) return { kind: "full", reason: `the leader's backend (index ${consistentIndex}) is behind the follower's (${base.consistentIndex})` };
  if (compactL > base.revision) return { kind: "full", reason: `the leader compacted at revision ${compactL}, past the follower's revision ${base.revision}` };
  if (maxRev < base.maxRev) return { kind: "full", reason: `the leader holds revisions up to ${maxRev} only, below the follower's ${base.maxRev}` };
  const hashCompactRevision = Math.max(compactL, base.compactRevision);
  // etcd's HashByRev: Keep at the hashed revision, as kvstore.ts hashKVSliced takes it (hashKvKeep).
  const keepSet = hashKvKeep(keep, base.revision, hashCompactRevision);
  const from = packRev(base.revision + 1, 0);
  const est = reader.prepare<[number], { n: number; bytes: number }>("SELECT count(*) AS n, coalesce(sum(length(key) + length(value)), 0) AS bytes FROM kv WHERE rev >= ?").get(from)!;
  const pageSize = reader.pragma("page_size", { simple: true }) as number;
  const pages = reader.pragma("page_count", { simple: true }) as number;
  const free = reader.pragma("freelist_count", { simple: true }) as number;
  const imageBytes = pageSize * (pages - free);
  if (est.bytes > imageBytes * DELTA_SHARE_MAX) {
    return { kind: "full", reason: `the changes (${est.bytes} bytes in ${est.n} revisions) are not clearly smaller than the image (${imageBytes} bytes)` };
  }
  const hash = await hashRows(reader, base.revision, hashCompactRevision, keepSet);
  const revision = Math.max(base.revision, revMain(maxRev), compactL);
  return {
    kind: "delta",
    kvRows: est.n,
    kvBytes: est.bytes,
    imageBytes,
    header: {
      version: DELTA_VERSION,
      base: { ...base, hash, hashCompactRevision },
      target: { consistentIndex, term: typeof term === "number" ? term : 0, revision, compactRevision: compactL },
    },
  };
}

/**
 * Writes the delta of `plan` from `reader` (the same read transaction) to the new file `path`:
 * the kv rows above the base's revision a page at a time, then every other table whole. Returns
 * the file's size. Values are read as SQLite stores them (INTEGER as int64).
 */
export async function writeDelta(reader: Database.Database, path: string, header: DeltaHeader): Promise<number> {
  const w = await DeltaWriter.create(path, header);
  try {
    for (const name of tablesOf(reader)) {
      const mode: TableMode = name === "kv" ? "append" : name === "meta" ? "merge" : "replace";
      if (name === "kv") {
        const page = reader.prepare<[bigint, number], SqlValue[]>("SELECT * FROM kv WHERE rev >= ? ORDER BY rev LIMIT ?").raw().safeIntegers(true);
        await w.table({ name, columns: page.columns().map((c) => c.name), mode });
        const revAt = page.columns().findIndex((c) => c.name === "rev");
        for (let from = BigInt(packRev(header.base.revision + 1, 0)); ; ) {
          const rows = page.all(from, PAGE_ROWS);
          for (const r of rows) await w.row(r);
          if (rows.length < PAGE_ROWS) break;
          from = (rows[rows.length - 1]![revAt] as bigint) + 1n;
          await nextTurn();
        }
      } else {
        const all = reader.prepare<[], SqlValue[]>(`SELECT * FROM ${quoted(name)}`).raw().safeIntegers(true);
        await w.table({ name, columns: all.columns().map((c) => c.name), mode });
        for (const r of all.all()) await w.row(r);
      }
    }
    await w.finish();
    return w.sizeBytes;
  } catch (e) {
    await w.abandon();
    throw e;
  }
}

/** The identity of the backend a delta applies to: what `base` says must still hold on `db`. */
export function checkBase(db: Database.Database, base: Pick<SnapshotBase, "consistentIndex" | "maxRev">): void {
  const ci = metaValue(db, META_CONSISTENT_INDEX);
  const consistentIndex = typeof ci === "number" ? ci : typeof ci === "bigint" ? Number(ci) : 0;
  const maxRev = db.prepare<[], number | null>("SELECT max(rev) FROM kv").pluck().get() ?? 0;
  if (consistentIndex !== base.consistentIndex || maxRev !== base.maxRev) {
    throw new DeltaBaseMismatchError(
      `the backend is at index ${consistentIndex}, revision ${maxRev} (packed), not the delta's base (index ${base.consistentIndex}, revision ${base.maxRev})`,
    );
  }
}

/**
 * Applies the delta at `path` to `db`, inside the transaction the caller opened (Backend.applyInPlace):
 * the base is checked first, rows are written a page at a time with a turn of the event loop
 * between pages, and the function returns only once the whole file was read and its checksum
 * matched, so the caller commits a delta whole or rolls it back. The leader's compaction, when
 * ahead of this backend's, is scheduled here (the store runs it once it recovers).
 */
export async function applyDelta(db: Database.Database, path: string, opts: { pageDelayMs?: number } = {}): Promise<DeltaHeader> {
  let header: DeltaHeader | undefined;
  let table: { name: string; mode: TableMode; insert: Database.Statement; revAt: number; nameAt: number } | undefined;
  let ended = false;
  const ownCompaction = compactionOf(db);
  const setMeta = db.prepare("INSERT OR REPLACE INTO meta (name, value) VALUES (?, ?)");
  for await (const r of readDelta(path)) {
    switch (r.type) {
      case RecordType.Header:
        header = r.header;
        checkBase(db, header.base);
        break;
      case RecordType.Table: {
        const t = r.table;
        const exists = db.prepare<[string], number>("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?").pluck().get(t.name);
        if (exists === undefined) throw new Error(`the delta carries table ${t.name}, which this backend does not have`);
        if (t.mode === "replace") db.prepare(`DELETE FROM ${quoted(t.name)}`).run();
        const cols = t.columns.map(quoted).join(", ");
        const verb = t.mode === "append" ? "INSERT" : "INSERT OR REPLACE";
        const insert = db.prepare(`${verb} INTO ${quoted(t.name)} (${cols}) VALUES (${t.columns.map(() => "?").join(", ")})`);
        table = { name: t.name, mode: t.mode, insert, revAt: t.columns.indexOf("rev"), nameAt: t.columns.indexOf("name") };
        if (t.mode === "append" && table.revAt < 0) throw new Error(`appended table ${t.name} has no rev column`);
        if (t.mode === "merge" && table.nameAt < 0) throw new Error(`merged table ${t.name} has no name column`);
        break;
      }
      case RecordType.Rows: {
        const t = table!;
        const h = header!;
        const minRev = BigInt(packRev(h.base.revision + 1, 0));
        for (const row of r.rows) {
          if (t.mode === "append") {
            const rev = row[t.revAt];
            if (typeof rev !== "bigint" || rev < minRev) throw new Error(`delta row at revision ${String(rev)} is not above the base's revision ${h.base.revision}`);
          } else if (t.mode === "merge" && COMPACTION_META.has(String(row[t.nameAt]))) {
            continue;
          }
          t.insert.run(...row);
        }
        if ((opts.pageDelayMs ?? 0) > 0) await new Promise((resolve) => setTimeout(resolve, opts.pageDelayMs));
        else await nextTurn();
        break;
      }
      case RecordType.End:
        ended = true;
        break;
    }
  }
  if (header === undefined || !ended) throw new Error(`delta ${path} is incomplete`);
  // The leader's compaction, replayed here: scheduled, and run by the store when it recovers.
  if (header.target.compactRevision > ownCompaction) {
    setMeta.run(META_SCHEDULED_COMPACT, header.target.compactRevision);
  }
  checkBase(db, { consistentIndex: header.target.consistentIndex, maxRev: db.prepare<[], number | null>("SELECT max(rev) FROM kv").pluck().get() ?? 0 });
  return header;
}
