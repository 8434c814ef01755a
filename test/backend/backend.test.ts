/**
 * The backend room on its own: stores register their tables and write through one counted handle;
 * a snapshot restore hands every store a new handle, in registration order.
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import Database from "better-sqlite3";
import { afterEach, describe, expect, it } from "vitest";
import { Backend, type BackendStore } from "../../src/backend/backend.js";
import type { BatchTx, WriteStatement } from "../../src/backend/batch_tx.js";

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

function tmpFile(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "backend-test-"));
  dirs.push(dir);
  return path.join(dir, "db");
}

/** A store of one table that logs its recovers and counts its rows. */
class NoteStore implements BackendStore {
  readonly schema: string;
  readonly log: string[];
  tx: BatchTx | undefined;
  insert: WriteStatement<[string]> | undefined;
  rows = 0;
  preCommits = 0;

  constructor(
    readonly name: string,
    log: string[],
  ) {
    this.log = log;
    this.schema = `CREATE TABLE IF NOT EXISTS ${name} (v TEXT NOT NULL)`;
  }

  recover(tx: BatchTx): void {
    this.tx = tx;
    this.insert = tx.write(`INSERT INTO ${this.name} (v) VALUES (?)`);
    this.rows = tx.read<[], number>(`SELECT count(*) FROM ${this.name}`, "pluck").get() ?? 0;
    this.log.push(`${this.name}:${this.rows}`);
  }

  preCommit(): void {
    this.preCommits++;
  }
}

/** Rows of `table` the file holds as committed (a second connection sees only commits). */
function committedRows(file: string, table: string): number {
  const db = new Database(file, { readonly: true });
  try {
    return db.prepare(`SELECT count(*) FROM ${table}`).pluck().get() as number;
  } finally {
    db.close();
  }
}

describe("backend", () => {
  it("creates each store's tables when it registers and loads it at once", () => {
    const file = tmpFile();
    const be = Backend.open(file, { batchIntervalMs: 3_600_000 });
    const log: string[] = [];
    const a = new NoteStore("a", log);
    be.register(a);
    a.insert!.run("x");
    expect(() => be.register(new NoteStore("a", log))).toThrow(/registered twice/);
    be.close();
    const again = Backend.open(file, { batchIntervalMs: 3_600_000 });
    const b = new NoteStore("a", []);
    again.register(b);
    expect(b.rows).toBe(1);
    again.close();
  });

  it("counts every write of every store toward one batch limit, and commits there", () => {
    const file = tmpFile();
    const be = Backend.open(file, { batchIntervalMs: 3_600_000, batchLimit: 4 });
    const log: string[] = [];
    const a = new NoteStore("a", log);
    const b = new NoteStore("b", log);
    be.register(a);
    be.register(b);
    a.preCommits = b.preCommits = 0; // registering commits the tables
    a.insert!.run("1");
    b.insert!.run("1");
    a.insert!.run("2");
    be.commitIfFull();
    expect(committedRows(file, "a")).toBe(0);
    b.insert!.run("2");
    be.commitIfFull();
    expect(committedRows(file, "a")).toBe(2);
    expect(committedRows(file, "b")).toBe(2);
    expect(a.preCommits).toBe(1);
    expect(b.preCommits).toBe(1);
    be.close();
  });

  it("a statement that writes is refused as a read, and a read as a write", () => {
    const be = Backend.open(tmpFile(), { batchIntervalMs: 3_600_000 });
    const a = new NoteStore("a", []);
    be.register(a);
    expect(() => a.tx!.read("INSERT INTO a (v) VALUES ('x')")).toThrow(/returns no rows/);
    expect(() => a.tx!.write("SELECT v FROM a")).toThrow(/returns rows/);
    expect(() => a.tx!.ensureSchema("DELETE FROM a")).toThrow(/only create tables/);
    be.close();
  });

  it("a snapshot restore recovers every store from the image, in registration order, on a new handle", async () => {
    const file = tmpFile();
    const be = Backend.open(file, { batchIntervalMs: 3_600_000 });
    const log: string[] = [];
    const a = new NoteStore("a", log);
    const b = new NoteStore("b", log);
    be.register(a);
    be.register(b);
    a.insert!.run("in the image");
    const image = path.join(path.dirname(file), "image.db");
    await be.snapshot(image);
    a.insert!.run("after the image");
    b.insert!.run("after the image");
    const oldInsert = a.insert!;
    const oldTx = a.tx;
    be.restore(image);
    expect(log).toEqual(["a:0", "b:0", "a:1", "b:0"]);
    expect(a.tx).not.toBe(oldTx);
    expect(() => oldInsert.run("stale")).toThrow();
    a.insert!.run("on the new file");
    be.forceCommit();
    expect(committedRows(file, "a")).toBe(2);
    be.close();
  });

  it("sync commits the batch and leaves it on disk; a restore leaves no temporary file nor the old -wal beside the new one", async () => {
    const file = tmpFile();
    const be = Backend.open(file, { batchIntervalMs: 3_600_000 });
    const a = new NoteStore("a", []);
    be.register(a);
    a.insert!.run("one");
    const image = path.join(path.dirname(file), "image.db");
    await be.snapshot(image);
    a.insert!.run("two");
    expect(committedRows(file, "a")).toBe(1);
    await be.sync();
    expect(committedRows(file, "a")).toBe(2);
    be.restore(image);
    expect(fs.existsSync(`${file}.installing`)).toBe(false);
    // The new connection's -wal (if any) holds no frame of the old file.
    expect(fs.existsSync(`${file}-wal`) ? fs.statSync(`${file}-wal`).size : 0).toBe(0);
    expect(committedRows(file, "a")).toBe(1);
    be.close();
  });

  it("a restore while a reader is open reports the incomplete checkpoint and still installs the image", async () => {
    const file = tmpFile();
    const warnings: string[] = [];
    const be = Backend.open(file, { batchIntervalMs: 3_600_000, onIncompleteCheckpoint: (m) => warnings.push(m) });
    const a = new NoteStore("a", []);
    be.register(a);
    a.insert!.run("one");
    const image = path.join(path.dirname(file), "image.db");
    await be.snapshot(image);
    let restored: Promise<void> | undefined;
    const readerSaw = await be.withReadTransaction(async (reader) => {
      // Frames the open reader keeps from being checkpointed.
      a.insert!.run("two");
      be.forceCommit();
      restored = Promise.resolve().then(() => be.restore(image));
      await restored;
      return reader.prepare("SELECT count(*) FROM a").pluck().get() as number;
    });
    await restored;
    expect(readerSaw).toBe(1);
    expect(warnings.length).toBe(1);
    expect(warnings[0]).toContain("not fully checkpointed");
    expect(committedRows(file, "a")).toBe(1);
    be.close();
  });
});

