/**
 * How a damaged bbolt file must come out of the reader: refused with a BoltFormatError naming the
 * file and a byte offset, or read completely and the same way twice. Nothing else.
 */
import { expect } from "vitest";
import { BoltFormatError, BoltReader } from "../../src/bbolt/index.js";
import { describeModel, readModel } from "./model.js";

const NAME = "fuzzed.db";

/** Everything a reader can be asked: open, check, every bucket and key. Returns a digest. */
export function readAll(bytes: Uint8Array): string {
  const r = BoltReader.fromBuffer(bytes, NAME);
  const problems = r.check();
  return JSON.stringify([problems, describeModel(readModel(r))]);
}

export type Outcome = "refused" | "read";

export function damagedOutcome(bytes: Uint8Array): Outcome {
  let first: string;
  try {
    first = readAll(bytes);
  } catch (err) {
    if (!(err instanceof BoltFormatError)) throw err;
    expect(err.message).toContain(NAME);
    expect(err.message).toMatch(/byte offset \d+/);
    return "refused";
  }
  expect(readAll(bytes)).toBe(first);
  return "read";
}

/** Flips 1-3 bits of a copy, half of the time inside page headers and element tables. */
export function flipBits(good: Uint8Array, pageSize: number, rand: () => number, nearHeaders: boolean): Uint8Array {
  const bad = Uint8Array.from(good);
  const flips = 1 + Math.floor(rand() * 3);
  for (let f = 0; f < flips; f++) {
    const page = Math.floor(rand() * (good.length / pageSize));
    const off = nearHeaders ? page * pageSize + Math.floor(rand() * 96) : Math.floor(rand() * good.length);
    bad[off]! ^= 1 << Math.floor(rand() * 8);
  }
  return bad;
}
