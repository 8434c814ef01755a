import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { CompactedError, emptyConfState, SnapOutOfDateError, UnavailableError, type Entry } from "../../src/raft/types.js";
import { WalStorage } from "../../src/wal/storage.js";
import { WAL } from "../../src/wal/wal.js";
import { isIntact, makeEntries, makeTmpDir, removeDir } from "./helpers.js";

const OPTS = { segmentSizeBytes: 8192 };
const META = { memberId: 1n, clusterId: 2n };

function ids(es: Entry[]): string[] {
  return es.map((e) => `${e.index}/${e.term}`);
}

describe("WalStorage", () => {
  let root: string;
  beforeEach(() => {
    root = makeTmpDir("storage");
  });
  afterEach(() => removeDir(root));

  async function openFresh(tailEntriesMax = 20) {
    return WalStorage.open({ walDir: path.join(root, "wal"), snapDir: path.join(root, "snap"), metadata: META, wal: OPTS, storage: { tailEntriesMax } });
  }

  it("keeps a bounded tail in memory and reads older entries back from the WAL", async () => {
    const { storage, wal, created } = await openFresh(20);
    expect(created).toBe(true);
    for (let i = 1; i <= 200; i += 10) await storage.save({ term: 1, vote: 1n, commit: i - 1 }, makeEntries(i, i + 9, 1, 50));
    expect(storage.tailLength()).toBeLessThanOrEqual(20);
    expect(storage.firstIndex()).toBe(1);
    expect(storage.lastIndex()).toBe(200);
    const all = storage.entries(1, 201, Infinity);
    expect(all.map((e) => e.index)).toEqual(Array.from({ length: 200 }, (_, i) => i + 1));
    expect(all.every(isIntact)).toBe(true);
    expect(storage.term(5)).toBe(1);
    // Size limit across the disk/memory boundary: at least one entry, never past the budget.
    expect(storage.entries(175, 201, 120).map((e) => e.index)).toEqual([175, 176]);
    expect(storage.entries(199, 201, 0).map((e) => e.index)).toEqual([199]);
    expect(() => storage.entries(1, 202, Infinity)).toThrow(/out of bound/);
    expect(() => storage.term(201)).toThrow(UnavailableError);
    await wal.close();
  });

  it("replaces a conflicting suffix reaching below the in-memory tail", async () => {
    const { storage, wal } = await openFresh(10);
    for (let i = 1; i <= 100; i += 10) await storage.save(undefined, makeEntries(i, i + 9, 1, 20));
    await storage.save({ term: 2, vote: 2n, commit: 0 }, makeEntries(40, 45, 2, 20));
    expect(storage.lastIndex()).toBe(45);
    expect(ids(storage.entries(38, 46, Infinity))).toEqual(["38/1", "39/1", "40/2", "41/2", "42/2", "43/2", "44/2", "45/2"]);
    expect(() => storage.append(makeEntries(47, 48, 2))).toThrow(/missing log entry/);
    await wal.close();
  });

  it("compacts, creates and applies snapshots with MemoryStorage's errors", async () => {
    const { storage, wal } = await openFresh();
    await storage.save({ term: 3, vote: 1n, commit: 50 }, makeEntries(1, 60, 3));
    const cs = { ...emptyConfState(), voters: [1n, 2n, 3n] };
    const s = storage.createSnapshot(50, cs, new Uint8Array([1, 2]));
    expect(s.metadata).toEqual({ index: 50, term: 3, confState: cs });
    expect(() => storage.createSnapshot(50, cs, new Uint8Array())).toThrow(SnapOutOfDateError);
    expect(() => storage.createSnapshot(61, cs, new Uint8Array())).toThrow(/out of bound/);
    storage.compact(40);
    expect(storage.firstIndex()).toBe(41);
    expect(storage.term(40)).toBe(3);
    expect(() => storage.term(39)).toThrow(CompactedError);
    expect(() => storage.entries(40, 45, Infinity)).toThrow(CompactedError);
    expect(() => storage.compact(40)).toThrow(CompactedError);
    expect(storage.entries(41, 43, Infinity).map((e) => e.index)).toEqual([41, 42]);
    // A follower receiving a newer snapshot drops its whole log.
    storage.applySnapshot({ data: new Uint8Array(), metadata: { index: 100, term: 5, confState: cs } });
    expect([storage.firstIndex(), storage.lastIndex(), storage.term(100)]).toEqual([101, 100, 5]);
    expect(() => storage.entries(101, 101, Infinity)).toThrow(UnavailableError);
    expect(() => storage.applySnapshot({ data: new Uint8Array(), metadata: { index: 90, term: 5, confState: cs } })).toThrow(SnapOutOfDateError);
    expect(storage.initialState().confState).toEqual(cs);
    await wal.close();
  });

  it("restarts from the newest snapshot that has a WAL marker, with released segments", async () => {
    const first = await openFresh(15);
    const { storage, wal, snapshotter } = first;
    for (let i = 1; i <= 300; i += 10) await storage.save({ term: 2, vote: 1n, commit: i - 1 }, makeEntries(i, i + 9, 2, 40));
    const cs = { ...emptyConfState(), voters: [1n] };
    const snap = storage.createSnapshot(250, cs, new TextEncoder().encode("image@250"));
    await snapshotter.save(snap);
    await wal.saveSnapshotMarker({ index: 250, term: 2, confState: cs });
    storage.compact(200);
    await wal.releaseTo(storage.firstIndex() - 1);
    // Entries above the compaction point are still served, from disk where evicted.
    expect(storage.entries(201, 301, Infinity).length).toBe(100);
    // A snapshot file written after the last marker (crash before the marker) must be ignored.
    await snapshotter.save({ data: new Uint8Array(), metadata: { index: 280, term: 2, confState: cs } });
    await wal.close();

    const again = await WalStorage.open({ walDir: path.join(root, "wal"), snapDir: path.join(root, "snap"), metadata: META, wal: OPTS, storage: { tailEntriesMax: 15 } });
    expect(again.created).toBe(false);
    expect(again.snapshot?.metadata.index).toBe(250);
    expect(new TextDecoder().decode(again.snapshot?.data)).toBe("image@250");
    expect(again.storage.firstIndex()).toBe(251);
    expect(again.storage.lastIndex()).toBe(300);
    expect(again.storage.initialState()).toEqual({ hardState: { term: 2, vote: 1n, commit: 290 }, confState: cs });
    expect(again.storage.entries(251, 301, Infinity).every(isIntact)).toBe(true);
    expect(WAL.exists(path.join(root, "wal"))).toBe(true);
    await again.wal.close();
  });
});
