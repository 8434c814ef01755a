/**
 * Result statistics and their text form, in the layout of etcd's pkg/report: `Summary:` (Total,
 * Slowest, Fastest, Average, Stddev, Requests/sec), an 11-bucket response time histogram and the
 * latency distribution at 10, 25, 50, 75, 90, 95, 99 and 99.9 %.
 *
 * Pure: latencies in, numbers and strings out.
 */

export const PERCENTILES: readonly number[] = [10, 25, 50, 75, 90, 95, 99, 99.9];
const HISTOGRAM_BUCKETS = 10;
const BAR_WIDTH_MAX = 40;
const BAR_CHAR = "∎";

export interface HistogramBucket {
  /** Upper bound of the bucket, seconds. */
  markSec: number;
  count: number;
}

/** What one report says, every duration in seconds. */
export interface Stats {
  totalSec: number;
  count: number;
  slowestSec: number;
  fastestSec: number;
  averageSec: number;
  stddevSec: number;
  rps: number;
  histogram: HistogramBucket[];
  /** Percentile -> latency, seconds, for PERCENTILES. */
  percentiles: Array<{ p: number; sec: number }>;
  /** Error message -> count; errors are not part of the latency figures (as in etcd). */
  errors: Record<string, number>;
}

/** Nearest-rank percentile of an ascending array (etcd's rank rule: ceil(p·(n+1)/100)). */
export function percentile(sorted: ArrayLike<number>, p: number): number {
  const n = sorted.length;
  if (n === 0) return 0;
  let idx = Math.ceil((p * (n + 1)) / 100) - 1;
  if (idx < 0) idx = 0;
  if (idx >= n) idx = n - 1;
  return sorted[idx] as number;
}

/** Counts of an ascending array in 10 equal-width buckets between fastest and slowest, plus the slowest. */
export function histogram(sorted: ArrayLike<number>): HistogramBucket[] {
  const n = sorted.length;
  if (n === 0) return [];
  const fastest = sorted[0] as number;
  const slowest = sorted[n - 1] as number;
  const width = (slowest - fastest) / HISTOGRAM_BUCKETS;
  const marks: number[] = [];
  for (let i = 0; i < HISTOGRAM_BUCKETS; i++) marks.push(fastest + width * i);
  marks.push(slowest);
  const counts = new Array<number>(marks.length).fill(0);
  let b = 0;
  for (let i = 0; i < n; ) {
    if ((sorted[i] as number) <= (marks[b] as number)) {
      counts[b] = (counts[b] as number) + 1;
      i++;
    } else if (b < marks.length - 1) {
      b++;
    } else {
      // Unreachable: the last mark is the maximum. Kept as a guard against NaN input.
      throw new Error(`histogram: value ${sorted[i]} above slowest ${slowest}`);
    }
  }
  return marks.map((markSec, i) => ({ markSec, count: counts[i] as number }));
}

/** Sorts `latenciesSec` in place and summarises it; `totalSec` is the wall time of the run. */
export function computeStats(latenciesSec: Float64Array, totalSec: number, errors: Record<string, number> = {}): Stats {
  latenciesSec.sort();
  const n = latenciesSec.length;
  let sum = 0;
  for (let i = 0; i < n; i++) sum += latenciesSec[i] as number;
  const average = n === 0 ? 0 : sum / n;
  let sq = 0;
  for (let i = 0; i < n; i++) {
    const d = (latenciesSec[i] as number) - average;
    sq += d * d;
  }
  return {
    totalSec,
    count: n,
    slowestSec: n === 0 ? 0 : (latenciesSec[n - 1] as number),
    fastestSec: n === 0 ? 0 : (latenciesSec[0] as number),
    averageSec: average,
    stddevSec: n === 0 ? 0 : Math.sqrt(sq / n),
    rps: totalSec > 0 ? n / totalSec : 0,
    histogram: histogram(latenciesSec),
    percentiles: PERCENTILES.map((p) => ({ p, sec: percentile(latenciesSec, p) })),
    errors: { ...errors },
  };
}

/** Go's "%4.4f" (default) or "%g" (--precise). */
export function formatNumber(v: number, precise: boolean): string {
  if (!precise) return v.toFixed(4);
  if (v === 0) return "0";
  const abs = Math.abs(v);
  // %g switches to exponent form for exponents < -4 or >= precision (shortest repr here).
  if (abs < 1e-4 || abs >= 1e21) return v.toExponential().replace(/e([+-])(\d)$/, "e$10$2");
  return String(v);
}

/** etcd's text report. Empty when there were neither results nor errors. */
export function formatStats(s: Stats, precise = false): string {
  const f = (v: number) => formatNumber(v, precise);
  let out = "";
  if (s.count > 0) {
    out += "\nSummary:\n";
    out += `  Total:\t${f(s.totalSec)} secs.\n`;
    out += `  Slowest:\t${f(s.slowestSec)} secs.\n`;
    out += `  Fastest:\t${f(s.fastestSec)} secs.\n`;
    out += `  Average:\t${f(s.averageSec)} secs.\n`;
    out += `  Stddev:\t${f(s.stddevSec)} secs.\n`;
    out += `  Requests/sec:\t${f(s.rps)}\n`;
    out += "\nResponse time histogram:\n";
    const max = Math.max(...s.histogram.map((b) => b.count));
    for (const b of s.histogram) {
      const bar = max > 0 ? Math.floor((b.count * BAR_WIDTH_MAX) / max) : 0;
      out += `  ${f(b.markSec)} [${b.count}]\t|${BAR_CHAR.repeat(bar)}\n`;
    }
    out += "\nLatency distribution:\n";
    for (const { p, sec } of s.percentiles) if (sec > 0) out += `  ${p}% in ${f(sec)} secs.\n`;
  }
  const errs = Object.entries(s.errors);
  if (errs.length > 0) {
    out += "\nError distribution:\n";
    for (const [msg, n] of errs) out += `  [${n}]\t${msg}\n`;
  }
  return out;
}

/** The JSON form of one report (`--json`), latencies in seconds like the text. */
export interface StatsJson {
  totalSec: number;
  count: number;
  rps: number;
  slowestSec: number;
  fastestSec: number;
  averageSec: number;
  stddevSec: number;
  p50Sec: number;
  p90Sec: number;
  p99Sec: number;
  p999Sec: number;
  percentiles: Array<{ p: number; sec: number }>;
  histogram: HistogramBucket[];
  errors: Record<string, number>;
  errorCount: number;
}

export function statsToJson(s: Stats): StatsJson {
  const at = (p: number) => s.percentiles.find((e) => e.p === p)?.sec ?? 0;
  return {
    totalSec: s.totalSec,
    count: s.count,
    rps: s.rps,
    slowestSec: s.slowestSec,
    fastestSec: s.fastestSec,
    averageSec: s.averageSec,
    stddevSec: s.stddevSec,
    p50Sec: at(50),
    p90Sec: at(90),
    p99Sec: at(99),
    p999Sec: at(99.9),
    percentiles: s.percentiles,
    histogram: s.histogram,
    errors: s.errors,
    errorCount: Object.values(s.errors).reduce((a, b) => a + b, 0),
  };
}
