/**
 * Write-then-read round trips of arbitrary databases: nested and inline buckets, empty buckets,
 * large values on overflow pages, many keys on multi-level branch pages, every page size.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { BoltReader, BoltWriter, BoltWriterError, BufferPageSink, BufferPageSource, type PageSource } from "../../src/bbolt/index.js";
import { mulberry32 } from "../prng.js";
import { testSeed } from "../seed.js";
import { buildModel, describeModel, modelToFile, readModel } from "./model.js";


const name = fc.uint8Array({ minLength: 1, maxLength: 6 });
const value = fc.oneof(
  { weight: 8, arbitrary: fc.uint8Array({ maxLength: 60 }) },
  { weight: 2, arbitrary: fc.uint8Array({ maxLength: 700 }) },
  // Bigger than a page: overflow pages.
  { weight: 1, arbitrary: fc.tuple(fc.integer({ min: 1000, max: 30_000 }), fc.integer({ min: 0, max: 255 })).map(([n, b]) => Uint8Array.from({ length: n }, (_, i) => (b + i * 7) & 0xff)) },
);
const item = fc.record({ path: fc.array(fc.constantFrom(...["a", "b", "c", "key"].map((s) => Buffer.from(s))), { minLength: 1, maxLength: 3 }), key: name, value });

describe("bbolt write then read", () => {
  it("returns every bucket, key and value written (arbitrary databases, every page size)", () => {
    const seed = testSeed("bbolt roundtrip: arbitrary databases");
    let keysChecked = 0;
    fc.assert(
      fc.property(fc.array(item, { maxLength: 300, size: "max" }), fc.constantFrom(512, 1024, 4096, 16384), fc.constantFrom(1, 0.5), (items, pageSize, fill) => {
        const model = buildModel(items);
        const file = modelToFile(model, { pageSize, fillBytes: Math.floor(pageSize * fill) });
        const r = BoltReader.fromBuffer(file, "roundtrip.db");
        expect(r.pageSize).toBe(pageSize);
        expect(r.check()).toEqual([]);
        const lines = describeModel(model);
        expect(describeModel(readModel(r))).toEqual(lines);
        keysChecked += lines.length;
        // Point lookups descend the branch pages instead of iterating.
        for (const it of items.slice(0, 20)) {
          const b = r.bucket(...it.path);
          if (!b) continue;
          const got = r.get(b, it.key);
          const want = readModel(r, b).get(Buffer.from(it.key).toString("hex"));
          if (want instanceof Uint8Array) expect(got && Buffer.from(got).equals(want)).toBe(true);
        }
      }),
      { seed, numRuns: 60 },
    );
    expect(keysChecked).toBeGreaterThan(1000);
  });

  it("builds multi-level branch pages for many keys and finds each of them", () => {
    const seed = testSeed("bbolt roundtrip: many keys");
    const rand = mulberry32(seed);
    for (const pageSize of [512, 4096]) {
      const n = pageSize === 512 ? 20_000 : 60_000;
      const sink = new BufferPageSink();
      const w = new BoltWriter(sink, { pageSize });
      w.beginBucket("many");
      const keys: Buffer[] = [];
      for (let i = 0; i < n; i++) {
        const k = Buffer.alloc(12);
        k.writeUInt32BE(i, 0);
        k.writeUInt32BE(Math.floor(rand() * 2 ** 32), 4);
        keys.push(k);
        w.put(k, k.subarray(0, 4 + (i % 9)));
      }
      w.endBucket();
      w.finish();
      const r = BoltReader.fromBuffer(sink.bytes(), "many.db");
      expect(r.check()).toEqual([]);
      const b = r.bucket("many")!;
      const stats = r.treeStats(b);
      expect(stats.keys).toBe(n);
      expect(stats.depth).toBeGreaterThanOrEqual(3);
      let i = 0;
      for (const e of r.entries(b)) {
        expect(Buffer.from(e.key).equals(keys[i]!)).toBe(true);
        i++;
      }
      expect(i).toBe(n);
      for (let j = 0; j < 500; j++) {
        const k = keys[Math.floor(rand() * n)]!;
        expect(Buffer.from(r.get(b, k)!).equals(k.subarray(0, 4 + (k.readUInt32BE(0) % 9)))).toBe(true);
      }
      const absent = Buffer.alloc(12, 0xff);
      expect(r.get(b, absent)).toBeUndefined();
    }
  });

  it("stores small buckets inline and empty buckets as empty roots, as bbolt does", () => {
    const sink = new BufferPageSink();
    const w = new BoltWriter(sink);
    w.beginBucket("empty");
    w.endBucket();
    w.beginBucket("small");
    w.put("k", "v");
    w.endBucket();
    w.beginBucket("z-big");
    for (let i = 0; i < 100; i++) w.put(`k${String(i).padStart(3, "0")}`, "x".repeat(20));
    w.endBucket();
    const res = w.finish();
    const r = BoltReader.fromBuffer(sink.bytes());
    expect(r.bucket("empty")!.root).toBe(0);
    expect(r.bucket("small")!.root).toBe(0);
    expect(r.bucket("z-big")!.root).toBeGreaterThan(1);
    expect([...r.entries(r.bucket("empty")!)]).toEqual([]);
    expect(Buffer.from(r.get(r.bucket("small")!, "k")!).toString()).toBe("v");
    // Pages: 2 metas, the big bucket's leaf pages, the root leaf, the freelist: nothing unaccounted.
    expect(r.check()).toEqual([]);
    expect(res.sizeBytes).toBe(Number(res.meta.pgid) * 4096);
  });

  it("refuses input bbolt could not store: keys out of order, empty or oversized keys, values at the root", () => {
    const w = new BoltWriter(new BufferPageSink());
    expect(() => w.put("k", "v")).toThrow(BoltWriterError);
    w.beginBucket("b");
    w.put("b", "1");
    expect(() => w.put("a", "2")).toThrow(/keys must ascend/);
    expect(() => w.put("b", "2")).toThrow(/keys must ascend/);
    expect(() => w.put("", "2")).toThrow(/empty key/);
    expect(() => w.put(new Uint8Array(32769).fill(0x7a), "2")).toThrow(/exceeds/);
    expect(() => w.finish()).toThrow(/still open/);
    w.endBucket();
    expect(() => w.beginBucket("a")).toThrow(/keys must ascend/);
  });
});

describe("bbolt reader memory", () => {
  it("reads pages on demand: a lookup reads one page per level, a full scan each page once", () => {
    const sink = new BufferPageSink();
    const w = new BoltWriter(sink, { pageSize: 4096 });
    w.beginBucket("b");
    for (let i = 0; i < 50_000; i++) w.put(Buffer.from(`k${String(i).padStart(6, "0")}`), Buffer.alloc(40, i & 0xff));
    w.endBucket();
    w.finish();
    const bytes = sink.bytes();
    let readBytes = 0;
    const inner = new BufferPageSource(bytes, "counted.db");
    const counted: PageSource = {
      name: inner.name,
      sizeBytes: inner.sizeBytes,
      read: (offset, length, pgid) => {
        readBytes += length;
        return inner.read(offset, length, pgid);
      },
      close: () => inner.close(),
    };
    const r = BoltReader.fromSource(counted);
    const b = r.bucket("b")!;
    const depth = r.treeStats(b).depth;
    readBytes = 0;
    expect(Buffer.from(r.get(b, "k031337")!).equals(Buffer.alloc(40, 31337 & 0xff))).toBe(true);
    // The root bucket's page, then one page per level of b.
    expect(readBytes).toBeLessThanOrEqual((depth + 1) * 4096);
    readBytes = 0;
    let n = 0;
    for (const _ of r.entries(b)) n++;
    expect(n).toBe(50_000);
    expect(readBytes).toBeLessThanOrEqual(bytes.length);
  });
});
