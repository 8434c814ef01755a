import { describe, expect, it } from "vitest";
import { computeStats, formatNumber, formatStats, histogram, percentile, statsToJson } from "../../bench/benchmark/report.js";

describe("benchmark report", () => {
  it("percentiles use etcd's nearest-rank rule on the sorted latencies", () => {
    const sorted = Float64Array.from({ length: 100 }, (_, i) => i + 1); // 1..100
    expect(percentile(sorted, 10)).toBe(11); // index ceil(10·101/100) - 1 = 10
    expect(percentile(sorted, 99)).toBe(100); // index ceil(99.99) - 1 = 99
  });

  it("percentile indices: ceil(p·(n+1)/100) - 1, clamped", () => {
    const sorted = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10];
    expect(percentile(sorted, 50)).toBe(6); // ceil(5.5) - 1 = 5
    expect(percentile(sorted, 10)).toBe(2); // ceil(1.1) - 1 = 1
    expect(percentile(sorted, 99.9)).toBe(10); // clamped to n - 1
    expect(percentile([], 50)).toBe(0);
    expect(percentile([7], 10)).toBe(7);
  });

  it("summary statistics", () => {
    const s = computeStats(Float64Array.from([0.004, 0.001, 0.003, 0.002]), 2, { "rpc error: boom": 3 });
    expect(s.count).toBe(4);
    expect(s.fastestSec).toBe(0.001);
    expect(s.slowestSec).toBe(0.004);
    expect(s.averageSec).toBeCloseTo(0.0025, 12);
    expect(s.stddevSec).toBeCloseTo(Math.sqrt(0.00000125), 12); // population stddev, as etcd
    expect(s.rps).toBe(2);
    expect(statsToJson(s)).toMatchObject({ errorCount: 3, p50Sec: 0.003, count: 4 });
  });

  it("histogram: 10 equal buckets from fastest plus the slowest, every value counted once", () => {
    const lat = Float64Array.from({ length: 1000 }, (_, i) => 0.001 + (i % 97) * 0.0001).sort();
    const h = histogram(lat);
    expect(h).toHaveLength(11);
    expect(h[0]!.markSec).toBeCloseTo(0.001, 12);
    expect(h[10]!.markSec).toBeCloseTo(lat[999]!, 12);
    expect(h.reduce((n, b) => n + b.count, 0)).toBe(1000);
    for (let i = 1; i < h.length; i++) expect(h[i]!.markSec).toBeGreaterThanOrEqual(h[i - 1]!.markSec);
    expect(histogram(Float64Array.from([0.5, 0.5]))[0]!.count).toBe(2);
  });

  it("text output has etcd's layout", () => {
    const s = computeStats(Float64Array.from([0.001, 0.002, 0.003]), 1.5);
    const text = formatStats(s);
    expect(text).toMatch(/^\nSummary:\n {2}Total:\t1\.5000 secs\.\n {2}Slowest:\t0\.0030 secs\.\n {2}Fastest:\t0\.0010 secs\.\n {2}Average:\t0\.0020 secs\.\n {2}Stddev:\t0\.0008 secs\.\n {2}Requests\/sec:\t2\.0000\n/);
    expect(text).toContain("\nResponse time histogram:\n  0.0010 [1]\t|∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎\n");
    expect(text).toContain("\nLatency distribution:\n  10% in 0.0010 secs.\n");
    expect(text).toContain("  99.9% in 0.0030 secs.\n");
    expect(text).not.toContain("Error distribution");
  });

  it("errors only: no summary, an error distribution", () => {
    const text = formatStats(computeStats(new Float64Array(0), 1, { "rpc error: code = Unavailable desc = x": 2 }));
    expect(text).toBe("\nError distribution:\n  [2]\trpc error: code = Unavailable desc = x\n");
  });

  it("--precise prints like Go's %g", () => {
    expect(formatNumber(0.0012345, false)).toBe("0.0012");
    expect(formatNumber(0.0012345, true)).toBe("0.0012345");
    expect(formatNumber(0, true)).toBe("0");
    expect(formatNumber(0.00001, true)).toBe("1e-05");
  });
});
