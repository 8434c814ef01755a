/**
 * A client snapshot is etcd's format read at one consistent point: writes committed while it
 * streams are not in it (the two passes of the stream see the same rows, or the stream would
 * throw), the event loop keeps turning, and the chunks are etcd's: at most 32 KiB, remaining_bytes
 * counting down to 0 at the end of the bbolt file, then the SHA-256 of the file.
 * (test/e2e/snapshot_restore.test.ts restores such a snapshot into real etcd.)
 */
import { createHash } from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { EtcdBackendReader, snapshotStatus, type SnapshotChunk } from "../../src/etcd_format/index.js";
import { streamBackendSnapshot } from "../../src/server/etcd_snapshot.js";
import { memberStores } from "./stores.js";

describe("client snapshot in etcd's format", () => {
  it("is the backend at the call, whatever is written while it streams", async () => {
    const { backend, kv, lessor, membership } = memberStores();
    membership.add({ id: 0x1234n, name: "n1", peerUrls: ["http://127.0.0.1:2380"], clientUrls: ["http://127.0.0.1:2379"], isLearner: false });
    lessor.grant(0x77, 60);
    const value = Buffer.alloc(300, 0x61);
    const KEYS = 3000;
    for (let i = 0; i < KEYS; i++) kv.put({ key: Buffer.from(`k/${i % 1000}`), value, lease: i === 5 ? 0x77 : 0 });
    kv.deleteRange({ key: Buffer.from("k/7") });
    const revision = kv.currentRevision();

    const chunks: SnapshotChunk[] = [];
    let turns = 0;
    const ticker = setInterval(() => turns++, 0);
    let written = 0;
    try {
      await streamBackendSnapshot(backend, async (chunk) => {
        chunks.push({ blob: Buffer.from(chunk.blob), remainingBytes: chunk.remainingBytes });
        // Writes land (and commit) while the snapshot streams; none of them may show up in it.
        if (written < 200) {
          kv.put({ key: Buffer.from(`late/${written++}`), value });
          backend.forceCommit();
        }
        await new Promise((r) => setImmediate(r));
      });
    } finally {
      clearInterval(ticker);
    }
    expect(written).toBeGreaterThan(10);
    expect(turns, "timer turns while streaming").toBeGreaterThan(0);

    const last = chunks[chunks.length - 1]!;
    const body = Buffer.concat(chunks.slice(0, -1).map((c) => c.blob));
    expect(last.remainingBytes).toBe(0);
    expect(Buffer.from(last.blob)).toEqual(createHash("sha256").update(body).digest());
    let sent = 0;
    for (const c of chunks.slice(0, -1)) {
      expect(c.blob.length).toBeGreaterThan(0);
      expect(c.blob.length).toBeLessThanOrEqual(32 * 1024);
      sent += c.blob.length;
      expect(c.remainingBytes).toBe(body.length - sent);
    }

    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "etcd-snapshot-"));
    try {
      const file = path.join(dir, "snap.db");
      fs.writeFileSync(file, Buffer.concat([body, last.blob]));
      const r = EtcdBackendReader.open(file, { requireSnapshotHash: true });
      try {
        expect(r.bolt.check()).toEqual([]);
        const revs = [...r.revisions()];
        // Every put and the tombstone, nothing written after the call.
        expect(revs.length).toBe(KEYS + 1);
        expect(revs[revs.length - 1]).toMatchObject({ main: revision, tombstone: true });
        expect(revs.every((x) => !Buffer.from(x.kv.key).toString().startsWith("late/"))).toBe(true);
        expect(revs.find((x) => Buffer.from(x.kv.key).toString() === "k/5")?.kv.lease).toBe(0x77n); // its first put (i = 5)
        expect([...r.leases()]).toEqual([{ id: 0x77n, ttl: 60, remainingTtl: 0 }]);
        expect(r.members()).toEqual([{ id: 0x1234n, name: "n1", peerURLs: ["http://127.0.0.1:2380"], clientURLs: ["http://127.0.0.1:2379"], isLearner: false }]);
        expect(r.consistentIndex()).toBe(BigInt(kv.consistentIndex()));
      } finally {
        r.close();
      }
      expect(snapshotStatus(file, { requireSnapshotHash: true })).toMatchObject({ revision, totalKey: KEYS + 1 + 5 }); // + consistent_index, the lease, the member, clusterVersion, authRevision
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it("carries lease ids over the whole int64 range exactly, in the lease bucket's key order (negative ids last)", async () => {
    const { backend, kv, lessor } = memberStores();
    const ids = [-(2n ** 63n), -5, 7, 9007199254740993n, 2n ** 63n - 1n];
    for (const id of ids) lessor.grant(id, 60);
    kv.put({ key: Buffer.from("big"), value: Buffer.from("v"), lease: 9007199254740993n });
    kv.put({ key: Buffer.from("neg"), value: Buffer.from("v"), lease: -5 });
    const chunks: Buffer[] = [];
    await streamBackendSnapshot(backend, (chunk) => {
      chunks.push(Buffer.from(chunk.blob));
      return Promise.resolve();
    });
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "etcd-snapshot-"));
    try {
      const file = path.join(dir, "snap.db");
      fs.writeFileSync(file, Buffer.concat(chunks));
      const r = EtcdBackendReader.open(file, { requireSnapshotHash: true });
      try {
        expect(r.bolt.check()).toEqual([]);
        // The bucket's order is the 8 big-endian bytes of the id: 0 and up, then the negative ids.
        expect([...r.leases()].map((l) => l.id)).toEqual([7n, 9007199254740993n, 2n ** 63n - 1n, -(2n ** 63n), -5n]);
        expect([...r.revisions()].map((x) => [Buffer.from(x.kv.key).toString(), x.kv.lease])).toEqual([
          ["big", 9007199254740993n],
          ["neg", -5n],
        ]);
      } finally {
        r.close();
      }
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
