import { describe, expect, it } from "vitest";
import { DEFAULT_HEAP_GROWING_PERCENT, tuneHeap } from "../../src/server/heap_tuning.js";

describe("heap tuning", () => {
  it("leaves V8's policy by default and takes an override", () => {
    expect(tuneHeap({})).toEqual({ percent: DEFAULT_HEAP_GROWING_PERCENT });
    expect(tuneHeap({ ETCETERA_HEAP_GROWING_PERCENT: "" })).toEqual({ percent: DEFAULT_HEAP_GROWING_PERCENT });
    expect(tuneHeap({ ETCETERA_HEAP_GROWING_PERCENT: "50" })).toEqual({ percent: 50 });
    expect(tuneHeap({ ETCETERA_HEAP_GROWING_PERCENT: "120" })).toEqual({ percent: 120 });
  });

  it("refuses a value that is not a percent", () => {
    for (const bad of ["-1", "1.5", "abc", "1001"]) {
      expect(tuneHeap({ ETCETERA_HEAP_GROWING_PERCENT: bad })).toHaveProperty("error", expect.stringContaining("ETCETERA_HEAP_GROWING_PERCENT"));
    }
  });
});
