/**
 * The permission intervals (src/auth/range_perm_cache.ts): etcd's key, prefix and from-key forms,
 * merging of touching intervals, coverage of a request's whole range, and a seeded comparison of
 * the merged check against a brute-force check over a small key alphabet.
 */
import { describe, expect, it } from "vitest";
import { isRangePermitted, keyInterval, mergePerms, MergedIntervals, RangePermCache } from "../../src/auth/range_perm_cache.js";
import { PermType, type KeyPermission } from "../../src/auth/types.js";
import { mulberry32 } from "../prng.js";
import { testSeed } from "../seed.js";

const b = (s: string) => Buffer.from(s);
const perm = (permType: PermType, key: string, rangeEnd = ""): KeyPermission => ({ permType, key: b(key), rangeEnd: rangeEnd === "\0" ? Buffer.from([0]) : b(rangeEnd) });

describe("key intervals", () => {
  it("a single key, a range, and from-key", () => {
    expect(keyInterval(b("k"), undefined)).toEqual({ begin: b("k"), end: Buffer.from("k\0") });
    expect(keyInterval(b("a"), b("c"))).toEqual({ begin: b("a"), end: b("c") });
    expect(keyInterval(b("a"), Buffer.from([0]))).toEqual({ begin: b("a"), end: null });
  });

  it("merges overlapping and touching intervals; empty ones vanish", () => {
    const m = new MergedIntervals([keyInterval(b("a"), b("c")), keyInterval(b("c"), b("e")), keyInterval(b("x"), b("w")), keyInterval(b("b"), b("d"))]);
    expect(m.size).toBe(1);
    expect(m.covers(keyInterval(b("a"), b("e")))).toBe(true);
    expect(m.covers(keyInterval(b("a"), b("f")))).toBe(false);
  });

  it("an empty or inverted request range is never covered", () => {
    const m = new MergedIntervals([keyInterval(b(""), Buffer.from([0]))]);
    expect(m.covers(keyInterval(b("b"), b("a")))).toBe(false);
    expect(m.covers(keyInterval(b("a"), b("z")))).toBe(true);
  });
});

describe("user permissions", () => {
  const p = mergePerms([perm(PermType.READWRITE, "app/", "app0"), perm(PermType.READ, "pub/", "\0"), perm(PermType.WRITE, "a1")]);

  it("prefix, from-key and single key, read and write apart", () => {
    expect(isRangePermitted(p, b("app/x"), undefined, PermType.WRITE)).toBe(true);
    expect(isRangePermitted(p, b("app/"), b("app0"), PermType.READ)).toBe(true);
    expect(isRangePermitted(p, b("zzz"), undefined, PermType.READ)).toBe(true);
    expect(isRangePermitted(p, b("pub/"), Buffer.from([0]), PermType.READ)).toBe(true);
    expect(isRangePermitted(p, b("zzz"), undefined, PermType.WRITE)).toBe(false);
    expect(isRangePermitted(p, b("a1"), undefined, PermType.WRITE)).toBe(true);
    expect(isRangePermitted(p, b("a1"), undefined, PermType.READ)).toBe(false);
    expect(isRangePermitted(p, b("a10"), undefined, PermType.WRITE)).toBe(false);
    expect(isRangePermitted(p, b("app/"), Buffer.from([0]), PermType.READ)).toBe(false);
    expect(isRangePermitted(p, b("app/x"), undefined, PermType.READWRITE)).toBe(true);
    expect(isRangePermitted(p, b("pub/x"), undefined, PermType.READWRITE)).toBe(false);
  });

  it("the cache computes once per user until cleared", () => {
    const cache = new RangePermCache();
    let computed = 0;
    const compute = () => {
      computed++;
      return p;
    };
    cache.get("u", compute);
    cache.get("u", compute);
    expect(computed).toBe(1);
    cache.clear();
    cache.get("u", compute);
    expect(computed).toBe(2);
  });

  it("agrees with a brute-force check over every key of a small alphabet (seeded)", () => {
    const seed = testSeed("range_perm_cache brute force");
    const rand = mulberry32(seed);
    const alphabet = ["", "a", "b", "c", "aa", "ab", "b\0", "ba", "bb", "c\0", "ca", "cc"];
    const keys = [...new Set(alphabet)].sort((x, y) => Buffer.compare(b(x), b(y)));
    const pick = () => alphabet[Math.floor(rand() * alphabet.length)]!;
    const inRange = (k: string, key: string, end: string | null) =>
      end === "" ? k === key : Buffer.compare(b(k), b(key)) >= 0 && (end === null || Buffer.compare(b(k), b(end)) < 0);
    for (let round = 0; round < 300; round++) {
      const perms = Array.from({ length: 1 + Math.floor(rand() * 4) }, () => {
        const form = rand();
        return form < 0.3 ? perm(PermType.READ, pick()) : form < 0.5 ? perm(PermType.READ, pick(), "\0") : perm(PermType.READ, pick(), pick() || "d");
      });
      const merged = mergePerms(perms);
      const [qk, qeRaw] = [pick(), rand() < 0.3 ? "" : rand() < 0.5 ? null : pick() || "d"];
      const qe = qeRaw;
      // A request range must be non-empty to be compared key by key; an empty one is never allowed.
      const covered = (k: string) => perms.some((pp) => inRange(k, pp.key.toString(), pp.rangeEnd.length === 1 && pp.rangeEnd[0] === 0 ? null : pp.rangeEnd.toString()));
      const requested = keys.filter((k) => inRange(k, qk, qe));
      const rangeEnd = qe === null ? Buffer.from([0]) : qe === "" ? undefined : b(qe);
      const got = isRangePermitted(merged, b(qk), rangeEnd, PermType.READ);
      if (qe !== null && qe !== "" && Buffer.compare(b(qk), b(qe)) >= 0) {
        expect(got, `seed ${seed} round ${round}`).toBe(false);
        continue;
      }
      // Brute force over a finite alphabet can only refute: a permitted range covers every sampled key in it.
      if (got) expect(requested.every(covered), `seed ${seed} round ${round}: ${qk}..${String(qe)} ${JSON.stringify(perms)}`).toBe(true);
      // A single key is decided exactly by the brute force.
      if (qe === "") expect(got, `seed ${seed} round ${round}: key ${qk}`).toBe(covered(qk));
    }
  });
});
