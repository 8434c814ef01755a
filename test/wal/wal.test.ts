import fs from "node:fs";
import { formatGoDuration } from "../../src/go_duration.js";
import path from "node:path";
import { Registry } from "prom-client";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { emptyConfState, type Entry } from "../../src/raft/types.js";
import { WalFileNotFoundError, WalSnapshotMismatchError, WalSnapshotNotFoundError } from "../../src/wal/errors.js";
import { WAL } from "../../src/wal/wal.js";
import { isIntact, makeEntries, makeEntry, makeTmpDir, removeDir, walFiles } from "./helpers.js";

const META = { memberId: 0x8e9e05c52164694dn, clusterId: 0xcdf818194e3a8c32n };
const SMALL = { segmentSizeBytes: 2048 };
/** Default-sized segments would write 64 MiB of zeros per test; 1 MiB keeps the suite fast. */
const MIB = { segmentSizeBytes: 1024 * 1024 };

function indexesAndTerms(es: Entry[]): string[] {
  return es.map((e) => `${e.index}/${e.term}`);
}

describe("WAL", () => {
  let root: string;
  let dir: string;
  beforeEach(() => {
    root = makeTmpDir("wal");
    dir = path.join(root, "wal");
  });
  afterEach(() => removeDir(root));

  it("creates, appends and replays entries, hard state and metadata", async () => {
    expect(WAL.exists(dir)).toBe(false);
    const wal = await WAL.create(dir, { memberId: 7n, clusterId: 2n ** 64n - 1n }, MIB);
    expect(WAL.exists(dir)).toBe(true);
    await wal.save({ term: 1, vote: 7n, commit: 0 }, makeEntries(1, 3, 1));
    await wal.save({ term: 2, vote: 7n, commit: 2 }, makeEntries(4, 5, 2, 1000));
    await wal.close();

    const r = await WAL.open(dir, { index: 0, term: 0 }, MIB);
    expect(r.metadata).toEqual({ memberId: 7n, clusterId: 2n ** 64n - 1n });
    expect(r.hardState).toEqual({ term: 2, vote: 7n, commit: 2 });
    expect(indexesAndTerms(r.entries)).toEqual(["1/1", "2/1", "3/1", "4/2", "5/2"]);
    expect(r.entries.every(isIntact)).toBe(true);
    // Appends continue where the log ended.
    await r.wal.save(undefined, makeEntries(6, 6, 2));
    await r.wal.close();
    const r2 = await WAL.open(dir, { index: 0, term: 0 }, MIB);
    expect(r2.entries.map((e) => e.index)).toEqual([1, 2, 3, 4, 5, 6]);
    await r2.wal.close();
  });

  it("refuses to create over an existing WAL", async () => {
    const wal = await WAL.create(dir, META, MIB);
    await wal.close();
    await expect(WAL.create(dir, META, MIB)).rejects.toThrow(/already holds a WAL/);
  });

  it("group-commits concurrent saves into one write and one fdatasync", async () => {
    const wal = await WAL.create(dir, META, MIB);
    const saves: Promise<void>[] = [];
    for (let i = 1; i <= 100; i++) saves.push(wal.save(undefined, [makeEntry(i, 1)]));
    await Promise.all(saves);
    // The first save goes out alone; the 99 that queued behind its fdatasync share the next one.
    expect(wal.stats.syncs).toBe(2);
    expect(wal.stats.writes).toBe(2);
    expect(wal.stats.entries).toBe(100);
    await wal.close();
    const r = await WAL.open(dir, { index: 0, term: 0 }, MIB);
    expect(r.entries.length).toBe(100);
    await r.wal.close();
  });

  it("skips fdatasync for a save that only moves the commit index (raft MustSync)", async () => {
    const wal = await WAL.create(dir, META, MIB);
    await wal.save({ term: 1, vote: 1n, commit: 0 }, makeEntries(1, 2, 1));
    const syncs = wal.stats.syncs;
    await wal.save({ term: 1, vote: 1n, commit: 2 }, []);
    expect(wal.stats.syncs).toBe(syncs);
    expect(wal.stats.writes).toBe(2);
    await wal.save({ term: 2, vote: 0n, commit: 2 }, []);
    expect(wal.stats.syncs).toBe(syncs + 1);
    await wal.close();
    const r = await WAL.open(dir, { index: 0, term: 0 }, MIB);
    expect(r.hardState).toEqual({ term: 2, vote: 0n, commit: 2 });
    await r.wal.close();
  });

  it("rolls over across many segments and replays them all", async () => {
    const wal = await WAL.create(dir, META, SMALL);
    for (let i = 1; i <= 400; i += 10) await wal.save({ term: 1, vote: 1n, commit: i - 1 }, makeEntries(i, i + 9, 1, 60));
    expect(wal.stats.cuts).toBeGreaterThan(10);
    await wal.close();
    const files = walFiles(dir);
    expect(files.length).toBe(wal.stats.cuts + 1);
    // Names carry the sequence and the first index of the segment, both ascending here.
    const seqs = files.map((f) => Number.parseInt(f.slice(0, 16), 16));
    expect(seqs).toEqual(seqs.map((_, i) => i));
    const r = await WAL.open(dir, { index: 0, term: 0 }, SMALL);
    expect(r.entries.map((e) => e.index)).toEqual(Array.from({ length: 400 }, (_, i) => i + 1));
    expect(r.entries.every(isIntact)).toBe(true);
    expect(r.hardState.commit).toBe(390);
    await r.wal.close();
  });

  it("replaces a conflicting suffix, also when it began segments ago", async () => {
    const wal = await WAL.create(dir, META, SMALL);
    for (let i = 1; i <= 200; i += 10) await wal.save(undefined, makeEntries(i, i + 9, 1, 60));
    const cutsBefore = wal.stats.cuts;
    expect(cutsBefore).toBeGreaterThan(3);
    // Entry 20 lives in the first segments; the tail is several segments later.
    await wal.save({ term: 2, vote: 0n, commit: 0 }, makeEntries(20, 25, 2, 60));
    // And a second conflict inside the replacement, followed by more appends.
    await wal.save(undefined, makeEntries(24, 30, 3, 60));
    await wal.close();
    const r = await WAL.open(dir, { index: 0, term: 0 }, SMALL);
    const want = [...makeEntries(1, 19, 1, 60), ...makeEntries(20, 23, 2, 60), ...makeEntries(24, 30, 3, 60)];
    expect(indexesAndTerms(r.entries)).toEqual(indexesAndTerms(want));
    expect(r.entries.every(isIntact)).toBe(true);
    // The read-back path agrees with replay after the conflict.
    expect(indexesAndTerms(r.wal.readEntries(18, 31, Infinity))).toEqual(indexesAndTerms(want.slice(17)));
    await r.wal.close();
  });

  it("replays from a snapshot marker, releases old segments and reopens after release", async () => {
    const wal = await WAL.create(dir, META, { ...SMALL, maxWals: 2 });
    for (let i = 1; i <= 300; i += 10) await wal.save({ term: 1, vote: 1n, commit: i - 1 }, makeEntries(i, i + 9, 1, 60));
    await wal.saveSnapshotMarker({ index: 250, term: 1, confState: { ...emptyConfState(), voters: [1n, 2n, 3n] } });
    await wal.save(undefined, makeEntries(301, 310, 1, 60));
    const before = walFiles(dir).length;
    await wal.releaseTo(250);
    const after = walFiles(dir);
    expect(after.length).toBeLessThan(before);
    expect(after.length).toBeGreaterThanOrEqual(2);
    // The kept first segment starts at or before the snapshot index.
    expect(Number.parseInt(after[0]!.slice(17, 33), 16)).toBeLessThanOrEqual(250);
    await wal.close();

    const r = await WAL.open(dir, { index: 250, term: 1 }, SMALL);
    expect(r.entries.map((e) => e.index)).toEqual(Array.from({ length: 60 }, (_, i) => 251 + i));
    expect(r.hardState.commit).toBe(290);
    await r.wal.close();
    await expect(WAL.open(dir, { index: 0, term: 0 }, MIB)).rejects.toBeInstanceOf(WalFileNotFoundError);
    const markers = await WAL.validSnapshotMarkers(dir);
    expect(markers.map((m) => [m.index, m.term, m.confState.voters])).toEqual([[250, 1, [1n, 2n, 3n]]]);
  });

  it("keeps maxWals segments even when more are released, and never releases past the last marker", async () => {
    const wal = await WAL.create(dir, META, { ...SMALL, maxWals: 5 });
    for (let i = 1; i <= 300; i += 10) await wal.save(undefined, makeEntries(i, i + 9, 1, 60));
    const total = walFiles(dir).length;
    await wal.releaseTo(300); // no marker yet beyond 0: nothing may go
    expect(walFiles(dir).length).toBe(total);
    await wal.saveSnapshotMarker({ index: 300, term: 1, confState: emptyConfState() });
    await wal.releaseTo(300);
    expect(walFiles(dir).length).toBe(5);
    await wal.close();
  });

  it("rejects a snapshot marker that is missing or has another term", async () => {
    const wal = await WAL.create(dir, META, MIB);
    await wal.save({ term: 3, vote: 1n, commit: 5 }, makeEntries(1, 10, 3));
    await wal.saveSnapshotMarker({ index: 5, term: 3, confState: emptyConfState() });
    await wal.close();
    await expect(WAL.open(dir, { index: 5, term: 2 }, MIB)).rejects.toBeInstanceOf(WalSnapshotMismatchError);
    await expect(WAL.open(dir, { index: 6, term: 3 }, MIB)).rejects.toBeInstanceOf(WalSnapshotNotFoundError);
    const r = await WAL.open(dir, { index: 5, term: 3 }, MIB);
    expect(r.entries.map((e) => e.index)).toEqual([6, 7, 8, 9, 10]);
    await r.wal.close();
  });

  it("a snapshot marker beyond the log moves the last index (a follower restored from a snapshot)", async () => {
    const wal = await WAL.create(dir, META, MIB);
    await wal.save(undefined, makeEntries(1, 3, 1));
    await wal.saveSnapshotMarker({ index: 100, term: 4, confState: emptyConfState() });
    await wal.save({ term: 4, vote: 0n, commit: 100 }, []);
    expect(wal.lastIndex()).toBe(100);
    await wal.save(undefined, makeEntries(101, 102, 4));
    await wal.close();
    const r = await WAL.open(dir, { index: 100, term: 4 }, MIB);
    expect(indexesAndTerms(r.entries)).toEqual(["101/4", "102/4"]);
    await r.wal.close();
  });

  it("reads entries back from the segments, honouring the size limit", async () => {
    const wal = await WAL.create(dir, META, SMALL);
    for (let i = 1; i <= 100; i += 5) await wal.save(undefined, makeEntries(i, i + 4, 1, 100));
    const all = wal.readEntries(1, 101, Infinity);
    expect(all.map((e) => e.index)).toEqual(Array.from({ length: 100 }, (_, i) => i + 1));
    expect(all.every(isIntact)).toBe(true);
    expect(wal.readEntries(10, 101, 350).map((e) => e.index)).toEqual([10, 11, 12]);
    expect(wal.readEntries(10, 101, 0).map((e) => e.index)).toEqual([10]);
    expect(wal.entryTerm(50)).toBe(1);
    expect(wal.entryTerm(101)).toBeUndefined();
    await wal.close();
  });

  it("asserts raft's log invariants before writing anything", async () => {
    const wal = await WAL.create(dir, META, MIB);
    await wal.save({ term: 1, vote: 1n, commit: 2 }, makeEntries(1, 3, 1));
    expect(() => wal.save(undefined, makeEntries(5, 6, 1))).toThrow(/missing log entries/);
    expect(() => wal.save(undefined, makeEntries(2, 3, 2))).toThrow(/overwrite committed/);
    expect(() => wal.save(undefined, [makeEntry(4, 1), makeEntry(6, 1)])).toThrow(/not contiguous/);
    expect(() => wal.save({ term: 0, vote: 0n, commit: 2 }, [])).toThrow(/term went back/);
    expect(() => wal.save({ term: 1, vote: 1n, commit: 9 }, [])).toThrow(/beyond the last index/);
    await wal.close();
    await expect(wal.save(undefined, makeEntries(4, 4, 1))).rejects.toThrow(/closed/);
  });

  it("records fsync latency in etcd's histogram", async () => {
    const registry = new Registry();
    const wal = await WAL.create(dir, META, { ...MIB, registry });
    await wal.save(undefined, makeEntries(1, 1, 1));
    const metrics = await registry.getMetricsAsJSON();
    const h = metrics.find((m) => m.name === "etcd_disk_wal_fsync_duration_seconds");
    expect(h).toBeDefined();
    const values = (h as unknown as { values: { metricName: string; value: number; labels: { le?: number } }[] }).values;
    expect(values.find((v) => v.metricName.endsWith("_count"))?.value).toBeGreaterThanOrEqual(1);
    expect(values.filter((v) => v.labels.le !== undefined).map((v) => v.labels.le)).toContain(8.192);
    await wal.close();
  });

  it("warns about a slow fdatasync in etcd's words", async () => {
    const warnings: { obj: Record<string, unknown>; msg: string }[] = [];
    const logger = { info: () => {}, error: () => {}, warn: (obj: Record<string, unknown>, msg: string) => warnings.push({ obj, msg }) };
    // A threshold of -1 ms makes every sync "slow", without faking the clock or the disk.
    const wal = await WAL.create(dir, META, { ...MIB, logger, warnSyncDurationMs: -1, durationText: formatGoDuration });
    await wal.save(undefined, makeEntries(1, 1, 1));
    await wal.close();
    const w = warnings.find((x) => x.msg === "slow fdatasync");
    expect(w?.obj).toMatchObject({ "expected-duration": "-1ms" });
    // Go's duration text, as etcd's zap.Duration writes it: "857.2µs", "1.234567ms", "1.5s".
    expect(String(w?.obj.took)).toMatch(/^\d+(\.\d{1,9})?(µs|ms|s)$/);
  });

  it("removes leftover temp files of an interrupted segment preparation", async () => {
    const wal = await WAL.create(dir, META, SMALL);
    await wal.close();
    fs.writeFileSync(path.join(dir, "0.tmp"), "junk");
    const r = await WAL.open(dir, { index: 0, term: 0 }, SMALL);
    await r.wal.close();
    expect(fs.readdirSync(dir).filter((f) => f.endsWith(".tmp"))).toEqual([]);
  });
});
