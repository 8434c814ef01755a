/** A growable array of latencies (seconds) per series; bounded by the request total. */
export class LatencyRecorder {
  private readonly arrays: Float64Array[];
  private readonly lengths: number[];

  constructor(
    seriesCount: number,
    private readonly capacityMax: number,
  ) {
    const initial = Math.min(capacityMax, 65_536);
    this.arrays = Array.from({ length: seriesCount }, () => new Float64Array(Math.max(1, initial)));
    this.lengths = new Array<number>(seriesCount).fill(0);
  }

  push(series: number, sec: number): void {
    let arr = this.arrays[series];
    if (arr === undefined) throw new Error(`LatencyRecorder: no series ${series}`);
    const len = this.lengths[series] as number;
    if (len === arr.length) {
      if (len >= this.capacityMax) throw new Error(`LatencyRecorder: more than ${this.capacityMax} results`);
      const grown = new Float64Array(Math.min(this.capacityMax, len * 2));
      grown.set(arr);
      this.arrays[series] = grown;
      arr = grown;
    }
    arr[len] = sec;
    this.lengths[series] = len + 1;
  }

  /** The recorded values per series, trimmed (copies, safe to transfer). */
  take(): Float64Array[] {
    return this.arrays.map((a, i) => a.slice(0, this.lengths[i]));
  }
}

/** Concatenates per-worker arrays of one series. */
export function concatLatencies(parts: Float64Array[]): Float64Array {
  const out = new Float64Array(parts.reduce((n, p) => n + p.length, 0));
  let off = 0;
  for (const p of parts) {
    out.set(p, off);
    off += p.length;
  }
  return out;
}
