import { assert } from "./assert.js";
import { Unstable } from "./log_unstable.js";
import { CompactedError, UnavailableError, limitSize, type Entry, type Snapshot, type Storage } from "./types.js";

export const NO_LIMIT = Number.MAX_SAFE_INTEGER;

/**
 * The Raft log as the algorithm sees it: the persisted part behind `storage` followed by the
 * unstable tail. Tracks the commit index (known durable on a quorum) and the applied index.
 */
export class RaftLog {
  readonly storage: Storage;
  readonly unstable: Unstable;
  committed: number;
  applied: number;
  /** Byte limit on the committed entries handed out in one Ready. */
  readonly maxNextEntsSizeBytes: number;

  constructor(storage: Storage, maxNextEntsSizeBytes: number = NO_LIMIT) {
    this.storage = storage;
    const firstIndex = storage.firstIndex();
    const lastIndex = storage.lastIndex();
    this.unstable = new Unstable(lastIndex + 1);
    // Everything up to the snapshot is committed and applied by definition.
    this.committed = firstIndex - 1;
    this.applied = firstIndex - 1;
    this.maxNextEntsSizeBytes = maxNextEntsSizeBytes;
  }

  /**
   * The follower side of AppendEntries: if the entry at `index` has `logTerm`, append `ents`
   * (truncating a conflicting suffix) and advance commit. Returns the last new index, or
   * undefined when the log does not match at `index`.
   */
  maybeAppend(index: number, logTerm: number, committed: number, ents: Entry[]): number | undefined {
    if (!this.matchTerm(index, logTerm)) return undefined;
    const lastNewIndex = index + ents.length;
    const ci = this.findConflict(ents);
    if (ci !== 0) {
      assert(ci > this.committed, () => `entry ${ci} conflicts with committed entry [committed(${this.committed})]`);
      this.append(ents.slice(ci - (index + 1)));
    }
    this.commitTo(Math.min(committed, lastNewIndex));
    return lastNewIndex;
  }

  append(ents: Entry[]): number {
    if (ents.length === 0) return this.lastIndex();
    const after = ents[0].index - 1;
    assert(after >= this.committed, () => `after(${after}) is out of range [committed(${this.committed})]`);
    this.unstable.truncateAndAppend(ents);
    return this.lastIndex();
  }

  /**
   * The index of the first entry of `ents` whose term differs from ours (or that we do not have),
   * 0 when all of them are already present with the same term.
   */
  findConflict(ents: Entry[]): number {
    for (const e of ents) {
      if (!this.matchTerm(e.index, e.term)) return e.index;
    }
    return 0;
  }

  /**
   * The largest index ≤ `index` whose term is ≤ `term` (fast backtracking: a whole term of
   * mismatching entries is skipped in one round trip).
   */
  findConflictByTerm(index: number, term: number): number {
    if (index > this.lastIndex()) return index;
    for (;;) {
      let t: number;
      try {
        t = this.term(index);
      } catch (e) {
        if (e instanceof CompactedError || e instanceof UnavailableError) break;
        throw e;
      }
      if (t <= term) break;
      index--;
    }
    return index;
  }

  unstableEntries(): Entry[] {
    return this.unstable.entries.slice();
  }

  /** Committed entries not yet applied, at most maxNextEntsSizeBytes (but at least one). */
  nextEnts(): Entry[] {
    const off = Math.max(this.applied + 1, this.firstIndex());
    if (this.committed + 1 > off) return this.slice(off, this.committed + 1, this.maxNextEntsSizeBytes);
    return [];
  }

  hasNextEnts(): boolean {
    return this.committed + 1 > Math.max(this.applied + 1, this.firstIndex());
  }

  hasPendingSnapshot(): boolean {
    return this.unstable.snapshot !== undefined && this.unstable.snapshot.metadata.index !== 0;
  }

  snapshot(): Snapshot {
    return this.unstable.snapshot ?? this.storage.snapshot();
  }

  firstIndex(): number {
    return this.unstable.maybeFirstIndex() ?? this.storage.firstIndex();
  }

  lastIndex(): number {
    return this.unstable.maybeLastIndex() ?? this.storage.lastIndex();
  }

  commitTo(toCommit: number): void {
    // Commit never goes back.
    if (this.committed < toCommit) {
      assert(
        this.lastIndex() >= toCommit,
        () => `tocommit(${toCommit}) is out of range [lastIndex(${this.lastIndex()})]. Was the raft log corrupted, truncated, or lost?`,
      );
      this.committed = toCommit;
    }
  }

