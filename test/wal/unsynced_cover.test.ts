/**
 * A durable write covers the unsynced records before it. A commit-only hard state is written
 * without a sync; an O_DSYNC write makes only its own byte range durable, so if the next durable
 * batch started after that record, a power cut could keep the batch and lose the record: a hole
 * in the middle of the log, which the decoder refuses (the member would not start). The lazyfs
 * layer cannot show this (it counts an O_DSYNC write as a sync of the whole file), so the test
 * watches the byte ranges written through the O_DSYNC handle.
 *
 * Commit-only hard states wait in memory for that durable write (etcd's WAL keeps them in its
 * bufio until its next sync): no system call per commit, written out before a segment cut, on a
 * clean close, and in place once they would outgrow the durable write's rewrite; a crash loses
 * only them, never a byte after them.
 */
import fs from "node:fs";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { WAL } from "../../src/wal/wal.js";
import { isIntact, makeEntries, makeTmpDir, removeDir } from "./helpers.js";

const MIB = { segmentSizeBytes: 1024 * 1024 };
let root: string;
let dir: string;

beforeEach(() => {
  root = makeTmpDir("wal-unsynced");
  dir = path.join(root, "wal");
});
afterEach(() => {
  vi.restoreAllMocks();
  removeDir(root);
});

/** Records [position, position + length) of every write through a handle opened O_DSYNC. */
function watchDsyncWrites(): Array<[number, number]> {
  const ranges: Array<[number, number]> = [];
  const open = fs.promises.open.bind(fs.promises);
  vi.spyOn(fs.promises, "open").mockImplementation(async (...args: Parameters<typeof fs.promises.open>) => {
    const fh = await open(...args);
    const flags = args[1];
    if (typeof flags === "number" && (flags & fs.constants.O_DSYNC) !== 0) {
      const write = fh.write.bind(fh) as (b: Buffer, off: number, len: number, pos: number) => Promise<{ bytesWritten: number; buffer: Buffer }>;
      (fh as unknown as { write: typeof write }).write = async (b, off, len, pos) => {
        ranges.push([pos, pos + len]);
        return write(b, off, len, pos);
      };
    }
    return fh;
  });
  return ranges;
}