describe("the image sent to a follower (Backend.snapshot, written by a worker)", () => {
  it("is one committed point: everything committed before the call, no torn commit, while commits go on", async () => {
    const file = tmpFile();
    const be = Backend.open(file, { batchIntervalMs: 3_600_000 });
    const a = new NoteStore("a", []);
    const b = new NoteStore("b", []);
    be.register(a);
    be.register(b);
    const big = "x".repeat(4096);
    // Each commit adds one row to both tables: an image holding a different count in each is torn.
    const commitOne = () => {
      a.insert!.run(big);
      b.insert!.run(big);
      be.forceCommit();
    };
    for (let i = 0; i < 2_000; i++) commitOne();
    const image = path.join(path.dirname(file), "image.db");
    const copying = be.snapshot(image);
    let during = 0;
    let done = false;
    void copying.finally(() => (done = true));
    while (!done) {
      commitOne();
      during++;
      await new Promise<void>((r) => setImmediate(r));
    }
    await copying;
    const inA = committedRows(image, "a");
    const inB = committedRows(image, "b");
    expect(inA, "rows of a and b in the image (one commit adds one to each)").toBe(inB);
    expect(inA).toBeGreaterThanOrEqual(2_000);
    expect(inA).toBeLessThanOrEqual(2_000 + during);
    expect(committedRows(file, "a")).toBe(2_000 + during);
    // A fresh, compact file: no -wal beside it, and it opens as a database of its own.
    expect(fs.existsSync(`${image}-wal`)).toBe(false);
    const check = new Database(image, { readonly: true });
    expect(check.pragma("integrity_check", { simple: true })).toBe("ok");
    check.close();
    console.log(`[backend image] ${inA} rows per table in the image; ${during} commits ran while the worker copied`);
    be.close();
  });

  it("installImage moves the image into place (no copy left behind) and every store recovers from it", async () => {
    const file = tmpFile();
    const be = Backend.open(file, { batchIntervalMs: 3_600_000 });
    const log: string[] = [];
    const a = new NoteStore("a", log);
    be.register(a);
    a.insert!.run("in the image");
    const image = path.join(path.dirname(file), "image.db");
    await be.snapshot(image);
    a.insert!.run("after the image");
    await be.installImage(image);
    expect(fs.existsSync(image), "the image was moved, not copied").toBe(false);
    expect(fs.existsSync(`${file}.installing`)).toBe(false);
    expect(log).toEqual(["a:0", "a:1"]);
    expect(committedRows(file, "a")).toBe(1);
    be.close();
  });
});

