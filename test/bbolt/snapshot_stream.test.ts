/**
 * The snapshot stream (what Maintenance.Snapshot will send): etcd's chunking and trailer, the
 * same bytes as the file writer, bounded by the consumer's pace, and never holding the event loop.
 */
import { createHash } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { BoltWriterError } from "../../src/bbolt/index.js";
import { EtcdBackendReader, streamEtcdSnapshot, type EtcdBackendContent, type EtcdRevisionRecord, type SnapshotChunk } from "../../src/etcd_format/index.js";

const dir = mkdtempSync(join(tmpdir(), "etcetera-bbolt-stream-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function records(n: number, valueBytes: (i: number) => number): EtcdRevisionRecord[] {
  const out: EtcdRevisionRecord[] = [];
  for (let i = 0; i < n; i++) {
    const key = Buffer.from(`key/${i % 1000}`);
    out.push({ main: i + 2, sub: 0, tombstone: false, kv: { key, createRevision: i + 2, modRevision: i + 2, version: 1, value: Buffer.alloc(valueBytes(i), i & 0xff), lease: 0n } });
  }
  return out;
}

function content(revs: EtcdRevisionRecord[]): EtcdBackendContent {
  return { revisions: revs, leases: [{ id: 0x694d7b1a2c5e3f04n, ttl: 100, remainingTtl: 0 }], consistentIndex: 42n };
}

describe("etcd snapshot stream", () => {
  it("sends etcd's chunks: blobs of at most 32 KiB with the bytes still to come, then the SHA-256 of all of them", async () => {
    const revs = records(5000, (i) => (i % 500 === 0 ? 100_000 : 50));
    const chunks: SnapshotChunk[] = [];
    const res = await streamEtcdSnapshot(() => content(revs), (c) => void chunks.push({ blob: Buffer.from(c.blob), remainingBytes: c.remainingBytes }));
    const data = chunks.slice(0, -1);
    const last = chunks[chunks.length - 1]!;
    expect(data.every((c) => c.blob.length > 0 && c.blob.length <= 32 * 1024)).toBe(true);
    let remaining = res.sizeBytes;
    for (const c of data) {
      remaining -= c.blob.length;
      expect(c.remainingBytes).toBe(remaining);
    }
    expect(remaining).toBe(0);
    const body = Buffer.concat(data.map((c) => c.blob));
    expect(last).toEqual({ blob: createHash("sha256").update(body).digest(), remainingBytes: 0 });
    expect(res.revision).toBe(5001);

    const file = join(dir, "streamed.db");
    writeFileSync(file, Buffer.concat(chunks.map((c) => c.blob)));
    const r = EtcdBackendReader.open(file, { requireSnapshotHash: true });
    try {
      expect(r.bolt.check()).toEqual([]);
      const back = [...r.revisions()];
      expect(back.length).toBe(revs.length);
      expect(back.every((x, i) => x.main === revs[i]!.main && Buffer.compare(x.kv.value, revs[i]!.kv.value) === 0)).toBe(true);
      expect([...r.leases()].map((l) => l.id)).toEqual([0x694d7b1a2c5e3f04n]);
    } finally {
      r.close();
    }
  });

  it("refuses to finish when the content changed between its two passes", async () => {
    let calls = 0;
    const grow = (): EtcdBackendContent => content(records(2000 + 1000 * calls++, () => 40));
    await expect(streamEtcdSnapshot(grow, () => undefined)).rejects.toThrow(BoltWriterError);
  });

  it("waits for a slow consumer and lets the event loop run while it streams", async () => {
    const revs = records(60_000, () => 100);
    let ticks = 0;
    const timer = setInterval(() => ticks++, 1);
    let inFlight = 0;
    let maxAhead = 0;
    let produced = 0;
    let consumed = 0;
    try {
      await streamEtcdSnapshot(
        () => content(revs),
        async (c) => {
          produced += c.blob.length;
          inFlight++;
          await new Promise((resolve) => setImmediate(resolve));
          consumed += c.blob.length;
          maxAhead = Math.max(maxAhead, produced - consumed);
          inFlight--;
        },
        { queueBytesMax: 256 * 1024 },
      );
    } finally {
      clearInterval(timer);
    }
    expect(inFlight).toBe(0);
    // One chunk at a time: the stream awaits each send before the next.
    expect(maxAhead).toBeLessThanOrEqual(32 * 1024);
    expect(ticks).toBeGreaterThan(5);
  });
});
