import { assert } from "./assert.js";
import {
  CompactedError,
  EntryType,
  EMPTY_HARD_STATE,
  SnapOutOfDateError,
  UnavailableError,
  emptyConfState,
  limitSize,
  type ConfState,
  type Entry,
  type HardState,
  type Snapshot,
  type Storage,
} from "./types.js";

/**
 * An in-memory Storage, as etcd's MemoryStorage: it holds exactly what the application has
 * persisted (the simulator treats it as the disk that survives a crash). `ents[0]` is a dummy
 * entry carrying the snapshot's index and term, so `ents[i]` has log index `ents[0].index + i`.
 */
export class MemoryStorage implements Storage {
  private hardState: HardState = { ...EMPTY_HARD_STATE };
  private snap: Snapshot = { data: new Uint8Array(0), metadata: { confState: emptyConfState(), index: 0, term: 0 } };
  private ents: Entry[] = [dummyEntry(0, 0)];

  initialState(): { hardState: HardState; confState: ConfState } {
    return { hardState: { ...this.hardState }, confState: cloneConfState(this.snap.metadata.confState) };
  }

  setHardState(hs: HardState): void {
    this.hardState = { ...hs };
  }

  entries(lo: number, hi: number, maxSizeBytes: number): Entry[] {
    const offset = this.ents[0].index;
    if (lo <= offset) throw new CompactedError();
    assert(hi <= this.lastIndex() + 1, () => `entries' hi(${hi}) is out of bound lastindex(${this.lastIndex()})`);
    if (this.ents.length === 1) throw new UnavailableError();
    return limitSize(this.ents.slice(lo - offset, hi - offset), maxSizeBytes);
  }

  term(i: number): number {
    const offset = this.ents[0].index;
    if (i < offset) throw new CompactedError();
    if (i - offset >= this.ents.length) throw new UnavailableError();
    return this.ents[i - offset].term;
  }

  lastIndex(): number {
    return this.ents[0].index + this.ents.length - 1;
  }

  firstIndex(): number {
    return this.ents[0].index + 1;
  }

  snapshot(): Snapshot {
    return this.snap;
  }

  /** Replace the whole contents with a snapshot (a follower installing one from its leader). */
  applySnapshot(snap: Snapshot): void {
    if (this.snap.metadata.index >= snap.metadata.index) throw new SnapOutOfDateError();
    this.snap = cloneSnapshot(snap);
    this.ents = [dummyEntry(snap.metadata.index, snap.metadata.term)];
  }

  /**
   * Record a snapshot of the application's state at applied index `index` (≤ lastIndex). Entries
   * are kept until `compact` is called, so lagging followers can still be served from the log.
   */
  createSnapshot(index: number, confState: ConfState | undefined, data: Uint8Array): Snapshot {
    if (index <= this.snap.metadata.index) throw new SnapOutOfDateError();
    assert(index <= this.lastIndex(), () => `snapshot ${index} is out of bound lastindex(${this.lastIndex()})`);
    const offset = this.ents[0].index;
    this.snap = {
      data,
      metadata: {
        index,
        term: this.ents[index - offset].term,
        confState: confState === undefined ? this.snap.metadata.confState : cloneConfState(confState),
      },
    };
    return this.snap;
  }

  /** Discard entries before `compactIndex`; it must not exceed the applied index (the caller's job). */
  compact(compactIndex: number): void {
    const offset = this.ents[0].index;
    if (compactIndex <= offset) throw new CompactedError();
    assert(compactIndex <= this.lastIndex(), () => `compact ${compactIndex} is out of bound lastindex(${this.lastIndex()})`);
    const i = compactIndex - offset;
    this.ents = [dummyEntry(this.ents[i].index, this.ents[i].term)].concat(this.ents.slice(i + 1));
  }

  /**
   * Append entries that follow (or overlap) the stored log; a suffix that conflicts is replaced,
   * entries below the first index are ignored (already compacted).
   */
  append(entries: Entry[]): void {
    if (entries.length === 0) return;
    const first = this.firstIndex();
    const last = entries[0].index + entries.length - 1;
    if (last < first) return;
    if (first > entries[0].index) entries = entries.slice(first - entries[0].index);
    for (let k = 1; k < entries.length; k++) {
      assert(entries[k].index === entries[k - 1].index + 1, "appended entries must be contiguous");
    }
    const offset = entries[0].index - this.ents[0].index;
    assert(this.ents.length >= offset, () => `missing log entry [last: ${this.lastIndex()}, append at: ${entries[0].index}]`);
    // Truncate a conflicting suffix in place, then append: O(new entries), not O(log).
    this.ents.length = offset;
    for (const e of entries) this.ents.push(e);
  }

  /** The persisted hard state (for tests and the simulator). */
  persistedHardState(): HardState {
    return { ...this.hardState };
  }
}

function dummyEntry(index: number, term: number): Entry {
  return { index, term, type: EntryType.Normal, data: new Uint8Array(0) };
}

export function cloneConfState(cs: ConfState): ConfState {
  return {
    voters: cs.voters.slice(),
    learners: cs.learners.slice(),
    votersOutgoing: cs.votersOutgoing.slice(),
    learnersNext: cs.learnersNext.slice(),
    autoLeave: cs.autoLeave,
  };
}

function cloneSnapshot(s: Snapshot): Snapshot {
  return { data: s.data, metadata: { index: s.metadata.index, term: s.metadata.term, confState: cloneConfState(s.metadata.confState) } };
}
