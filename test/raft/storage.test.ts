import { describe, expect, it } from "vitest";
import { MemoryStorage } from "../../src/raft/storage.js";
import { RaftLog } from "../../src/raft/log.js";
import { Unstable } from "../../src/raft/log_unstable.js";
import { RaftInvariantError } from "../../src/raft/assert.js";
import { CompactedError, EntryType, SnapOutOfDateError, UnavailableError, emptyConfState, type Entry } from "../../src/raft/types.js";

const ent = (index: number, term: number, data = ""): Entry => ({ index, term, type: EntryType.Normal, data: new TextEncoder().encode(data) });

describe("MemoryStorage", () => {
  it("starts empty with a dummy entry at index 0", () => {
    const s = new MemoryStorage();
    expect(s.firstIndex()).toBe(1);
    expect(s.lastIndex()).toBe(0);
    expect(s.term(0)).toBe(0);
    expect(() => s.term(1)).toThrow(UnavailableError);
  });

  it("appends, truncates a conflicting suffix and ignores compacted entries", () => {
    const s = new MemoryStorage();
    s.append([ent(1, 1), ent(2, 1), ent(3, 2)]);
    expect(s.lastIndex()).toBe(3);
    s.append([ent(2, 3), ent(3, 3), ent(4, 3)]);
    expect(s.entries(1, 5, Infinity).map((e) => e.term)).toEqual([1, 3, 3, 3]);
    s.compact(2);
    expect(s.firstIndex()).toBe(3);
    expect(() => s.entries(2, 4, Infinity)).toThrow(CompactedError);
    expect(() => s.term(1)).toThrow(CompactedError);
    expect(s.term(2)).toBe(3);
    // Entries below the first index are skipped rather than rewritten.
    s.append([ent(1, 1), ent(2, 3), ent(3, 3), ent(4, 3), ent(5, 3)]);
    expect(s.lastIndex()).toBe(5);
    expect(() => s.append([ent(9, 3)])).toThrow(RaftInvariantError);
  });

  it("limits entries by size but returns at least one", () => {
    const s = new MemoryStorage();
    s.append([ent(1, 1, "x".repeat(100)), ent(2, 1, "y".repeat(100)), ent(3, 1)]);
    expect(s.entries(1, 4, 1).length).toBe(1);
    expect(s.entries(1, 4, 232).length).toBe(2);
    expect(s.entries(1, 4, 10_000).length).toBe(3);
  });

  it("creates and applies snapshots, refusing out-of-date ones", () => {
    const s = new MemoryStorage();
    s.append([ent(1, 1), ent(2, 2), ent(3, 2)]);
    const cs = { ...emptyConfState(), voters: [1n, 2n, 3n] };
    const snap = s.createSnapshot(2, cs, Uint8Array.of(7));
    expect(snap.metadata).toEqual({ index: 2, term: 2, confState: cs });
    expect(() => s.createSnapshot(2, cs, Uint8Array.of(7))).toThrow(SnapOutOfDateError);
    expect(s.initialState().confState.voters).toEqual([1n, 2n, 3n]);
    const t = new MemoryStorage();
    t.applySnapshot(snap);
    expect(t.firstIndex()).toBe(3);
    expect(t.lastIndex()).toBe(2);
    expect(t.term(2)).toBe(2);
    expect(() => t.applySnapshot(snap)).toThrow(SnapOutOfDateError);
  });
});

describe("Unstable and RaftLog", () => {
  it("stableTo ignores a stale (index, term) after the tail was replaced", () => {
    const u = new Unstable(1);
    u.truncateAndAppend([ent(1, 1), ent(2, 1)]);
    u.truncateAndAppend([ent(2, 2)]);
    u.stableTo(2, 1); // the Ready that carried (2,1) is outdated
    expect(u.offset).toBe(1);
    u.stableTo(2, 2);
    expect(u.offset).toBe(3);
    expect(u.entries).toEqual([]);
  });

  it("maybeAppend checks the previous entry, truncates conflicts and never commits past the new entries", () => {
    const s = new MemoryStorage();
    s.append([ent(1, 1), ent(2, 2), ent(3, 3)]);
    const log = new RaftLog(s);
    expect(log.maybeAppend(3, 2, 3, [ent(4, 3)])).toBeUndefined(); // term mismatch at 3
    expect(log.maybeAppend(1, 1, 10, [ent(2, 4)])).toBe(2); // conflict at 2 replaced
    expect(log.lastIndex()).toBe(2);
    expect(log.term(2)).toBe(4);
    expect(log.committed).toBe(2);
  });

  it("refuses to overwrite a committed entry or move commit past the log", () => {
    const s = new MemoryStorage();
    s.append([ent(1, 1), ent(2, 1)]);
    const log = new RaftLog(s);
    log.commitTo(2);
    expect(() => log.maybeAppend(1, 1, 2, [ent(2, 2)])).toThrow(RaftInvariantError);
    expect(() => log.commitTo(5)).toThrow(RaftInvariantError);
    log.commitTo(1); // commit never goes back: a no-op
    expect(log.committed).toBe(2);
  });

  it("findConflictByTerm skips a whole term", () => {
    const s = new MemoryStorage();
    s.append([ent(1, 1), ent(2, 1), ent(3, 3), ent(4, 3), ent(5, 3)]);
    const log = new RaftLog(s);
    expect(log.findConflictByTerm(5, 2)).toBe(2);
    expect(log.findConflictByTerm(5, 3)).toBe(5);
    expect(log.findConflictByTerm(9, 1)).toBe(9);
  });

  it("isUpToDate compares last term, then last index", () => {
    const s = new MemoryStorage();
    s.append([ent(1, 1), ent(2, 2)]);
    const log = new RaftLog(s);
    expect(log.isUpToDate(1, 3)).toBe(true);
    expect(log.isUpToDate(2, 2)).toBe(true);
    expect(log.isUpToDate(1, 2)).toBe(false);
    expect(log.isUpToDate(9, 1)).toBe(false);
  });
});
