import { describe, expect, it } from "vitest";
import { sumGcTrace } from "../../bench/compare/gc_trace.js";

// Lines as V8 11.3's --trace-gc-nvp prints them (abridged: the fields the sum reads, among others).
const TRACE = [
  "[3383:0xdbe3890]    11915 ms: pause=5.8 mutator=278.5 gc=s reduce_memory=0 scavenge=5.68 promoted=3219160 new_space_survived=2698272",
  "[3383:0xdbe3890]    12010 ms: pause=33.5 mutator=61.0 gc=s reduce_memory=0 scavenge=32.49 promoted=1761280",
  "[3383:0xdbe3890]    12100 ms: pause=16.5 mutator=83.4 gc=mc reduce_memory=0 mark=4.3 promoted=4277248",
  // The quiet gap between the warm-up and the measured run: not load, left out.
  "[3383:0xdbe3890]    612100 ms: pause=12.3 mutator=603612.9 gc=s promoted=1912832",
  "some log line of the member itself: level=30 msg=x",
].join("\n");

describe("sumGcTrace", () => {
  it("sums scavenges and mark-compacts, their promotion and the mutator time between them", () => {
    const r = sumGcTrace(TRACE);
    expect(r.scavenge.count).toBe(2);
    expect(r.scavenge.pauseMs).toBeCloseTo(39.3, 6);
    expect(r.markCompact).toEqual({ count: 1, pauseMs: 16.5 });
    expect(r.promotedBytes).toBe(3219160 + 1761280 + 4277248);
    expect(r.mutatorMs).toBeCloseTo(278.5 + 61.0 + 83.4, 6);
  });

  it("finds nothing in output without GC lines", () => {
    expect(sumGcTrace("plain\nlines").scavenge.count).toBe(0);
  });
});
