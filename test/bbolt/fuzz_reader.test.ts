/**
 * The reader on damaged files: truncated and bit-flipped copies of databases with nested, inline,
 * overflow and multi-level pages. Each is refused with a BoltFormatError that names the file and
 * a byte offset, or read consistently (the same result twice, keys in order); nothing else is
 * thrown and nothing hangs. (bbolt has no page checksums: a flipped bit inside a value reads as a
 * different value, as it does for bbolt itself; etcd's SHA-256 trailer covers snapshots.)
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { BoltFormatError, BoltReader } from "../../src/bbolt/index.js";
import { EtcdBackendReader, SnapshotHashError, writeEtcdBackend, writeEtcdSnapshot, type EtcdRevisionRecord } from "../../src/etcd_format/index.js";
import { mulberry32 } from "../prng.js";
import { testSeed } from "../seed.js";
import { damagedOutcome as outcomeOf, flipBits, readAll } from "./damage.js";
import { buildModel, modelToFile } from "./model.js";

const dir = mkdtempSync(join(tmpdir(), "etcetera-bbolt-fuzz-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function sampleFile(rand: () => number, pageSize: number): Uint8Array {
  const items = [];
  for (let i = 0; i < 1500; i++) {
    const path = [Buffer.from(["a", "b", "key", "nest"][Math.floor(rand() * 4)]!)];
    if (rand() < 0.3) path.push(Buffer.from(["x", "y"][Math.floor(rand() * 2)]!));
    const big = rand() < 0.01;
    const value = Buffer.alloc(big ? 3000 + Math.floor(rand() * 5000) : Math.floor(rand() * 40), Math.floor(rand() * 256));
    items.push({ path, key: Buffer.from(`k${Math.floor(rand() * 100000)}`), value });
  }
  return modelToFile(buildModel(items), { pageSize });
}

describe("bbolt reader on damaged files", () => {
  for (const pageSize of [1024, 4096]) {
    it(`refuses or reads consistently every truncated and bit-flipped file (page size ${pageSize})`, () => {
      const rand = mulberry32(testSeed(`bbolt fuzz: page size ${pageSize}`));
      const good = sampleFile(rand, pageSize);
      expect(outcomeOf(good)).toBe("read");
      const counts = { refused: 0, read: 0 };
      // Truncations: anywhere, and at page boundaries.
      for (let i = 0; i < 150; i++) {
        const at = i % 2 === 0 ? Math.floor(rand() * good.length) : Math.floor(rand() * (good.length / pageSize)) * pageSize;
        const o = outcomeOf(good.subarray(0, at));
        counts[o]++;
        // Nothing written by the writer is spare: every truncation loses pages the meta names.
        expect(o, `truncated at ${at}`).toBe("refused");
      }
      // Bit flips: anywhere, and concentrated in page headers and element tables.
      for (let i = 0; i < 400; i++) {
        counts[outcomeOf(flipBits(good, pageSize, rand, i % 2 === 1))]++;
      }
      console.log(`page size ${pageSize}: ${counts.refused} refused, ${counts.read} read consistently`);
      expect(counts.refused).toBeGreaterThan(150);
    });
  }

  it("refuses a file whose two meta pages are both damaged, naming both", () => {
    const good = sampleFile(mulberry32(testSeed("bbolt fuzz: both metas")), 4096);
    const bad = Uint8Array.from(good);
    bad[16 + 20]! ^= 1;
    bad[4096 + 16 + 20]! ^= 1;
    expect(() => BoltReader.fromBuffer(bad, "both.db")).toThrow(/both\.db.*no valid meta page.*page 0.*checksum.*page 1.*checksum/);
  });

  it("falls back to the other meta page when one is damaged, and reads the same database", () => {
    const good = sampleFile(mulberry32(testSeed("bbolt fuzz: one meta")), 4096);
    const want = readAll(good);
    for (const metaPage of [0, 1]) {
      const bad = Uint8Array.from(good);
      bad[metaPage * 4096 + 16 + 40]! ^= 0x10; // the high-water mark, under the checksum
      const r = BoltReader.fromBuffer(bad, "one.db");
      expect(r.metaPgid).toBe(1 - metaPage);
      expect(readAll(bad)).toBe(want);
    }
  });
});

describe("etcd backend reader on damaged files", () => {
  it("refuses every damaged snapshot by its SHA-256, and refuses or reads consistently every damaged db", async () => {
    const rand = mulberry32(testSeed("bbolt fuzz: etcd backend"));
    const records: EtcdRevisionRecord[] = [];
    for (let rev = 2; rev < 800; rev++) {
      const key = Buffer.from(`k${rev % 97}`);
      records.push({ main: rev, sub: 0, tombstone: false, kv: { key, createRevision: rev, modRevision: rev, version: 1, value: Buffer.alloc(rev % 50 === 0 ? 6000 : 30, 1), lease: rev % 5 === 0 ? 0x694d7b1a2c5e3f04n : 0n } });
    }
    const content = { revisions: records, leases: [{ id: 0x694d7b1a2c5e3f04n, ttl: 60, remainingTtl: 0 }], consistentIndex: 9n };
    const snap = join(dir, "snap.db");
    const db = join(dir, "db");
    await writeEtcdSnapshot(snap, content);
    await writeEtcdBackend(db, content);
    const { readFileSync } = await import("node:fs");
    const snapBytes = readFileSync(snap);
    const dbBytes = readFileSync(db);
    const readEverything = (path: string, isSnap: boolean): string => {
      const r = EtcdBackendReader.open(path, { requireSnapshotHash: isSnap });
      try {
        return JSON.stringify([[...r.revisions()].map((x) => [x.main, x.sub, x.tombstone, Buffer.from(x.kv.value).toString("hex"), x.kv.lease.toString()]), [...r.leases()].map((l) => l.id.toString()), r.consistentIndex().toString(), r.members().length, r.auth()?.revision.toString()]);
      } finally {
        r.close();
      }
    };
    const outcomes = { hash: 0, format: 0, read: 0 };
    for (let i = 0; i < 200; i++) {
      const isSnap = i % 2 === 0;
      const bad = Buffer.from(isSnap ? snapBytes : dbBytes);
      const off = Math.floor(rand() * (bad.length - (isSnap ? 32 : 0)));
      bad[off]! ^= 1 << Math.floor(rand() * 8);
      const path = join(dir, `bad-${i}`);
      const truncated = i % 5 === 4;
      writeFileSync(path, truncated ? bad.subarray(0, Math.floor(rand() * bad.length)) : bad);
      try {
        const a = readEverything(path, isSnap);
        expect(readEverything(path, isSnap)).toBe(a);
        outcomes.read++;
        // A snapshot is covered whole by its digest: no damaged one may be read.
        expect(isSnap, `snapshot damaged at ${off} (truncated: ${truncated}) was read`).toBe(false);
      } catch (err) {
        if (err instanceof SnapshotHashError) outcomes.hash++;
        else if (err instanceof BoltFormatError) outcomes.format++;
        else throw err;
        expect((err as Error).message).toContain(path);
      }
      rmSync(path);
    }
    console.log(`etcd backend fuzz: ${JSON.stringify(outcomes)}`);
    expect(outcomes.hash).toBeGreaterThan(80);
  });
});
