/**
 * The WAL header's table CRC against node:zlib's crc32 over a seeded run of ranges and seeds,
 * including the empty range and chained values, and its refusal of a range outside the buffer.
 */
import { crc32 } from "node:zlib";
import { describe, expect, it } from "vitest";
import { crc32Range } from "../../src/wal/crc32_range.js";
import { mulberry32 } from "../prng.js";
import { testSeed } from "../seed.js";

describe("crc32Range", () => {
  it("equals zlib's crc32 of the same bytes, continued from the same value", () => {
    const seed = testSeed("wal.crc32_range");
    const rnd = mulberry32(seed);
    const buf = Buffer.alloc(4096);
    for (let i = 0; i < buf.length; i++) buf[i] = Math.floor(rnd() * 256);
    for (let i = 0; i < 5_000; i++) {
      const start = Math.floor(rnd() * buf.length);
      const end = start + Math.floor(rnd() * Math.min(64, buf.length - start + 1));
      const value = i % 4 === 0 ? 0 : Math.floor(rnd() * 2 ** 32);
      expect(crc32Range(buf, start, end, value), `seed ${seed}, [${start}, ${end}) from ${value}`).toBe(crc32(buf.subarray(start, end), value));
    }
    // Chained: a range in two pieces is the range in one.
    expect(crc32Range(buf, 100, 112, crc32Range(buf, 0, 100))).toBe(crc32(buf.subarray(0, 112)));
  });

  it("refuses a range outside the buffer", () => {
    const buf = Buffer.alloc(16);
    expect(() => crc32Range(buf, 8, 17)).toThrow(/outside a buffer of 16 bytes/);
    expect(() => crc32Range(buf, 9, 8)).toThrow(/crc range/);
  });
});
