/** Shared helpers of the WAL tests: temp dirs, deterministic entries, a seeded PRNG. */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { EntryType, type Entry } from "../../src/raft/types.js";
import { mulberry32 } from "../prng.js";

export function makeTmpDir(prefix: string): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), `etcetera-${prefix}-`));
}

export function removeDir(dir: string): void {
  fs.rmSync(dir, { recursive: true, force: true });
}

/** Data derived from (index, term) so that a reader can check an entry is intact and not invented. */
export function entryData(index: number, term: number, size: number): Uint8Array {
  const d = new Uint8Array(size);
  let x = (index * 2654435761 + term * 40503) >>> 0;
  for (let i = 0; i < size; i++) {
    x = (x * 1103515245 + 12345) >>> 0;
    d[i] = x >>> 24;
  }
  return d;
}

export function makeEntry(index: number, term: number, size = 32): Entry {
  return { index, term, type: EntryType.Normal, data: entryData(index, term, size) };
}

export function makeEntries(from: number, to: number, term: number, size = 32): Entry[] {
  const out: Entry[] = [];
  for (let i = from; i <= to; i++) out.push(makeEntry(i, term, size));
  return out;
}

export function isIntact(e: Entry): boolean {
  const want = entryData(e.index, e.term, e.data.length);
  return Buffer.from(want).equals(Buffer.from(e.data));
}

/** mulberry32 (test/prng.ts). */
export const prng = mulberry32;

/** The seed of a randomized test (test/seed.ts). */
export { testSeed } from "../seed.js";

export function walFiles(dir: string): string[] {
  return fs.readdirSync(dir).filter((f) => f.endsWith(".wal")).sort();
}
