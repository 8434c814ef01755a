import { describe, expect, it } from "vitest";
import { kiAlive, kiCompact, kiCreated, kiGet, kiNew, kiPut, kiTombstone, kiVersion, type KeyIndex } from "../../src/mvcc/key_index.js";
import { packRev, revMain } from "../../src/mvcc/revision.js";
import { mulberry32 } from "../prng.js";
import { seedFor } from "./helpers.js";

interface Gen {
  created: number;
  ver: number;
  revs: number[];
}

/** The flat form a keyIndex must equal: [created, ver, n, rev_1..rev_n] per generation. */
function flat(gens: Gen[]): number[] {
  return gens.flatMap((g) => [g.created, g.ver, g.revs.length, ...g.revs]);
}

/** A sparse array (a slot never written) would read as undefined and turn arithmetic into NaN. */
function holes(ki: KeyIndex): number {
  let n = 0;
  for (let i = 0; i < ki.length; i++) if (!(i in ki)) n++;
  return n;
}

describe("keyIndex puts and tombstones (exact-size arrays while small)", () => {
  it("matches the generation model over a seeded run, with no holes, copying small arrays and growing large ones in place", () => {
    const seed = seedFor("key_index.model");
    const rnd = mulberry32(seed);
    for (let key = 0; key < 200; key++) {
      let main = 2;
      let ki = kiNew(packRev(main, 0));
      const gens: Gen[] = [{ created: main, ver: 1, revs: [packRev(main, 0)] }];
      const steps = 1 + Math.floor(rnd() * 60);
      for (let s = 0; s < steps; s++) {
        main += 1 + Math.floor(rnd() * 3);
        const rev = packRev(main, Math.floor(rnd() * 2));
        const last = gens[gens.length - 1]!;
        const before = [...ki];
        const small = ki.length < 32;
        const old = ki;
        if (rnd() < 0.2) {
          const next = kiTombstone(ki, rev);
          if (last.revs.length === 0) {
            expect(next, `seed ${seed}`).toBeNull();
            continue;
          }
          expect(next).not.toBeNull();
          ki = next!;
          last.ver++;
          last.revs.push(rev);
          gens.push({ created: 0, ver: 0, revs: [] });
        } else {
          ki = kiPut(ki, rev);
          if (last.revs.length === 0) last.created = revMain(rev);
          last.ver++;
          last.revs.push(rev);
        }
        expect([...ki], `seed ${seed} key ${key} step ${s}`).toEqual(flat(gens));
        expect(holes(ki)).toBe(0);
        if (small) expect([...old], "a small keyIndex is replaced, never changed").toEqual(before);
        else expect(ki, "a large keyIndex grows in place").toBe(old);
        const cur = gens[gens.length - 1]!;
        expect(kiAlive(ki)).toBe(cur.revs.length > 0);
        if (cur.revs.length > 0) {
          expect(kiCreated(ki)).toBe(cur.created);
          expect(kiVersion(ki)).toBe(cur.ver);
        }
      }
    }
  });

  it("compacts into an array with no holes that answers every read at or above the compaction as before", () => {
    const seed = seedFor("key_index.compact");
    const rnd = mulberry32(seed);
    for (let key = 0; key < 200; key++) {
      let main = 2;
      let ki = kiNew(packRev(main, 0));
      const steps = 1 + Math.floor(rnd() * 50);
      for (let s = 0; s < steps; s++) {
        main++;
        ki = rnd() < 0.15 ? (kiTombstone(ki, packRev(main, 0)) ?? kiPut(ki, packRev(main, 0))) : kiPut(ki, packRev(main, 0));
      }
      const atRev = 2 + Math.floor(rnd() * (main - 1));
      const removed: number[] = [];
      const out = kiCompact(ki, atRev, (r) => removed.push(r));
      if (out === null) {
        for (let r = atRev; r <= main + 1; r++) expect(kiGet(ki, r), `seed ${seed} key ${key} at ${r}`).toBe(-1);
        continue;
      }
      expect(holes(out)).toBe(0);
      for (let r = atRev; r <= main + 1; r++) expect(kiGet(out, r), `seed ${seed} key ${key} at ${r}`).toBe(kiGet(ki, r));
      for (const r of removed) expect(revMain(r)).toBeLessThanOrEqual(atRev);
    }
  });
});
