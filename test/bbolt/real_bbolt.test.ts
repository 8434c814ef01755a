/**
 * Against real bbolt (the 1.3 line etcd 3.4 links): it opens, checks (Tx.Check) and reads every
 * file our writer makes, nested and inline buckets included, and can go on writing to it; our
 * reader reads every file real bbolt writes (its 50%-filled splits, inline and nested buckets,
 * a freelist with ids) and bbolt's own modifications of ours.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BoltReader } from "../../src/bbolt/index.js";
import { mulberry32 } from "../prng.js";
import { testSeed } from "../seed.js";
import { damagedOutcome, flipBits } from "./damage.js";
import { buildModel, modelToFile } from "./model.js";
import { buildBboltTool, dumpWithOurReader, type ToolResult } from "./real_bbolt.js";

const dir = mkdtempSync(join(tmpdir(), "etcetera-real-bbolt-"));
let tool: (args: string[]) => Promise<ToolResult>;
beforeAll(async () => {
  tool = await buildBboltTool(dir);
}, 300_000);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A database with every shape: nested buckets three deep, inline and empty ones, overflow values, many keys. */
function sampleModel(rand: () => number): ReturnType<typeof buildModel> {
  const items = [];
  for (let i = 0; i < 6000; i++) {
    const path = [Buffer.from(["a", "b", "key", "nest"][Math.floor(rand() * 4)]!)];
    const depth = Math.floor(rand() * 3);
    for (let d = 0; d < depth; d++) path.push(Buffer.from(`n${Math.floor(rand() * 3)}`));
    const big = rand() < 0.01;
    const value = Uint8Array.from({ length: big ? 4000 + Math.floor(rand() * 30_000) : Math.floor(rand() * 60) }, () => Math.floor(rand() * 256));
    items.push({ path, key: Buffer.from(`k${Math.floor(rand() * 1_000_000)}`), value });
  }
  items.push({ path: [Buffer.from("tiny")], key: Buffer.from("only"), value: Buffer.from("inline") });
  return buildModel(items);
}

describe("real bbolt", () => {
  for (const pageSize of [4096, 16384]) {
    it(`opens, checks and reads every file our writer makes, then writes on to it (page size ${pageSize})`, async () => {
      const rand = mulberry32(testSeed(`real bbolt: our files, page size ${pageSize}`));
      const file = join(dir, `ours-${pageSize}.db`);
      writeFileSync(file, modelToFile(sampleModel(rand), { pageSize }));
      const ours = dumpWithOurReader(BoltReader.fromBuffer(readFileSync(file)));
      expect(ours.some((l) => l.startsWith("B ") && l.split("/").length >= 3)).toBe(true);
      const dumped = await tool(["dump", file]);
      expect(dumped.lines.filter((l) => l.startsWith("ERR"))).toEqual([]);
      expect(dumped.code).toBe(0);
      expect(dumped.lines).toEqual(ours);

      // bbolt splits, merges, frees and re-inlines our pages; the result is still a file both read alike.
      const mutated = await tool(["mutate", file, String(Math.floor(rand() * 1e9))]);
      expect(mutated.lines.filter((l) => l.startsWith("ERR"))).toEqual([]);
      const r = BoltReader.fromBuffer(readFileSync(file), file);
      expect(r.check()).toEqual([]);
      expect(r.freePages().length).toBeGreaterThan(0);
      expect(dumpWithOurReader(r)).toEqual(mutated.lines);
      expect(mutated.lines).not.toEqual(ours);
    });
  }

  it("writes files our reader reads completely: nested, inline and empty buckets, overflow values, a freelist with ids", async () => {
    const seed = testSeed("real bbolt: its files");
    const file = join(dir, "theirs.db");
    const made = await tool(["gen", file, String(seed)]);
    expect(made.lines.filter((l) => l.startsWith("ERR"))).toEqual([]);
    const r = BoltReader.fromBuffer(readFileSync(file), file);
    expect(r.check()).toEqual([]);
    expect(r.freePages().length).toBeGreaterThan(0);
    expect(r.treeStats(r.bucket("many")!).depth).toBeGreaterThanOrEqual(3);
    expect(r.bucket("a", "child1")!.root).toBe(0); // inline
    expect(r.bucket("a", "child3")!.root).toBeGreaterThan(1);
    expect(dumpWithOurReader(r)).toEqual(made.lines);

    // The reader fuzz on a (smaller) file real bbolt wrote: half-full pages, a freelist with ids.
    const small = join(dir, "theirs-small.db");
    expect((await tool(["gen", small, String(seed), "2000"])).code).toBe(0);
    const good = readFileSync(small);
    const inUse = BoltReader.fromBuffer(good).highWaterMark * 4096; // bbolt's file grows ahead of its pages
    const rand = mulberry32(seed);
    const counts = { refused: 0, read: 0 };
    for (let i = 0; i < 120; i++) counts[damagedOutcome(flipBits(good.subarray(0, inUse), 4096, rand, i % 2 === 1))]++;
    for (let i = 0; i < 20; i++) expect(damagedOutcome(good.subarray(0, Math.floor(rand() * inUse)))).toBe("refused");
    console.log(`real bbolt file, 120 bit flips: ${counts.refused} refused, ${counts.read} read consistently`);
    // A floor that shows the flips reach structure the reader checks. Real bbolt's layout of the same
    // content is not byte-for-byte repeatable (its page allocation varies run to run), so the count
    // moves with it: 18-21 of 120 were refused across CI runs at one seed. Every single outcome above
    // is still checked exactly (refused with file and offset, or read the same way twice).
    expect(counts.refused).toBeGreaterThanOrEqual(10);
  });
});