describe("durable writes after unsynced ones", () => {
  it("the next O_DSYNC write starts where the last durable one ended, so it covers the commit-only hard states between", async () => {
    const ranges = watchDsyncWrites();
    const wal = await WAL.create(dir, { memberId: 1n, clusterId: 2n }, MIB);
    await wal.save({ term: 1, vote: 1n, commit: 0 }, makeEntries(1, 3, 1));
    const first = ranges[ranges.length - 1]!;
    // Commit-only saves: no fdatasync (etcd's MustSync), written in place.
    await wal.save({ term: 1, vote: 1n, commit: 2 }, []);
    await wal.save({ term: 1, vote: 1n, commit: 3 }, []);
    expect(ranges[ranges.length - 1]).toEqual(first);
    await wal.save({ term: 1, vote: 1n, commit: 3 }, makeEntries(4, 5, 1));
    const second = ranges[ranges.length - 1]!;
    expect(second).not.toEqual(first);
    expect(second[0]).toBe(first[1]);
    // With nothing unsynced in between, a durable write covers only itself.
    await wal.save(undefined, makeEntries(6, 6, 1));
    expect(ranges[ranges.length - 1]![0]).toBe(second[1]);
    await wal.close();
    const r = await WAL.open(dir, { index: 0, term: 0 }, MIB);
    expect(r.entries.map((e) => e.index)).toEqual([1, 2, 3, 4, 5, 6]);
    expect(r.entries.every(isIntact)).toBe(true);
    expect(r.hardState).toEqual({ term: 1, vote: 1n, commit: 3 });
    await r.wal.close();
  });

  it("commit-only hard states make no write until the next durable one, which writes them first", async () => {
    const ranges = watchDsyncWrites();
    const wal = await WAL.create(dir, { memberId: 1n, clusterId: 2n }, MIB);
    await wal.save({ term: 1, vote: 1n, commit: 0 }, makeEntries(1, 3, 1));
    const first = ranges[ranges.length - 1]!;
    const writeSync = vi.spyOn(fs, "writeSync");
    for (let c = 1; c <= 3; c++) await wal.save({ term: 1, vote: 1n, commit: c }, []);
    expect(writeSync).not.toHaveBeenCalled();
    // A crash now (another process opens the directory as the killed member's restart would):
    // the commit-only states are gone, every durable byte is there.
    const crashed = await WAL.open(dir, { index: 0, term: 0 }, MIB);
    expect(crashed.hardState).toEqual({ term: 1, vote: 1n, commit: 0 });
    expect(crashed.entries.map((e) => e.index)).toEqual([1, 2, 3]);
    await crashed.wal.close();
    await wal.save(undefined, makeEntries(4, 4, 1));
    expect(writeSync).not.toHaveBeenCalled();
    const second = ranges[ranges.length - 1]!;
    expect(second[0]).toBe(first[1]);
    const afterDurable = await WAL.open(dir, { index: 0, term: 0 }, MIB);
    expect(afterDurable.hardState).toEqual({ term: 1, vote: 1n, commit: 3 });
    expect(afterDurable.entries.map((e) => e.index)).toEqual([1, 2, 3, 4]);
    await afterDurable.wal.close();
    await wal.close();
  });

  it("a clean close writes the commit index that waited in memory", async () => {
    const wal = await WAL.create(dir, { memberId: 1n, clusterId: 2n }, MIB);
    await wal.save({ term: 2, vote: 1n, commit: 0 }, makeEntries(1, 5, 2));
    await wal.save({ term: 2, vote: 1n, commit: 5 }, []);
    await wal.close();
    const r = await WAL.open(dir, { index: 0, term: 0 }, MIB);
    expect(r.hardState).toEqual({ term: 2, vote: 1n, commit: 5 });
    expect(r.entries.every(isIntact)).toBe(true);
    await r.wal.close();
  });

  it("commit-only states beyond the rewrite's bound go to the file in place, those before them included", async () => {
    const wal = await WAL.create(dir, { memberId: 1n, clusterId: 2n }, MIB);
    await wal.save({ term: 1, vote: 1n, commit: 0 }, makeEntries(1, 1, 1));
    const writeSync = vi.spyOn(fs, "writeSync");
    // A hard-state record is a few dozen bytes: 4,000 of them pass 64 KiB.
    for (let c = 1; c <= 4000; c++) await wal.save({ term: 1, vote: 1n, commit: 1 }, []);
    expect(writeSync).toHaveBeenCalled();
    const crashed = await WAL.open(dir, { index: 0, term: 0 }, MIB);
    // Whatever a crash keeps is a prefix of what was saved: the log decodes, entry 1 intact.
    expect(crashed.entries.map((e) => e.index)).toEqual([1]);
    expect(crashed.entries.every(isIntact)).toBe(true);
    await crashed.wal.close();
    await wal.save({ term: 1, vote: 1n, commit: 1 }, makeEntries(2, 2, 1));
    await wal.close();
    const r = await WAL.open(dir, { index: 0, term: 0 }, MIB);
    expect(r.hardState).toEqual({ term: 1, vote: 1n, commit: 1 });
    expect(r.entries.map((e) => e.index)).toEqual([1, 2]);
    await r.wal.close();
  });

  it("a segment cut writes out the commit index that waited in memory before it closes the old segment", async () => {
    const small = { segmentSizeBytes: 4096 };
    const wal = await WAL.create(dir, { memberId: 1n, clusterId: 2n }, small);
    let index = 0;
    while (wal.stats.cuts < 3) {
      await wal.save({ term: 1, vote: 1n, commit: index }, makeEntries(index + 1, index + 2, 1, 200));
      index += 2;
      // Commit-only states between the durable batches, some of them pushing the tail past the segment size.
      await wal.save({ term: 1, vote: 1n, commit: index - 1 }, []);
      for (let k = 0; k < 4; k++) await wal.save({ term: 1, vote: 1n, commit: index }, []);
    }
    await wal.save({ term: 1, vote: 1n, commit: index }, []);
    const crashed = await WAL.open(dir, { index: 0, term: 0 }, small);
    expect(crashed.entries.map((e) => e.index)).toEqual(Array.from({ length: index }, (_, i) => i + 1));
    expect(crashed.entries.every(isIntact)).toBe(true);
    await crashed.wal.close();
    await wal.close();
    const r = await WAL.open(dir, { index: 0, term: 0 }, small);
    expect(r.hardState).toEqual({ term: 1, vote: 1n, commit: index });
    expect(r.entries.length).toBe(index);
    await r.wal.close();
  });
});

describe("when the durable write is issued", () => {
  it("in save()'s own turn once the O_DSYNC handle is open, so a leader's write starts before the microtask that writes its appends to the peers", async () => {
    const ranges = watchDsyncWrites();
    const wal = await WAL.create(dir, { memberId: 1n, clusterId: 2n }, MIB);
    // The first durable write opens the handle (an await of its own).
    await wal.save({ term: 1, vote: 1n, commit: 0 }, makeEntries(1, 1, 1));
    const before = ranges.length;
    let microtaskSaw: number | undefined;
    queueMicrotask(() => (microtaskSaw = ranges.length));
    const saved = wal.save(undefined, makeEntries(2, 2, 1));
    expect(ranges.length).toBe(before + 1);
    await saved;
    // A microtask queued before the save (the peer transport's flush) ran after the write was issued.
    expect(microtaskSaw).toBe(before + 1);
    await wal.close();
  });
});
