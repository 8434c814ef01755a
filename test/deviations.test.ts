import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { BEHAVIOUR_DEVIATIONS, FRAME_DEVIATIONS, RPC_DEVIATIONS } from "./deviations.js";

const ROOT = resolve(import.meta.dirname, "..");

describe("the deviations list (test/deviations.ts)", () => {
  it("every per-target behaviour names a test file that cites its id", () => {
    for (const [id, d] of Object.entries(BEHAVIOUR_DEVIATIONS)) {
      expect(readFileSync(resolve(ROOT, d.where), "utf8"), `${d.where} should cite "deviation: ${id}"`).toContain(`deviation: ${id}`);
    }
  });

  it("every test that cites a deviation id cites one that is listed", () => {
    const files = [...new Set(Object.values(BEHAVIOUR_DEVIATIONS).map((d) => d.where))];
    for (const f of files) {
      for (const m of readFileSync(resolve(ROOT, f), "utf8").matchAll(/deviation: ([a-z0-9-]+)/g)) {
        expect(Object.keys(BEHAVIOUR_DEVIATIONS), `${f} cites ${m[1]}`).toContain(m[1]);
      }
    }
  });

  it("every entry says why", () => {
    for (const d of [...FRAME_DEVIATIONS, ...RPC_DEVIATIONS, ...Object.values(BEHAVIOUR_DEVIATIONS)]) expect(d.why.length).toBeGreaterThan(20);
  });
});
