/**
 * A local snapshot is saved off the raft loop (raft_loop.ts startSnapshot), so its ordering rules
 * are checked here on their own: Snapshots.take commits the backend at the call, before any later
 * apply, and hands RaftStorage the index that commit made durable, whatever was applied during its
 * fsyncs; RaftStorage.snapshotAt refuses, before writing anything, a snapshot the backend does not
 * hold durably (the WAL would release entries no other file holds: issue 20).
 */
import { existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterEach, describe, expect, it } from "vitest";
import { Backend } from "../../src/backend/backend.js";
import type { BatchTx, WriteStatement } from "../../src/backend/batch_tx.js";
import type { ConfState, Snapshot } from "../../src/raft/types.js";
import { EntryType } from "../../src/raft/types.js";
import { silentLogger } from "../../src/server/logger.js";
import { RaftStorage } from "../../src/server/raft_storage.js";
import { Snapshots } from "../../src/server/snapshots.js";

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
function tmp(): string {
  const d = mkdtempSync(join(tmpdir(), "snapshot-take-"));
  dirs.push(d);
  return d;
}

const VOTERS: ConfState = { voters: [1n], learners: [], votersOutgoing: [], learnersNext: [], autoLeave: false };

/** One table of applied indexes: the store's rows are what "applied to the backend" means here. */
class Applied {
  readonly name = "applied";
  readonly schema = "CREATE TABLE IF NOT EXISTS applied (i INTEGER NOT NULL)";
  insert: WriteStatement<[number]> | undefined;
  recover(tx: BatchTx): void {
    this.insert = tx.write("INSERT INTO applied (i) VALUES (?)");
  }
}

function committedMax(file: string): number {
  const db = new Database(file, { readonly: true });
  try {
    return (db.prepare("SELECT max(i) FROM applied").pluck().get() as number | null) ?? 0;
  } finally {
    db.close();
  }
}

describe("saving a local snapshot", () => {
  it("commits the backend at the call and releases only what that commit made durable, though applies go on during its fsyncs", async () => {
    const dir = tmp();
    const file = join(dir, "db");
    const backend = Backend.open(file, { batchIntervalMs: 3_600_000 });
    const store = new Applied();
    backend.register(store);
    let consistentIndex = 0;
    const apply = (i: number) => {
      store.insert!.run(i);
      consistentIndex = i;
    };
    for (let i = 1; i <= 15; i++) apply(i);
    const seen: Array<{ index: number; backendDurableIndex: number; committedThen: number }> = [];
    const snapshots = new Snapshots({
      backend,
      snapDir: dir,
      storage: {
        snapshotAt: async (index, confState, data, o) => {
          seen.push({ index, backendDurableIndex: o.backendDurableIndex, committedThen: committedMax(file) });
          return { metadata: { index, term: 1, confState }, data } satisfies Snapshot;
        },
      },
      consistentIndex: () => consistentIndex,
      logger: silentLogger(),
    });
    const taking = snapshots.take(15, 1, VOTERS);
    expect(committedMax(file), "committed at the call, before the fsyncs").toBe(15);
    for (let i = 16; i <= 20; i++) apply(i); // the raft loop goes on meanwhile
    await taking;
    expect(seen.map(({ index, backendDurableIndex }) => ({ index, backendDurableIndex }))).toEqual([{ index: 15, backendDurableIndex: 15 }]);
    expect(seen[0]!.committedThen).toBeGreaterThanOrEqual(15);
    backend.close();
  });

  it("RaftStorage refuses a snapshot past what the backend holds durably, before writing a file or a marker", async () => {
    const dir = tmp();
    const snapDir = join(dir, "snap");
    const opened = await RaftStorage.open({
      walDir: join(dir, "wal"),
      snapDir,
      memberId: 1n,
      clusterId: 7n,
      maxWals: 0,
      maxSnapshots: 5,
      snapshotCatchUpEntries: 2,
      logger: silentLogger(),
    });
    const s = opened.storage;
    const entries = Array.from({ length: 10 }, (_, i) => ({ term: 1, index: i + 1, type: EntryType.Normal, data: new Uint8Array([i]) }));
    await s.persist({ term: 1, vote: 0n, commit: 10 }, entries, undefined);
    await expect(s.snapshotAt(10, VOTERS, new Uint8Array(0), { backendDurableIndex: 8 })).rejects.toThrow(
      "invariant: snapshot at 10 would release raft entries the backend holds durably only up to 8",
    );
    expect(existsSync(snapDir) ? readdirSync(snapDir) : [], "no snapshot file").toEqual([]);
    expect(s.memory.firstIndex(), "nothing compacted").toBe(1);
    const snap = await s.snapshotAt(10, VOTERS, new Uint8Array(0), { backendDurableIndex: 10 });
    expect(snap.metadata.index).toBe(10);
    await s.close();
  });
});
