import { describe, expect, it } from "vitest";
import { percentiles } from "../../bench/compare/latency_dist.js";

// The tail of a report as etcd's benchmark tool (v3.4.23) prints it.
const REPORT = [
  "Summary:",
  "  Total:\t6.1002 secs.",
  "  Requests/sec:\t16393.1602",
  "",
  "Latency distribution:",
  "  10% in 0.0311 secs.",
  "  50% in 0.0510 secs.",
  "  99% in 0.1351 secs.",
  "  99.9% in 0.1929 secs.",
].join("\n");

describe("latency_dist", () => {
  it("reads the tool's percentiles in milliseconds, in the tool's order", () => {
    const p = percentiles(REPORT);
    expect([...p.keys()]).toEqual(["10", "50", "99", "99.9"]);
    expect(p.get("99")).toBeCloseTo(135.1, 6);
    expect(p.get("99.9")).toBeCloseTo(192.9, 6);
  });

  it("finds nothing in a report without a distribution", () => {
    expect(percentiles("Summary:\n  Requests/sec:\t1.0\n").size).toBe(0);
  });
});
