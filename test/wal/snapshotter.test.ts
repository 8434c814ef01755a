import fs from "node:fs";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { emptyConfState, type Snapshot } from "../../src/raft/types.js";
import { SnapshotCorruptionError } from "../../src/wal/errors.js";
import type { WalLogger } from "../../src/wal/logger.js";
import { Snapshotter, snapshotFileName } from "../../src/wal/snapshotter.js";
import { makeTmpDir, removeDir } from "./helpers.js";

function snap(index: number, term: number, data = `backend@${index}`): Snapshot {
  return {
    data: new TextEncoder().encode(data),
    metadata: { index, term, confState: { ...emptyConfState(), voters: [1n, 2n, 3n], learners: [2n ** 64n - 1n], autoLeave: true } },
  };
}

function recorder(): { logger: WalLogger; lines: string[] } {
  const lines: string[] = [];
  const rec = (level: string) => (obj: Record<string, unknown>, msg: string) => lines.push(`${level} ${msg} ${JSON.stringify(obj)}`);
  return { logger: { info: rec("info"), warn: rec("warn"), error: rec("error") }, lines };
}

describe("Snapshotter", () => {
  let dir: string;
  beforeEach(() => {
    dir = path.join(makeTmpDir("snap"), "snap");
  });
  afterEach(() => removeDir(path.dirname(dir)));

  it("saves atomically and loads the newest snapshot back intact", async () => {
    const ss = new Snapshotter(dir);
    expect(ss.loadNewest()).toBeUndefined();
    await ss.save(snap(10, 2));
    await ss.save(snap(30, 3));
    await ss.save(snap(20, 3));
    expect(ss.loadNewest()).toEqual(snap(30, 3));
    expect(fs.readdirSync(dir).sort()).toEqual([snapshotFileName(2, 10), snapshotFileName(3, 20), snapshotFileName(3, 30)]);
    expect(snapshotFileName(3, 30)).toBe("0000000000000003-000000000000001e.snap");
  });

  it("does not write an empty snapshot", async () => {
    const ss = new Snapshotter(dir);
    await ss.save(snap(0, 0));
    expect(ss.snapNames()).toEqual([]);
  });

  it("purges all but the newest maxSnapshots files and stale temp files", async () => {
    const ss = new Snapshotter(dir);
    for (let i = 1; i <= 7; i++) await ss.save(snap(i * 10, 1));
    fs.writeFileSync(path.join(dir, `${snapshotFileName(1, 80)}.tmp`), "half written");
    await ss.purge(5);
    expect(ss.snapNames()).toEqual([70, 60, 50, 40, 30].map((i) => snapshotFileName(1, i)));
    expect(fs.readdirSync(dir).some((f) => f.endsWith(".tmp"))).toBe(false);
    await ss.purge(0);
    expect(ss.snapNames().length).toBe(5);
  });

  it("skips a damaged newest snapshot like etcd: logs it, renames it .broken, loads the older one", async () => {
    const { logger, lines } = recorder();
    const ss = new Snapshotter(dir, { logger });
    await ss.save(snap(10, 1));
    await ss.save(snap(20, 1));
    const newest = path.join(dir, snapshotFileName(1, 20));
    const buf = fs.readFileSync(newest);
    buf[buf.length - 3] ^= 0x40;
    fs.writeFileSync(newest, buf);
    expect(ss.loadNewest()).toEqual(snap(10, 1));
    expect(fs.existsSync(`${newest}.broken`)).toBe(true);
    expect(lines.some((l) => l.startsWith("warn failed to read a snap file") && l.includes(newest) && l.includes("crc mismatch"))).toBe(true);
    expect(lines.some((l) => l.startsWith("warn renamed to a broken snap file"))).toBe(true);
  });

  it("refuses to load when every snapshot file is damaged, naming the file", async () => {
    const ss = new Snapshotter(dir);
    await ss.save(snap(10, 1));
    const file = path.join(dir, snapshotFileName(1, 10));
    fs.truncateSync(file, 20);
    expect(() => ss.loadNewest()).toThrow(SnapshotCorruptionError);
    expect(() => ss.loadNewest()).toThrow(file);
    // Nothing renamed: the error repeats until an operator acts.
    expect(fs.existsSync(file)).toBe(true);
  });

  it("detects a file whose content belongs to another name", async () => {
    const ss = new Snapshotter(dir);
    await ss.save(snap(10, 1));
    fs.renameSync(path.join(dir, snapshotFileName(1, 10)), path.join(dir, snapshotFileName(1, 11)));
    expect(() => ss.loadNewest()).toThrow(/name should be/);
  });

  it("loads the newest snapshot that has a WAL marker", async () => {
    const ss = new Snapshotter(dir);
    await ss.save(snap(10, 1));
    await ss.save(snap(20, 2));
    await ss.save(snap(30, 2)); // written, but the crash came before its WAL marker
    expect(ss.loadNewestAvailable([{ index: 0, term: 0 }, { index: 10, term: 1 }, { index: 20, term: 2 }])?.metadata.index).toBe(20);
    expect(ss.loadNewestAvailable([{ index: 20, term: 1 }])).toBeUndefined();
  });
});
