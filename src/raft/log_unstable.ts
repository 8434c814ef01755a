import { assert } from "./assert.js";
import type { Entry, Snapshot } from "./types.js";

/**
 * The unstable tail of the log: entries (and possibly an incoming snapshot) that raft has accepted
 * but the application has not yet reported as persisted. `entries[i]` has log index `offset + i`.
 */
export class Unstable {
  snapshot: Snapshot | undefined = undefined;
  entries: Entry[] = [];
  offset: number;

  constructor(offset: number) {
    this.offset = offset;
  }

  /** First index known from an unstable snapshot, if there is one. */
  maybeFirstIndex(): number | undefined {
    return this.snapshot === undefined ? undefined : this.snapshot.metadata.index + 1;
  }

  maybeLastIndex(): number | undefined {
    if (this.entries.length > 0) return this.offset + this.entries.length - 1;
    if (this.snapshot !== undefined) return this.snapshot.metadata.index;
    return undefined;
  }

  maybeTerm(i: number): number | undefined {
    if (i < this.offset) {
      if (this.snapshot !== undefined && this.snapshot.metadata.index === i) return this.snapshot.metadata.term;
      return undefined;
    }
    const last = this.maybeLastIndex();
    if (last === undefined || i > last) return undefined;
    return this.entries[i - this.offset].term;
  }

  /**
   * Entries up to (i, t) are persisted. Ignored when the term no longer matches: the tail was
   * replaced by a newer leader's entries after the Ready that carried (i, t) was taken.
   */
  stableTo(i: number, t: number): void {
    const gt = this.maybeTerm(i);
    if (gt === undefined) return;
    if (gt === t && i >= this.offset) {
      this.entries = this.entries.slice(i + 1 - this.offset);
      this.offset = i + 1;
    }
  }

  stableSnapTo(i: number): void {
    if (this.snapshot !== undefined && this.snapshot.metadata.index === i) this.snapshot = undefined;
  }

  restore(s: Snapshot): void {
    this.offset = s.metadata.index + 1;
    this.entries = [];
    this.snapshot = s;
  }

  truncateAndAppend(ents: Entry[]): void {
    const after = ents[0].index;
    if (after === this.offset + this.entries.length) {
      this.entries = this.entries.concat(ents);
    } else if (after <= this.offset) {
      // The whole unstable tail is replaced; the caller will overwrite storage from `after` on.
      this.offset = after;
      this.entries = ents.slice();
    } else {
      this.entries = this.slice(this.offset, after).concat(ents);
    }
  }

  slice(lo: number, hi: number): Entry[] {
    this.checkOutOfBounds(lo, hi);
    return this.entries.slice(lo - this.offset, hi - this.offset);
  }

  private checkOutOfBounds(lo: number, hi: number): void {
    assert(lo <= hi, () => `invalid unstable.slice ${lo} > ${hi}`);
    const upper = this.offset + this.entries.length;
    assert(lo >= this.offset && hi <= upper, () => `unstable.slice[${lo},${hi}) out of bound [${this.offset},${upper}]`);
  }
}
