/**
 * Rows by revision, held in memory up to a byte budget, oldest inserted first out (a hot row read
 * back after eviction is simply cached again). Revisions are immutable, so a cached row can never
 * be stale; only deleting a revision (compaction) removes it.
 *
 * Two parts, one budget and one eviction order (a sequence number per insertion):
 *
 * - **written**: the rows the apply writes, whose revisions only ever ascend. Kept in a ring of
 *   parallel slots searched by bisection, so a put costs three stores and its eviction an index
 *   step. A Map keyed by revision cost far more per put (issue 18: the row cache's `set` was
 *   3-5% of the leader's main thread under put load): a packed revision is above 2^31, so every
 *   key was a heap number to hash, and a table of ~20k rows with one delete per put was rehashed
 *   over and over. Plain arrays pushed at the end and sliced at the front once half consumed
 *   were regrown (copied into fresh, page-faulting memory) twice per ~20k puts: 2.2% of the
 *   core's main thread in `bench/compare/oncpu.ts`. The ring grows only when full, so its size
 *   follows the budget, not the write rate.
 * - **read**: rows a read brought back from the table (revisions below the highest written),
 *   a Map with a queue of its own.
 *
 * The queues are not read off a Map's order: V8's Map leaves a hole per deleted entry and walking
 * to its first live entry crosses them all.
 */

import { invariant } from './errors.js';

/** What the cache needs of a row: its revision and the bytes it holds. */
export interface CachedRow {
  readonly rev: number;
  readonly key: { readonly byteLength: number };
  readonly value: { readonly byteLength: number };
}

/** Per-row overhead counted against the budget (object, array slots or Map entry, buffer headers). */
export const ROW_OVERHEAD_BYTES = 200;
/** Dead slots (deleted rows) tolerated in the written part before it is packed again. */
const DEAD_SLOTS_SLACK = 4096;
/** The written ring's first capacity (it doubles when full, and never shrinks: its size follows the budget). */
const WRITTEN_CAPACITY_MIN = 1024;

export function rowCost(row: CachedRow): number {
  return row.key.byteLength + row.value.byteLength + ROW_OVERHEAD_BYTES;
}

export class RowCache<R extends CachedRow> {
  // written: a ring of `count` slots from `head` (capacity a power of two), revisions strictly
  // ascending in ring order; a deleted row leaves an undefined slot.
  private writtenRevs = new Float64Array(WRITTEN_CAPACITY_MIN);
  private writtenSeqs = new Float64Array(WRITTEN_CAPACITY_MIN);
  private writtenRows: (R | undefined)[] = new Array<R | undefined>(WRITTEN_CAPACITY_MIN).fill(undefined);
  private writtenMask = WRITTEN_CAPACITY_MIN - 1;
  private writtenHead = 0;
  private writtenCount = 0;
  private writtenLive = 0;
  // read: rows by revision, and their insertion order (entries of rows deleted since are skipped).
  private readonly readRows = new Map<number, R>();
  private readOrder: number[] = [];
  private readSeqs: number[] = [];
  private readHead = 0;
  private seq = 0;
  private bytesHeld = 0;
  /** The highest revision ever written into the cache. */
  private highest = 0;

  constructor(readonly maxBytes: number) {
    invariant(maxBytes > 0, `row cache budget ${maxBytes}`);
  }

  /** Bytes the cached rows count against the budget. */
  get bytes(): number {
    return this.bytesHeld;
  }

  /** Rows cached. */
  get size(): number {
    return this.writtenLive + this.readRows.size;
  }

  /** Slots and queue entries held, live or not (what compaction keeps bounded). */
  get slotsHeld(): number {
    return this.writtenCount + this.readOrder.length;
  }

  get(rev: number): R | undefined {
    const at = this.writtenIndex(rev);
    if (at >= 0) {
      const row = this.writtenRows[at];
      if (row !== undefined) return row;
    }
    return this.readRows.size === 0 ? undefined : this.readRows.get(rev);
  }

  /** Caches `row` unless it is larger than a 64th of the budget or its revision is cached already. */
  set(row: R): void {
    const cost = rowCost(row);
    if (cost > this.maxBytes / 64) return;
    if (row.rev > this.highest) {
      this.highest = row.rev;
      this.pushWritten(row);
    } else {
      // A revision's row never changes, so one cached already stays as it is.
      if (this.get(row.rev) !== undefined) return;
      this.readRows.set(row.rev, row);
      this.readOrder.push(row.rev);
      this.readSeqs.push(this.seq++);
    }
    this.bytesHeld += cost;
    while (this.bytesHeld > this.maxBytes) this.evictOldest();
    this.compact();
  }

  delete(rev: number): void {
    const at = this.writtenIndex(rev);
    const written = at >= 0 ? this.writtenRows[at] : undefined;
    if (written !== undefined) {
      this.writtenRows[at] = undefined;
      this.writtenLive--;
      this.bytesHeld -= rowCost(written);
      this.compact();
      return;
    }
    const read = this.readRows.get(rev);
    if (read === undefined) return;
    this.readRows.delete(rev);
    this.bytesHeld -= rowCost(read);
  }

