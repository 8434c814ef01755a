/**
 * Backend.defragmentOffThread: the VACUUM runs on a worker (vacuum_worker.ts) while the event loop
 * keeps running; the backend is held meanwhile (a write fails an invariant), the file shrinks,
 * every committed row survives, and the batch and the metrics brackets resume after.
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import Database from "better-sqlite3";
import { afterEach, describe, expect, it } from "vitest";
import { Backend, type BackendStore, type BackendTimings } from "../../src/backend/backend.js";
import type { BatchTx, WriteStatement } from "../../src/backend/batch_tx.js";

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

function tmpFile(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "defrag-off-thread-"));
  dirs.push(dir);
  return path.join(dir, "db");
}

class BlobStore implements BackendStore {
  readonly name = "blobs";
  readonly schema = "CREATE TABLE IF NOT EXISTS blobs (k INTEGER PRIMARY KEY, v BLOB NOT NULL)";
  insert!: WriteStatement<[number, Buffer]>;
  remove!: WriteStatement<[number]>;
  recover(tx: BatchTx): void {
    this.insert = tx.write("INSERT INTO blobs (k, v) VALUES (?, ?)");
    this.remove = tx.write("DELETE FROM blobs WHERE k % 4 != ?");
  }
}

function committed(file: string): { rows: number; sum: number } {
  const db = new Database(file, { readonly: true });
  try {
    return db.prepare("SELECT count(*) AS rows, coalesce(sum(k), 0) AS sum FROM blobs").get() as { rows: number; sum: number };
  } finally {
    db.close();
  }
}

describe("backend defrag off the event loop", () => {
  it("vacuums on a worker while the event loop runs, holds the backend, shrinks the file and keeps every row", async () => {
    const file = tmpFile();
    const events: string[] = [];
    const timings: BackendTimings = {
      commit: () => undefined,
      snapshot: () => undefined,
      defrag: (s) => events.push(`defrag ${s >= 0}`),
      defragInflight: (a) => events.push(`inflight ${a}`),
    };
    const be = Backend.open(file, { batchIntervalMs: 3_600_000, timings });
    const s = new BlobStore();
    be.register(s);
    const blob = Buffer.alloc(4096, 7);
    for (let k = 0; k < 4000; k++) s.insert.run(k, blob);
    be.forceCommit();
    s.remove.run(0); // three quarters freed: free pages for the VACUUM to drop
    be.forceCommit();
    const before = committed(file);
    expect(before.rows).toBe(1000);

    const defrag = be.defragmentOffThread();
    expect(be.defragInProgress).toBe(true);
    // The event loop turns while the worker vacuums (the old defrag held it throughout).
    let turns = 0;
    while (be.defragInProgress && turns < 1_000_000) {
      await new Promise<void>((r) => setImmediate(r));
      turns++;
      if (turns === 1) expect(() => s.insert.run(100_000, blob)).toThrow(/defrag holds it/);
    }
    const { sizeBeforeBytes, sizeAfterBytes } = await defrag;
    expect(turns).toBeGreaterThan(0);
    expect(be.defragInProgress).toBe(false);
    expect(sizeAfterBytes).toBeLessThan(sizeBeforeBytes / 2);
    expect(sizeAfterBytes).toBe(be.sizeBytes());
    expect(be.sizeInUseBytes()).toBeLessThanOrEqual(sizeAfterBytes);
    // The write refused while held never ran; the VACUUM kept every committed row.
    const after = committed(file);
    expect(after).toEqual(before);
    expect(events).toEqual(["inflight true", "inflight false", "defrag true"]);

    // The batch resumed: writes and commits work again.
    s.insert.run(200_000, blob);
    be.forceCommit();
    expect(committed(file).rows).toBe(after.rows + 1);
    be.close();
  });

  it("refuses a second defrag while one runs and a commit while held", async () => {
    const be = Backend.open(tmpFile(), { batchIntervalMs: 3_600_000 });
    const s = new BlobStore();
    be.register(s);
    s.insert.run(1, Buffer.alloc(10));
    const first = be.defragmentOffThread();
    await expect(be.defragmentOffThread()).rejects.toThrow(/already in progress/);
    expect(() => be.forceCommit()).toThrow(/defrag holds the backend/);
    await first;
    be.forceCommit();
    be.close();
  });
});