describe("checkpoints (checkpointer.ts: on a worker, never inside a commit on the event loop)", () => {
  async function until(what: string, ok: () => boolean, timeoutMs = 30_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!ok()) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  it("the main connection never checkpoints; the worker copies the -wal into the file, also after an install", async () => {
    const file = tmpFile();
    // Why the main connection took checkpoints back, if it did (the assertions name it).
    const told: string[] = [];
    const be = Backend.open(file, { batchIntervalMs: 20, onIncompleteCheckpoint: (m) => told.push(m) });
    const a = new NoteStore("a", []);
    be.register(a);
    expect(be.connection.pragma("wal_autocheckpoint", { simple: true })).toBe(0);
    const sizeAtStart = fs.statSync(file).size;
    const row = "x".repeat(4096);
    // 4 MiB of commits: SQLite's automatic checkpoint (1000 pages) would have run inside a COMMIT;
    // here the file stays as it was until the worker starts (at 1 MiB of -wal) and checkpoints.
    for (let i = 0; i < 1024; i++) {
      a.insert!.run(row);
      if (i % 64 === 63) be.forceCommit();
    }
    be.forceCommit();
    expect(fs.statSync(file).size, "no checkpoint ran on the main connection").toBe(sizeAtStart);
    await until("the worker's checkpoint", () => fs.statSync(file).size > 4 * 1024 * 1024);
    expect(committedRows(file, "a")).toBe(1024);

    const image = path.join(path.dirname(file), "image.db");
    await be.snapshot(image);
    await be.installImage(image);
    expect(be.connection.pragma("wal_autocheckpoint", { simple: true }), `checkpointer reports: ${told.join(" | ")}`).toBe(0);
    const afterInstall = fs.statSync(file).size;
    for (let i = 0; i < 1024; i++) {
      a.insert!.run(row);
      if (i % 64 === 63) be.forceCommit();
    }
    be.forceCommit();
    await until("a checkpoint of the installed file", () => fs.statSync(file).size > afterInstall + 3 * 1024 * 1024);
    expect(committedRows(file, "a")).toBe(2048);
    be.close();
  });
});

describe("the database's size (etcd: bolt's pages, what the quota and db_total_size count) and the -wal's", () => {
  it("is its pages, not the files; a -wal past its limit is started over and cut back once no reader holds it", async () => {
    const file = tmpFile();
    const limit = 256 * 1024;
    const checkpoints: { complete: boolean; walBytes: number }[] = [];
    const be = Backend.open(file, { batchIntervalMs: 60_000, walSizeLimitBytes: limit, onWalCheckpoint: (e) => checkpoints.push(e) });
    const a = new NoteStore("a", []);
    be.register(a);
    const row = "x".repeat(2000);
    const fill = (n: number): void => {
      for (let i = 0; i < n; i++) {
        a.insert!.run(row);
        if (i % 64 === 63) be.forceCommit();
      }
      be.forceCommit();
    };
    /** Commits one row at a time, letting the worker's answer in between, until `done` (at most 10). */
    const commitUntil = async (done: () => boolean): Promise<void> => {
      for (let i = 0; i < 10 && !done(); i++) {
        fill(1);
        await new Promise((r) => setImmediate(r));
      }
    };
    const walBytes = (): number => fs.statSync(`${file}-wal`).size;
    fill(64);
    // A reader held open across a burst (a client's snapshot stream): no checkpoint can finish,
    // so the -wal takes every frame of the burst; then the burst's rows are deleted.
    const reader = new Database(file, { readonly: true });
    reader.exec("BEGIN");
    expect(reader.prepare("SELECT count(*) FROM a").pluck().get()).toBe(64);
    fill(2048);
    be.connection.exec("DELETE FROM a");
    be.forceCommit();
    const walBurst = walBytes();
    expect(walBurst, "the burst went into the -wal").toBeGreaterThan(4 * 1024 * 1024);
    const pageSize = be.connection.pragma("page_size", { simple: true }) as number;
    const pages = be.connection.pragma("page_count", { simple: true }) as number;
    expect(be.sizeBytes()).toBe(pageSize * pages);
    expect(be.sizeBytes(), "the -wal's frames are not counted twice").toBeLessThan(fs.statSync(file).size + walBurst);
    expect(be.sizeInUseBytes(), "the deleted rows' pages are free").toBeLessThan(be.sizeBytes() / 2);

    // While the reader is open the -wal cannot start over: checkpoints are tried and say so.
    await commitUntil(() => checkpoints.length > 0);
    expect(checkpoints.length, "a checkpoint was tried").toBeGreaterThan(0);
    expect(checkpoints.every((c) => !c.complete), "no checkpoint completes under the reader").toBe(true);
    expect(walBytes()).toBeGreaterThan(walBurst);

    reader.exec("COMMIT");
    reader.close();
    await commitUntil(() => walBytes() <= limit);
    expect(walBytes(), "the -wal cut back to its limit once the reader closed").toBeLessThanOrEqual(limit);
    expect(checkpoints.at(-1)?.complete).toBe(true);
    const size = be.sizeBytes();
    expect(size, "a checkpoint moves pages, it does not change the database's size").toBe(pageSize * (be.connection.pragma("page_count", { simple: true }) as number));
    expect(fs.statSync(file).size, "the file holds every page but the last batch's").toBeGreaterThanOrEqual(size - 64 * pageSize);
    const rows = committedRows(file, "a");
    expect(rows).toBeGreaterThan(0);
    fill(3 * 1024);
    expect(committedRows(file, "a"), "writes go on after the restart").toBe(rows + 3 * 1024);
    be.close();
    expect(be.sizeBytes(), "a closed backend answers its last size").toBeGreaterThan(size);
  });
});