  private pushWritten(row: R): void {
    if (this.writtenCount === this.writtenRows.length) this.resizeWritten(2 * this.writtenRows.length);
    const at = (this.writtenHead + this.writtenCount) & this.writtenMask;
    this.writtenRevs[at] = row.rev;
    this.writtenSeqs[at] = this.seq++;
    this.writtenRows[at] = row;
    this.writtenCount++;
    this.writtenLive++;
  }

  /** The ring slot of `rev` in the written part, or -1 (bisection over the ascending revisions). */
  private writtenIndex(rev: number): number {
    const revs = this.writtenRevs;
    const head = this.writtenHead;
    const mask = this.writtenMask;
    let lo = 0;
    let hi = this.writtenCount - 1;
    if (hi < 0 || rev < revs[head]! || rev > revs[(head + hi) & mask]!) return -1;
    while (lo <= hi) {
      const mid = (lo + hi) >>> 1;
      const at = (head + mid) & mask;
      const r = revs[at]!;
      if (r === rev) return at;
      if (r < rev) lo = mid + 1;
      else hi = mid - 1;
    }
    return -1;
  }

  /** Drops the row inserted first, of either part. */
  private evictOldest(): void {
    this.skipDeadReads();
    const readSeq = this.readHead < this.readOrder.length ? this.readSeqs[this.readHead]! : Number.POSITIVE_INFINITY;
    while (this.writtenCount > 0 && this.writtenRows[this.writtenHead] === undefined) this.shiftWritten();
    const writtenSeq = this.writtenCount > 0 ? this.writtenSeqs[this.writtenHead]! : Number.POSITIVE_INFINITY;
    invariant(readSeq !== writtenSeq, () => `row cache over budget (${this.bytesHeld} of ${this.maxBytes} bytes) with no row to evict`);
    if (writtenSeq < readSeq) {
      const row = this.writtenRows[this.writtenHead]!;
      this.shiftWritten();
      this.writtenLive--;
      this.bytesHeld -= rowCost(row);
      return;
    }
    const rev = this.readOrder[this.readHead++]!;
    const row = this.readRows.get(rev)!;
    this.readRows.delete(rev);
    this.bytesHeld -= rowCost(row);
  }

  /** Drops the written ring's first slot (its row, if any, already accounted for by the caller). */
  private shiftWritten(): void {
    this.writtenRows[this.writtenHead] = undefined;
    this.writtenHead = (this.writtenHead + 1) & this.writtenMask;
    this.writtenCount--;
  }

  /** Moves the read queue's head past entries whose rows were deleted since. */
  private skipDeadReads(): void {
    while (this.readHead < this.readOrder.length && !this.readRows.has(this.readOrder[this.readHead]!)) this.readHead++;
  }

  /** Drops, once they outnumber the live rows, dead slots and stale queue entries, and the read queue's consumed prefix. */
  private compact(): void {
    if (this.writtenCount - this.writtenLive > this.writtenLive + DEAD_SLOTS_SLACK) this.packWritten();
    const queued = this.readOrder.length - this.readHead;
    if (queued > DEAD_SLOTS_SLACK && queued > 2 * this.readRows.size) this.packReadQueue();
    else if (this.readHead > DEAD_SLOTS_SLACK && this.readHead * 2 > this.readOrder.length) {
      this.readOrder = this.readOrder.slice(this.readHead);
      this.readSeqs = this.readSeqs.slice(this.readHead);
      this.readHead = 0;
    }
  }

  /** The written ring without its dead slots, at the capacity it has. */
  private packWritten(): void {
    this.resizeWritten(this.writtenRows.length, true);
    invariant(this.writtenCount === this.writtenLive, `row cache: ${this.writtenCount} written rows kept, ${this.writtenLive} counted`);
  }

  /** Moves the written ring into new slots of `capacity` (a power of two), from slot 0, live rows only if `liveOnly`. */
  private resizeWritten(capacity: number, liveOnly = false): void {
    invariant(capacity >= this.writtenCount && (capacity & (capacity - 1)) === 0, `row cache ring capacity ${capacity} for ${this.writtenCount} slots`);
    const revs = new Float64Array(capacity);
    const seqs = new Float64Array(capacity);
    const rows = new Array<R | undefined>(capacity).fill(undefined);
    let n = 0;
    for (let i = 0; i < this.writtenCount; i++) {
      const at = (this.writtenHead + i) & this.writtenMask;
      const row = this.writtenRows[at];
      if (liveOnly && row === undefined) continue;
      revs[n] = this.writtenRevs[at]!;
      seqs[n] = this.writtenSeqs[at]!;
      rows[n] = row;
      n++;
    }
    this.writtenRevs = revs;
    this.writtenSeqs = seqs;
    this.writtenRows = rows;
    this.writtenMask = capacity - 1;
    this.writtenHead = 0;
    this.writtenCount = n;
  }

  /** Keeps one queue entry per cached read row: its latest insertion's. */
  private packReadQueue(): void {
    const latest = new Map<number, number>();
    for (let i = this.readHead; i < this.readOrder.length; i++) latest.set(this.readOrder[i]!, i);
    const order: number[] = [];
    const seqs: number[] = [];
    for (let i = this.readHead; i < this.readOrder.length; i++) {
      const rev = this.readOrder[i]!;
      if (latest.get(rev) !== i || !this.readRows.has(rev)) continue;
      order.push(rev);
      seqs.push(this.readSeqs[i]!);
    }
    this.readOrder = order;
    this.readSeqs = seqs;
    this.readHead = 0;
  }
}
