/**
 * The crash-consistency layer itself, on a real FUSE mount: what was made durable survives a power
 * cut, and nothing else does.
 */
import { execFile, spawn } from "node:child_process";
import { closeSync, existsSync, fsyncSync, ftruncateSync, linkSync, mkdirSync, openSync, readFileSync, readdirSync, renameSync, rmSync, unlinkSync, writeSync } from "node:fs";
import { createRequire } from "node:module";
import { join, resolve } from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { LazyFs, buildLazyFs, isMounted, scratch, unmountAll } from "./lazyfs.js";

const ROOT = resolve(import.meta.dirname, "../..");
const require_ = createRequire(import.meta.url);

function write(path: string, data: string, opts: { fsync?: boolean; flags?: string; at?: number } = {}): void {
  const fd = openSync(path, opts.flags ?? "a");
  writeSync(fd, data, opts.at);
  if (opts.fsync === true) fsyncSync(fd);
  closeSync(fd);
}

function fsyncPath(path: string): void {
  const fd = openSync(path, "r");
  fsyncSync(fd);
  closeSync(fd);
}

let s = scratch("lazyfs-test");
let fs: LazyFs | undefined;

async function mount(opts: { seed?: number; tear?: boolean } = {}): Promise<string> {
  fs = await LazyFs.mount({ disk: s.disk, work: s.work, mountpoint: s.mnt, log: s.log, ...opts });
  return s.mnt;
}

/** Cuts the power and mounts again on what is left; returns the cut's log. */
async function cutAndRemount(opts: { seed?: number; tear?: boolean } = {}): Promise<string> {
  const log = await fs!.powerCut();
  await mount(opts);
  return log;
}

afterEach(async () => {
  await unmountAll();
  s.remove();
  s = scratch("lazyfs-test");
});

afterAll(async () => {
  await unmountAll();
  s.remove();
  expect(isMounted(s.mnt)).toBe(false);
});

