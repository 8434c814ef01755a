import { describe, expect, it } from "vitest";
import { DEFAULT_HEAP_GROWING_PERCENT, tuneV8 } from "../../src/server/v8_tuning.js";

describe("V8 tuning", () => {
  it("caps the heap growing factor by default and takes an override", () => {
    expect(tuneV8({})).toEqual({ percent: DEFAULT_HEAP_GROWING_PERCENT });
    expect(tuneV8({ ETCETERA_HEAP_GROWING_PERCENT: "" })).toEqual({ percent: DEFAULT_HEAP_GROWING_PERCENT });
    expect(tuneV8({ ETCETERA_HEAP_GROWING_PERCENT: "0" })).toEqual({ percent: 0 });
    expect(tuneV8({ ETCETERA_HEAP_GROWING_PERCENT: "120" })).toEqual({ percent: 120 });
  });

  it("refuses a value that is not a percent", () => {
    for (const bad of ["-1", "1.5", "abc", "1001"]) {
      expect(tuneV8({ ETCETERA_HEAP_GROWING_PERCENT: bad })).toHaveProperty("error", expect.stringContaining("ETCETERA_HEAP_GROWING_PERCENT"));
    }
  });

  it("takes ETCETERA_V8_INTERRUPT_BUDGET as 0 or 1 only", () => {
    expect(tuneV8({ ETCETERA_V8_INTERRUPT_BUDGET: "0" })).toEqual({ percent: DEFAULT_HEAP_GROWING_PERCENT });
    expect(tuneV8({ ETCETERA_V8_INTERRUPT_BUDGET: "1" })).toEqual({ percent: DEFAULT_HEAP_GROWING_PERCENT });
    expect(tuneV8({ ETCETERA_V8_INTERRUPT_BUDGET: "8192" })).toEqual({ error: 'ETCETERA_V8_INTERRUPT_BUDGET must be 0 or 1, got "8192"' });
  });
});
