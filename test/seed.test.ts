import { describe, expect, it } from "vitest";
import { chooseSeed, fixedSeed } from "./seed.js";

describe("test seeds", () => {
  const fresh = () => 777;

  it("SEED= wins everywhere, CI takes a fixed seed per test name, a local run a fresh one", () => {
    expect(chooseSeed("a", { SEED: "42", CI: "true" }, fresh)).toEqual({ seed: 42, source: "SEED" });
    expect(chooseSeed("a", { CI: "true" }, fresh)).toEqual({ seed: fixedSeed("a"), source: "CI" });
    expect(chooseSeed("a", { CI: "1" }, fresh).seed).toBe(chooseSeed("a", { CI: "true" }, fresh).seed);
    expect(chooseSeed("a", {}, fresh)).toEqual({ seed: 777, source: "fresh" });
    expect(chooseSeed("a", { CI: "false", SEED: "" }, fresh)).toEqual({ seed: 777, source: "fresh" });
  });

  it("fixed seeds differ by name, are stable and fit a 31-bit integer", () => {
    expect(fixedSeed("lessor model")).toBe(fixedSeed("lessor model"));
    expect(fixedSeed("lessor model")).not.toBe(fixedSeed("lease_queue"));
    // FNV-1a of "a" (0xe40c292c) masked to 31 bits: a pinned value, so CI's seeds never drift.
    expect(fixedSeed("a")).toBe(0xe40c292c & 0x7fffffff);
    for (const n of ["", "x", "chaos random fault order"]) {
      expect(Number.isInteger(fixedSeed(n))).toBe(true);
      expect(fixedSeed(n)).toBeGreaterThanOrEqual(0);
      expect(fixedSeed(n)).toBeLessThan(2 ** 31);
    }
  });

  it("refuses a SEED that is not an integer", () => {
    expect(() => chooseSeed("a", { SEED: "abc" }, fresh)).toThrow(/SEED must be an integer/);
  });
});
