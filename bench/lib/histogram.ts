/**
 * A fixed-size latency histogram (log-scale buckets, ~4% resolution) that
 * workers fill and the driver merges: bounded memory whatever the request count.
 */

/** Buckets per power of two. */
const SUB_BUCKETS = 16;
/** Covers 1 µs .. 2^36 µs (~19 h). */
const BUCKETS = 36 * SUB_BUCKETS;

export class LatencyHistogram {
  readonly counts: number[];
  total = 0;
  sumUs = 0;

  constructor(counts?: number[]) {
    this.counts = counts ?? new Array<number>(BUCKETS).fill(0);
    for (const c of this.counts) this.total += c;
  }

  record(us: number): void {
    const v = Math.max(1, us);
    const i = Math.min(BUCKETS - 1, Math.floor(Math.log2(v) * SUB_BUCKETS));
    this.counts[i]!++;
    this.total++;
    this.sumUs += us;
  }

  merge(other: LatencyHistogram): void {
    for (let i = 0; i < BUCKETS; i++) this.counts[i]! += other.counts[i]!;
    this.total += other.total;
    this.sumUs += other.sumUs;
  }

  /** The latency (µs, bucket upper bound) below which a fraction q of samples fall. */
  quantileUs(q: number): number {
    if (this.total === 0) return 0;
    const rank = q * this.total;
    let seen = 0;
    for (let i = 0; i < BUCKETS; i++) {
      seen += this.counts[i]!;
      if (seen >= rank) return 2 ** ((i + 1) / SUB_BUCKETS);
    }
    return 2 ** (BUCKETS / SUB_BUCKETS);
  }

  meanUs(): number {
    return this.total === 0 ? 0 : this.sumUs / this.total;
  }
}