  appliedTo(i: number): void {
    if (i === 0) return;
    assert(
      this.committed >= i && i >= this.applied,
      () => `applied(${i}) is out of range [prevApplied(${this.applied}), committed(${this.committed})]`,
    );
    this.applied = i;
  }

  stableTo(i: number, t: number): void {
    this.unstable.stableTo(i, t);
  }

  stableSnapTo(i: number): void {
    this.unstable.stableSnapTo(i);
  }

  lastTerm(): number {
    return this.term(this.lastIndex());
  }

  /**
   * Term of entry i: 0 when i is outside [firstIndex-1, lastIndex]; throws CompactedError or
   * UnavailableError from storage.
   */
  term(i: number): number {
    const dummyIndex = this.firstIndex() - 1;
    if (i < dummyIndex || i > this.lastIndex()) return 0;
    const t = this.unstable.maybeTerm(i);
    if (t !== undefined) return t;
    return this.storage.term(i);
  }

  /** Term of entry i, 0 when compacted. */
  zeroTermOnErrCompacted(i: number): number {
    try {
      return this.term(i);
    } catch (e) {
      if (e instanceof CompactedError) return 0;
      throw e;
    }
  }

  /** Entries from i on, at most maxSizeBytes. Throws CompactedError if i is compacted. */
  entries(i: number, maxSizeBytes: number): Entry[] {
    if (i > this.lastIndex()) return [];
    return this.slice(i, this.lastIndex() + 1, maxSizeBytes);
  }

  allEntries(): Entry[] {
    for (;;) {
      try {
        return this.entries(this.firstIndex(), NO_LIMIT);
      } catch (e) {
        // A concurrent compaction can race with the read; try again.
        if (!(e instanceof CompactedError)) throw e;
      }
    }
  }

  /** The election restriction: is a log ending at (lastIndex, term) at least as up to date as ours? */
  isUpToDate(lastIndex: number, term: number): boolean {
    const ourTerm = this.lastTerm();
    return term > ourTerm || (term === ourTerm && lastIndex >= this.lastIndex());
  }

  matchTerm(i: number, term: number): boolean {
    try {
      return this.term(i) === term;
    } catch (e) {
      if (e instanceof CompactedError || e instanceof UnavailableError) return false;
      throw e;
    }
  }

  /**
   * The leader's commit rule (Raft paper, Figure 8): an index replicated on a quorum is committed
   * only if its entry is from the current term; earlier entries commit indirectly under it.
   */
  maybeCommit(maxIndex: number, term: number): boolean {
    if (maxIndex > this.committed && this.zeroTermOnErrCompacted(maxIndex) === term) {
      this.commitTo(maxIndex);
      return true;
    }
    return false;
  }

  restore(s: Snapshot): void {
    assert(s.metadata.index >= this.committed, () => `snapshot ${s.metadata.index} is behind commit ${this.committed}`);
    this.committed = s.metadata.index;
    this.unstable.restore(s);
  }

  /** Entries in [lo, hi), at most maxSizeBytes (but at least one). Throws CompactedError if lo is compacted. */
  slice(lo: number, hi: number, maxSizeBytes: number): Entry[] {
    this.checkOutOfBounds(lo, hi);
    if (lo === hi) return [];
    let ents: Entry[] = [];
    const offset = this.unstable.offset;
    if (lo < offset) {
      const storedHi = Math.min(hi, offset);
      let stored: Entry[];
      try {
        stored = this.storage.entries(lo, storedHi, maxSizeBytes);
      } catch (e) {
        if (e instanceof UnavailableError) {
          assert(false, () => `entries[${lo}:${storedHi}) is unavailable from storage`);
        }
        throw e;
      }
      // Storage stopped early because of the size limit: do not add unstable entries after a gap.
      if (stored.length < storedHi - lo) return stored;
      ents = stored;
    }
    if (hi > offset) {
      const unstable = this.unstable.slice(Math.max(lo, offset), hi);
      ents = ents.length > 0 ? ents.concat(unstable) : unstable;
    }
    return limitSize(ents, maxSizeBytes);
  }

  private checkOutOfBounds(lo: number, hi: number): void {
    assert(lo <= hi, () => `invalid slice ${lo} > ${hi}`);
    const fi = this.firstIndex();
    if (lo < fi) throw new CompactedError();
    const li = this.lastIndex();
    assert(hi <= li + 1, () => `slice[${lo},${hi}) out of bound [${fi},${li}]`);
  }
}
