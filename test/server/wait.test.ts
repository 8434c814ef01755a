import { describe, expect, it } from "vitest";
import { Wait } from "../../src/server/wait.js";

describe("Wait", () => {
  it("expires waiters oldest first up to the given time, and leaves the rest and those already answered", async () => {
    const w = new Wait<number>(10);
    const a = w.register(1, 100);
    const b = w.register(2, 100);
    const c = w.register(3, 200);
    expect(w.trigger(2, 7)).toBe(true);
    expect(w.expire(99, () => new Error("late"))).toBe(0);
    expect(w.expire(150, () => new Error("late"))).toBe(1);
    await expect(a).rejects.toThrow("late");
    expect(await b).toBe(7);
    expect(w.has(3)).toBe(true);
    expect(w.expire(200, () => new Error("later"))).toBe(1);
    await expect(c).rejects.toThrow("later");
    expect(w.size).toBe(0);
  });

  it("refuses a deadline before the last one registered (the sweep relies on their order)", () => {
    const w = new Wait<number>(10);
    void w.register(1, 100).catch(() => {});
    expect(() => w.register(2, 99)).toThrow(/deadline 99 before the last one registered \(100\)/);
    expect(w.size).toBe(1);
  });
});
