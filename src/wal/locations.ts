/**
 * Where each live entry sits on disk (segment, offset, size, CRC seed) plus its term, so that
 * the WAL-backed Storage can answer term(i) without I/O and re-read evicted entries with one
 * positioned read. Kept in typed arrays (≈ 36 bytes per entry) indexed by raft index.
 */
import { assert } from "./errors.js";

export interface EntryLocation {
  seq: number;
  offset: number;
  totalBytes: number;
  seedCrc: number;
  term: number;
}

export class EntryLocations {
  private first = 0;
  private head = 0;
  private count = 0;
  private seq = new Float64Array(1024);
  private offset = new Float64Array(1024);
  private bytes = new Uint32Array(1024);
  private seed = new Uint32Array(1024);
  private term = new Float64Array(1024);

  get size(): number {
    return this.count;
  }

  /** First indexed raft index (meaningless when empty). */
  firstIndex(): number {
    return this.first;
  }

  lastIndex(): number {
    return this.first + this.count - 1;
  }

  /**
   * Records entry `index`. An index at or below the last one replaces that suffix (conflict);
   * one beyond last + 1 (after a snapshot marker jumped ahead) restarts the index.
   */
  put(index: number, loc: EntryLocation): void {
    if (this.count === 0 || index > this.lastIndex() + 1) {
      this.head = 0;
      this.count = 0;
      this.first = index;
    } else {
      assert(index >= this.first, () => `location for entry ${index} below the first indexed entry ${this.first}`);
      this.count = index - this.first;
    }
    this.ensureCapacity();
    const at = this.head + this.count;
    this.seq[at] = loc.seq;
    this.offset[at] = loc.offset;
    this.bytes[at] = loc.totalBytes;
    this.seed[at] = loc.seedCrc;
    this.term[at] = loc.term;
    this.count++;
  }

  get(index: number): EntryLocation | undefined {
    if (this.count === 0 || index < this.first || index > this.lastIndex()) return undefined;
    const at = this.head + index - this.first;
    return { seq: this.seq[at]!, offset: this.offset[at]!, totalBytes: this.bytes[at]!, seedCrc: this.seed[at]!, term: this.term[at]! };
  }

  termOf(index: number): number | undefined {
    if (this.count === 0 || index < this.first || index > this.lastIndex()) return undefined;
    return this.term[this.head + index - this.first];
  }

  /** Forgets entries stored in segments older than `seq` (they were released). */
  dropSegmentsBefore(seq: number): void {
    while (this.count > 0 && this.seq[this.head]! < seq) {
      this.head++;
      this.first++;
      this.count--;
    }
  }

  private ensureCapacity(): void {
    if (this.head + this.count < this.seq.length) return;
    const cap = this.count * 2 + 1024 > this.seq.length ? this.seq.length * 2 : this.seq.length;
    const move = <T extends Float64Array | Uint32Array>(a: T, make: (n: number) => T): T => {
      const b = make(cap);
      b.set(a.subarray(this.head, this.head + this.count));
      return b;
    };
    this.seq = move(this.seq, (n) => new Float64Array(n));
    this.offset = move(this.offset, (n) => new Float64Array(n));
    this.bytes = move(this.bytes, (n) => new Uint32Array(n));
    this.seed = move(this.seed, (n) => new Uint32Array(n));
    this.term = move(this.term, (n) => new Float64Array(n));
    this.head = 0;
  }
}