describe("lazyfs", () => {
  it("builds with gcc against libfuse3", () => {
    expect(existsSync(buildLazyFs())).toBe(true);
  });

  it("keeps fsynced data and drops the unsynced tail, logging the dropped range", async () => {
    const m = await mount();
    write(join(m, "f"), "durable", { fsync: true });
    fsyncPath(m);
    write(join(m, "f"), "+volatile");
    // Reads see the volatile layer while the power is on.
    expect(readFileSync(join(m, "f"), "utf8")).toBe("durable+volatile");
    const log = await cutAndRemount();
    expect(readFileSync(join(m, "f"), "utf8")).toBe("durable");
    expect(log).toMatch(/lost-write file=\/f id=\d+ off=7 len=9/);
  });

  it("drops data that was written and closed but never fsynced", async () => {
    const m = await mount();
    write(join(m, "f"), "v1", { fsync: true });
    fsyncPath(m);
    write(join(m, "f"), "XX", { flags: "r+", at: 0 });
    expect(readFileSync(join(m, "f"), "utf8")).toBe("XX");
    await cutAndRemount();
    expect(readFileSync(join(m, "f"), "utf8")).toBe("v1");
  });

  it("loses a created file whose directory was not fsynced, even when the file was", async () => {
    const m = await mount();
    mkdirSync(join(m, "d"));
    fsyncPath(m);
    write(join(m, "d", "kept"), "k", { fsync: true });
    fsyncPath(join(m, "d"));
    write(join(m, "d", "lost"), "l", { fsync: true });
    const log = await cutAndRemount();
    expect(readdirSync(join(m, "d")).sort()).toEqual(["kept"]);
    expect(log).toContain("lost-entry path=/d/lost kind=file");
  });

  it("makes a never-fsynced file empty when only its directory was fsynced", async () => {
    const m = await mount();
    write(join(m, "f"), "data");
    fsyncPath(m);
    await cutAndRemount();
    expect(readFileSync(join(m, "f"), "utf8")).toBe("");
  });

  it("undoes a rename not covered by a directory fsync, keeps one that is", async () => {
    const m = await mount();
    write(join(m, "a.tmp"), "A", { fsync: true });
    write(join(m, "b.tmp"), "B", { fsync: true });
    fsyncPath(m);
    renameSync(join(m, "a.tmp"), join(m, "a"));
    fsyncPath(m);
    renameSync(join(m, "b.tmp"), join(m, "b"));
    expect(readdirSync(m).sort()).toEqual(["a", "b"]);
    const log = await cutAndRemount();
    expect(readdirSync(m).sort()).toEqual(["a", "b.tmp"]);
    expect(readFileSync(join(m, "a"), "utf8")).toBe("A");
    expect(readFileSync(join(m, "b.tmp"), "utf8")).toBe("B");
    expect(log).toContain("undone-unlink path=/b.tmp");
  });

  it("brings back an unlinked file until the directory is fsynced", async () => {
    const m = await mount();
    write(join(m, "x"), "x", { fsync: true });
    write(join(m, "y"), "y", { fsync: true });
    fsyncPath(m);
    unlinkSync(join(m, "x"));
    fsyncPath(m);
    unlinkSync(join(m, "y"));
    await cutAndRemount();
    expect(readdirSync(m).sort()).toEqual(["y"]);
  });

  it("keeps a file's old size until the file is fsynced after a truncate", async () => {
    const m = await mount();
    write(join(m, "t"), "0123456789", { fsync: true });
    write(join(m, "u"), "0123456789", { fsync: true });
    fsyncPath(m);
    for (const name of ["t", "u"]) {
      const fd = openSync(join(m, name), "r+");
      ftruncateSync(fd, 3);
      if (name === "u") fsyncSync(fd);
      closeSync(fd);
    }
    await cutAndRemount();
    expect(readFileSync(join(m, "t"), "utf8")).toBe("0123456789");
    expect(readFileSync(join(m, "u"), "utf8")).toBe("012");
  });

  it("moves a directory as a whole (the WAL's <dir>.tmp → <dir>)", async () => {
    const m = await mount();
    mkdirSync(join(m, "wal.tmp"));
    write(join(m, "wal.tmp", "0.wal"), "segment", { fsync: true });
    fsyncPath(join(m, "wal.tmp"));
    renameSync(join(m, "wal.tmp"), join(m, "wal"));
    fsyncPath(m);
    await cutAndRemount();
    expect(readdirSync(m)).toEqual(["wal"]);
    expect(readFileSync(join(m, "wal", "0.wal"), "utf8")).toBe("segment");
  });

  it("swaps two directories by renames, and drops a removed one, at the parent's fsync", async () => {
    const m = await mount();
    for (const d of ["a", "b", "c"]) {
      mkdirSync(join(m, d));
      write(join(m, d, "f"), d, { fsync: true });
      fsyncPath(join(m, d));
    }
    fsyncPath(m);
    renameSync(join(m, "a"), join(m, "t"));
    renameSync(join(m, "b"), join(m, "a"));
    renameSync(join(m, "t"), join(m, "b"));
    rmSync(join(m, "c"), { recursive: true });
    fsyncPath(m);
    await cutAndRemount();
    expect(readdirSync(m).sort()).toEqual(["a", "b"]);
    expect(readFileSync(join(m, "a", "f"), "utf8")).toBe("b");
    expect(readFileSync(join(m, "b", "f"), "utf8")).toBe("a");
  });

  it("keeps hard links to one inode: an fsync through either name is seen through both", async () => {
    const m = await mount();
    write(join(m, "x"), "old", { fsync: true });
    linkSync(join(m, "x"), join(m, "y"));
    fsyncPath(m);
    write(join(m, "y"), "new", { flags: "r+", at: 0, fsync: true });
    await cutAndRemount();
    expect(readFileSync(join(m, "x"), "utf8")).toBe("new");
    expect(readFileSync(join(m, "y"), "utf8")).toBe("new");
  });

  it("makes O_DSYNC writes durable as they return", async () => {
    const m = await mount();
    write(join(m, "w"), "", { fsync: true });
    fsyncPath(m);
    write(join(m, "w"), "synced-write", { flags: "as" });
    await cutAndRemount();
    expect(readFileSync(join(m, "w"), "utf8")).toBe("synced-write");
  });

  it("tears the newest unsynced write at a seeded byte, the same byte for the same seed", async () => {
    const kept: number[] = [];
    for (const seed of [11, 11, 12]) {
      const m = await mount({ seed, tear: true });
      write(join(m, "f"), "base|", { fsync: true });
      fsyncPath(m);
      write(join(m, "f"), "older-unsynced|");
      write(join(m, "other"), "not the newest");
      write(join(m, "f"), "0123456789abcdef", { flags: "r+", at: 5 });
      const log = await fs!.powerCut();
      await mount();
      const after = readFileSync(join(m, "f"), "utf8");
      const torn = /torn-write file=\/f id=\d+ off=5 len=16 kept=(\d+)/.exec(log);
      expect(torn, log).not.toBeNull();
      const k = Number(torn![1]);
      expect(k).toBeGreaterThanOrEqual(1);
      expect(k).toBeLessThan(16);
      // A prefix of the torn write reached the disk; nothing of the older unsynced write beyond it did.
      expect(after).toBe("base|" + "0123456789abcdef".slice(0, k));
      kept.push(k);
      await fs!.powerCut();
      s.remove();
      s = scratch("lazyfs-test");
    }
    expect(kept[0]).toBe(kept[1]);
  });

  it("with --writeback, a seeded subset of the unsynced pages reaches the disk, the same subset for the same seed", async () => {
    const pages = 64;
    const survivors: string[] = [];
    for (const seed of [5, 5]) {
      fs = await LazyFs.mount({ disk: s.disk, work: s.work, mountpoint: s.mnt, log: s.log, seed, writebackPercent: 50 });
      write(join(s.mnt, "f"), "", { fsync: true });
      fsyncPath(s.mnt);
      const fd = openSync(join(s.mnt, "f"), "r+");
      for (let p = 0; p < pages; p++) writeSync(fd, Buffer.alloc(4096, 65 + (p % 26)), 0, 4096, p * 4096);
      closeSync(fd);
      const log = await fs.powerCut();
      await mount();
      const after = readFileSync(join(s.mnt, "f"));
      // Which pages made it: a page is either all there or all zeros (a hole below the end) or past the end.
      const map = Array.from({ length: pages }, (_, p) => (after.length >= (p + 1) * 4096 && after[p * 4096] === 65 + (p % 26) ? "1" : "0")).join("");
      const kept = map.split("").filter((c) => c === "1").length;
      expect(kept, log).toBeGreaterThan(0);
      expect(kept, log).toBeLessThan(pages);
      expect(log).toContain("written-back file=/f");
      survivors.push(map);
      await fs!.powerCut();
      s.remove();
      s = scratch("lazyfs-test");
    }
    expect(survivors[0]).toBe(survivors[1]);
  });

  it("unmounts itself when the process that started it dies (no mount outlives a killed test run)", async () => {
    const bin = buildLazyFs();
    // sh stays lazyfs's parent (the trailing `true` keeps it from exec'ing lazyfs), and is then killed.
    const sh = spawn("sh", ["-c", `'${bin}' --disk '${s.disk}' --work '${s.work}' --die-with-parent '${s.mnt}'; true`], { stdio: "ignore" });
    const deadline = Date.now() + 10_000;
    while (!isMounted(s.mnt) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    expect(isMounted(s.mnt)).toBe(true);
    sh.kill("SIGKILL");
    while (isMounted(s.mnt) && Date.now() < deadline + 10_000) await new Promise((r) => setTimeout(r, 20));
    expect(isMounted(s.mnt)).toBe(false);
  });

  /** Runs SQLite in a child (better-sqlite3): commits rows until killed, printing each committed id. */
  function sqliteWriter(db: string, synchronous: "FULL" | "OFF"): Promise<number> {
    const script = `
      const Database = require("better-sqlite3");
      const db = new Database(${JSON.stringify(db)});
      db.pragma("journal_mode = WAL");
      db.pragma("synchronous = ${synchronous}");
      db.pragma("wal_autocheckpoint = 50");
      // A small page cache: the open transaction below spills its pages into the WAL file.
      db.pragma("cache_size = 20");
      db.exec("CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, v BLOB)");
      const ins = db.prepare("INSERT INTO t (id, v) VALUES (?, ?)");
      const v = Buffer.alloc(3000, 7);
      for (let i = 1; i <= 400; i++) {
        ins.run(i, v);
        process.stdout.write(i + "\\n");
      }
      // An open transaction that never commits: its pages reach the WAL file unsynced.
      db.exec("BEGIN");
      for (let i = 1000; i < 1100; i++) ins.run(i, v);
      process.stdout.write("open\\n");
      setInterval(() => {}, 1000);
    `;
    return new Promise((res, rej) => {
      const child = execFile(process.execPath, ["-e", script], { cwd: ROOT });
      let out = "";
      child.stdout?.on("data", (b: Buffer) => {
        out += b.toString();
        if (out.includes("open\n")) child.kill("SIGKILL");
      });
      child.on("exit", () => {
        const ids = out.split("\n").filter((l) => /^\d+$/.test(l));
        if (!out.includes("open\n")) rej(new Error(`sqlite writer died early:\n${out}`));
        else res(Number(ids[ids.length - 1]));
      });
    });
  }

  function sqliteCheck(db: string): { integrity: string; rows: number; maxId: number } {
    const Database = require_("better-sqlite3") as typeof import("better-sqlite3");
    const conn = new Database(db);
    try {
      const integrity = conn.pragma("integrity_check", { simple: true }) as string;
      if (conn.prepare("SELECT 1 FROM sqlite_master WHERE name = 't'").get() === undefined) return { integrity, rows: 0, maxId: 0 };
      const { n, m } = conn.prepare("SELECT count(*) AS n, coalesce(max(id), 0) AS m FROM t").get() as { n: number; m: number };
      return { integrity, rows: n, maxId: m };
    } finally {
      conn.close();
    }
  }

  it("SQLite with synchronous=FULL survives a power cut with every committed row", async () => {
    const m = await mount();
    const db = join(m, "test.db");
    const committed = await sqliteWriter(db, "FULL");
    expect(committed).toBe(400);
    const log = await cutAndRemount();
    // The uncommitted transaction's pages were written to the WAL file but never synced: dropped.
    expect(log).toContain("lost-write file=/test.db-wal");
    const r = sqliteCheck(db);
    expect(r.integrity).toBe("ok");
    expect(r.rows).toBe(400);
    expect(r.maxId).toBe(400);
  });

  it("SQLite with synchronous=OFF loses committed rows (the layer bites)", async () => {
    const m = await mount();
    const db = join(m, "test.db");
    expect(await sqliteWriter(db, "OFF")).toBe(400);
    await cutAndRemount();
    // Nothing was ever fsynced, not even the directory entry: the database is gone.
    const left = existsSync(db) ? sqliteCheck(db).rows : 0;
    expect(left).toBeLessThan(400);
  });
});
