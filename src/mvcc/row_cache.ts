/**
 * Rows by revision, held in memory up to a byte budget, oldest inserted first out (a hot row read
 * back after eviction is simply cached again). Revisions are immutable, so a cached row can never
 * be stale; only deleting a revision (compaction) removes it.
 *
 * Two parts, one budget and one eviction order (a sequence number per insertion):
 *
 * - **written**: the rows the apply writes, whose revisions only ever ascend. Kept as parallel
 *   arrays searched by bisection, so a put costs a few array pushes and its eviction an index
 *   step. A Map keyed by revision cost far more per put (issue 18: the row cache's `set` was
 *   3-5% of the leader's main thread under put load): a packed revision is above 2^31, so every
 *   key was a heap number to hash, and a table of ~20k rows with one delete per put was rehashed
 *   over and over.
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

export function rowCost(row: CachedRow): number {
  return row.key.byteLength + row.value.byteLength + ROW_OVERHEAD_BYTES;
}

export class RowCache<R extends CachedRow> {
  // written: revisions strictly ascending from writtenHead; a deleted row leaves an undefined slot.
  private writtenRevs: number[] = [];
  private writtenRows: (R | undefined)[] = [];
  private writtenSeqs: number[] = [];
  private writtenHead = 0;
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
    return this.writtenRevs.length + this.readOrder.length;
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
      this.writtenRevs.push(row.rev);
      this.writtenRows.push(row);
      this.writtenSeqs.push(this.seq++);
      this.writtenLive++;
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

  /** The slot of `rev` in the written part, or -1 (bisection over the ascending revisions). */
  private writtenIndex(rev: number): number {
    const revs = this.writtenRevs;
    let lo = this.writtenHead;
    let hi = revs.length - 1;
    if (lo > hi || rev < revs[lo]! || rev > revs[hi]!) return -1;
    while (lo <= hi) {
      const mid = (lo + hi) >>> 1;
      const r = revs[mid]!;
      if (r === rev) return mid;
      if (r < rev) lo = mid + 1;
      else hi = mid - 1;
    }
    return -1;
  }

  /** Drops the row inserted first, of either part. */
  private evictOldest(): void {
    this.skipDeadReads();
    const readSeq = this.readHead < this.readOrder.length ? this.readSeqs[this.readHead]! : Number.POSITIVE_INFINITY;
    while (this.writtenHead < this.writtenRevs.length && this.writtenRows[this.writtenHead] === undefined) this.writtenHead++;
    const writtenSeq = this.writtenHead < this.writtenRevs.length ? this.writtenSeqs[this.writtenHead]! : Number.POSITIVE_INFINITY;
    invariant(readSeq !== writtenSeq, `row cache over budget (${this.bytesHeld} of ${this.maxBytes} bytes) with no row to evict`);
    if (writtenSeq < readSeq) {
      const row = this.writtenRows[this.writtenHead]!;
      this.writtenRows[this.writtenHead] = undefined;
      this.writtenHead++;
      this.writtenLive--;
      this.bytesHeld -= rowCost(row);
      return;
    }
    const rev = this.readOrder[this.readHead++]!;
    const row = this.readRows.get(rev)!;
    this.readRows.delete(rev);
    this.bytesHeld -= rowCost(row);
  }

  /** Moves the read queue's head past entries whose rows were deleted since. */
  private skipDeadReads(): void {
    while (this.readHead < this.readOrder.length && !this.readRows.has(this.readOrder[this.readHead]!)) this.readHead++;
  }

  /** Drops consumed prefixes and, once they outnumber the live rows, dead slots and stale queue entries. */
  private compact(): void {
    const slots = this.writtenRevs.length - this.writtenHead;
    if (slots - this.writtenLive > this.writtenLive + DEAD_SLOTS_SLACK) this.packWritten();
    else if (this.writtenHead > DEAD_SLOTS_SLACK && this.writtenHead * 2 > this.writtenRevs.length) this.dropWrittenPrefix();
    const queued = this.readOrder.length - this.readHead;
    if (queued > DEAD_SLOTS_SLACK && queued > 2 * this.readRows.size) this.packReadQueue();
    else if (this.readHead > DEAD_SLOTS_SLACK && this.readHead * 2 > this.readOrder.length) {
      this.readOrder = this.readOrder.slice(this.readHead);
      this.readSeqs = this.readSeqs.slice(this.readHead);
      this.readHead = 0;
    }
  }

  private dropWrittenPrefix(): void {
    const h = this.writtenHead;
    this.writtenRevs = this.writtenRevs.slice(h);
    this.writtenRows = this.writtenRows.slice(h);
    this.writtenSeqs = this.writtenSeqs.slice(h);
    this.writtenHead = 0;
  }

  private packWritten(): void {
    const revs: number[] = [];
    const rows: R[] = [];
    const seqs: number[] = [];
    for (let i = this.writtenHead; i < this.writtenRevs.length; i++) {
      const row = this.writtenRows[i];
      if (row === undefined) continue;
      revs.push(this.writtenRevs[i]!);
      rows.push(row);
      seqs.push(this.writtenSeqs[i]!);
    }
    invariant(rows.length === this.writtenLive, `row cache: ${rows.length} written rows found, ${this.writtenLive} counted`);
    this.writtenRevs = revs;
    this.writtenRows = rows;
    this.writtenSeqs = seqs;
    this.writtenHead = 0;
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
