/**
 * Incremental snapshots (issue 19): the delta format and the install path, on two members' stores
 * in temp backends (leader and follower, fed the same entries, then the leader alone more):
 * - every flipped byte of a delta file, and every truncation, is refused;
 * - a delta installed on the follower leaves it equal to the leader (revision, compaction,
 *   consistent index, leases, HashKV and the whole-backend hash);
 * - a delta whose install fails half-way leaves nothing applied (one transaction), and a crash
 *   after staging recovers by applying the staged delta at start, once (idempotent);
 * - fallback to the full image when the leader compacted past the follower's revision, when the
 *   delta is not clearly smaller, and for the same base again after a refusal.
 */
import fs from "node:fs";
import { readFile, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { Backend } from "../../src/backend/backend.js";
import { Lessor } from "../../src/lease/lessor.js";
import { KvStore } from "../../src/mvcc/kvstore.js";
import { type Message, MessageType } from "../../src/raft/types.js";
import { Alarms } from "../../src/server/alarms.js";
import { Membership } from "../../src/server/membership.js";
import { DeltaBaseMismatchError, PAGE_ROWS } from "../../src/server/snapshot_delta.js";
import { DeltaFormatError, DeltaWriter, verifyDelta, type DeltaHeader } from "../../src/server/snapshot_delta_format.js";
import { Snapshots } from "../../src/server/snapshots.js";
import type { SnapshotBody } from "../../src/server/transport/snapshot_body.js";

const enc = new TextEncoder();
const logger = pino({ level: "silent" });
const CONF = { voters: [1n, 2n], learners: [], votersOutgoing: [], learnersNext: [], autoLeave: false };

interface Member {
  dir: string;
  backend: Backend;
  kv: KvStore;
  lessor: Lessor;
  snapshots: Snapshots;
  close(): void;
}

const dirs: string[] = [];
const opened: Member[] = [];
afterEach(() => {
  for (const m of opened.splice(0)) m.close();
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

function openMember(dir?: string): Member {
  const d = dir ?? fs.mkdtempSync(path.join(os.tmpdir(), "delta-"));
  if (dir === undefined) dirs.push(d);
  const snapDir = path.join(d, "snap");
  fs.mkdirSync(snapDir, { recursive: true });
  const backend = Backend.open(path.join(snapDir, "db"));
  const lessor = new Lessor({ backend, now: () => 0, minLeaseTtlSec: 1 });
  const kv = KvStore.open({ backend, leases: lessor, compactionSleepMs: 0 });
  lessor.setRangeDeleter(kv);
  new Alarms(backend);
  new Membership(backend, 0x99n);
  const snapshots = new Snapshots({
    backend,
    snapDir,
    storage: { snapshotAt: (index) => Promise.resolve({ metadata: { index, term: 2, confState: CONF }, data: new Uint8Array(0) }) },
    consistentIndex: () => kv.consistentIndex(),
    logger,
    delta: { base: () => kv.deltaBase(), keep: (rev) => kv.index.keep(rev), hashAt: (rev, c) => kv.hashAtCompaction(rev, c, PAGE_ROWS) },
  });
  let closed = false;
  const m: Member = {
    dir: d,
    backend,
    kv,
    lessor,
    snapshots,
    close: () => {
      if (closed) return;
      closed = true;
      kv.close();
      backend.close();
    },
  };
  opened.push(m);
  return m;
}

/** Entries applied as raft would: index by index. */
class Feed {
  index = 0;
  put(ms: Member[], key: string, value: string | Buffer, lease = 0): void {
    this.index++;
    for (const m of ms) m.kv.apply(this.index, 2, { put: { key: enc.encode(key), value: typeof value === "string" ? enc.encode(value) : value, lease } });
  }
  del(ms: Member[], key: string): void {
    this.index++;
    for (const m of ms) m.kv.apply(this.index, 2, { deleteRange: { key: enc.encode(key) } });
  }
  async compact(ms: Member[], rev: number): Promise<void> {
    this.index++;
    for (const m of ms) m.kv.apply(this.index, 2, { compaction: { revision: rev } });
    for (const m of ms) await m.kv.compactionDone();
  }
  grant(ms: Member[], id: number, ttl: number): void {
    this.index++;
    for (const m of ms) {
      m.kv.markApplied(this.index, 2);
      m.lessor.grant(id, ttl);
    }
  }
}

function msnap(index: number): Message {
  return {
    type: MessageType.MsgSnap,
    to: 2n,
    from: 1n,
    term: 2,
    logTerm: 0,
    index: 0,
    commit: 0,
    reject: false,
    rejectHint: 0,
    entries: [],
    context: new Uint8Array(0),
    snapshot: { metadata: { index, term: 2, confState: CONF }, data: new Uint8Array(0) },
  };
}

/** The body's bytes through the follower's sink (as the transport would), committed: the MsgSnap raft gets. */
async function deliver(to: Member, m: Message, body: SnapshotBody): Promise<Message> {
  const sink = await to.snapshots.receive(1n, m, body.sizeBytes);
  const buf = Buffer.alloc(64 * 1024);
  try {
    for (let at = 0; at < body.sizeBytes; ) {
      const n = await body.read(buf.subarray(0, Math.min(buf.byteLength, body.sizeBytes - at)), at);
      await sink.write(Buffer.from(buf.subarray(0, n)));
      at += n;
    }
    return await sink.commit();
  } catch (e) {
    await sink.abort();
    throw e;
  } finally {
    await body.release();
  }
}

async function expectEqual(leader: Member, follower: Member): Promise<void> {
  await leader.kv.compactionDone();
  await follower.kv.compactionDone();
  expect(follower.kv.currentRevision()).toBe(leader.kv.currentRevision());
  expect(follower.kv.compactRevision()).toBe(leader.kv.compactRevision());
  expect(follower.kv.consistentIndex()).toBe(leader.kv.consistentIndex());
  expect(follower.lessor.leases().sort()).toEqual(leader.lessor.leases().sort());
  expect(follower.kv.hashKV(0)).toEqual(leader.kv.hashKV(0));
  expect(follower.kv.hash().hash).toBe(leader.kv.hash().hash);
  const range = (m: Member) => m.kv.range({ key: enc.encode("\0"), rangeEnd: enc.encode("\0") }).kvs.map((kv) => [Buffer.from(kv.key).toString(), Buffer.from(kv.value).toString().length, kv.modRevision, kv.version, String(kv.lease)]);
  expect(range(follower)).toEqual(range(leader));
}

/** A shared history of `n` puts (big values, some leased), then the follower stops hearing. */
function sharedHistory(feed: Feed, ms: Member[], n: number): void {
  feed.grant(ms, 7, 100);
  for (let i = 0; i < n; i++) feed.put(ms, `big/${i}`, Buffer.alloc(16 * 1024, i), i % 5 === 0 ? 7 : 0);
  feed.del(ms, "big/3");
}

describe("delta format", () => {
  it("every flipped byte and every truncation of a delta file is refused", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "delta-format-"));
    dirs.push(dir);
    const file = path.join(dir, "d");
    const header: DeltaHeader = {
      version: 1,
      base: { consistentIndex: 5, revision: 4, maxRev: 4 * 2 ** 20, compactRevision: -1, hash: 123, hashCompactRevision: -1 },
      target: { consistentIndex: 9, term: 2, revision: 8, compactRevision: 3 },
    };
    const w = await DeltaWriter.create(file, header);
    await w.table({ name: "kv", columns: ["rev", "key", "value"], mode: "append" });
    await w.row([5n * 2n ** 20n, Buffer.from("k"), Buffer.from("value")]);
    await w.row([6n * 2n ** 20n, Buffer.from("k2"), null]);
    await w.table({ name: "meta", columns: ["name", "value"], mode: "merge" });
    await w.row(["consistent_index", 9n]);
    await w.row(["x", 1.5]);
    await w.finish();
    expect(await verifyDelta(file)).toEqual(header);
    const good = await readFile(file);
    let refused = 0;
    for (let i = 0; i < good.byteLength; i++) {
      for (const flip of [0x01, 0x80]) {
        const bad = Buffer.from(good);
        bad[i]! ^= flip;
        await writeFile(file, bad);
        await expect(verifyDelta(file), `byte ${i} ^ ${flip}`).rejects.toThrow(DeltaFormatError);
        refused++;
      }
    }
    for (const len of [0, 4, 8, 20, good.byteLength - 5, good.byteLength - 4, good.byteLength - 1]) {
      await writeFile(file, good.subarray(0, len));
      await expect(verifyDelta(file), `truncated to ${len}`).rejects.toThrow(DeltaFormatError);
    }
    await writeFile(file, Buffer.concat([good, Buffer.from([0])]));
    await expect(verifyDelta(file), "a byte appended").rejects.toThrow(DeltaFormatError);
    expect(refused).toBe(good.byteLength * 2);
  });
});

describe("incremental snapshot install", () => {
  it("brings the follower to the leader's state: rows, deletions, compaction, leases", async () => {
    const leader = openMember();
    const follower = openMember();
    const feed = new Feed();
    sharedHistory(feed, [leader, follower], 200);
    await feed.compact([leader, follower], 50);
    const base = follower.kv.deltaBase();
    // Only the leader goes on: puts, overwrites, a deletion, a lease, a compaction past the follower's compaction but not its revision.
    for (let i = 0; i < 20; i++) feed.put([leader], `new/${i}`, `v${i}`);
    feed.put([leader], "big/1", "overwritten");
    feed.del([leader], "big/2");
    feed.grant([leader], 9, 50);
    feed.put([leader], "leased", "x", 9);
    await feed.compact([leader], base.revision);
    feed.put([leader], "after", "compaction");

    const { message, body } = await leader.snapshots.image(msnap(feed.index - 1), base);
    expect(body.kind).toEqual({ incremental: true, baseRevision: base.revision });
    expect(body.sizeBytes).toBeLessThan(20_000); // the image is > 3 MiB
    const got = await deliver(follower, message, body);
    const staged = await follower.snapshots.stage(got.snapshot!);
    expect(fs.readdirSync(path.join(follower.dir, "snap")).filter((f) => f.endsWith(".snap.delta"))).toHaveLength(1);
    const ci = await follower.snapshots.install(staged.metadata.index);
    expect(ci).toBe(feed.index);
    await expectEqual(leader, follower);
    // Nothing left behind, and the follower keeps applying.
    expect(fs.readdirSync(path.join(follower.dir, "snap")).filter((f) => f !== "db" && !f.startsWith("db-"))).toEqual([]);
    feed.put([leader, follower], "next", "one");
    await expectEqual(leader, follower);
  });

  it("an install that fails half-way applies nothing; a crash after staging recovers at start, once", async () => {
    const leader = openMember();
    const follower = openMember();
    const feed = new Feed();
    sharedHistory(feed, [leader, follower], 100);
    const base = follower.kv.deltaBase();
    const before = { hash: follower.kv.hash().hash, ci: follower.kv.consistentIndex() };
    for (let i = 0; i < 3000; i++) feed.put([leader], `n/${i}`, `v${i}`.repeat(50)); // several pages
    const index = feed.index;
    const { message, body } = await leader.snapshots.image(msnap(index), base);
    expect(body.kind?.incremental).toBe(true);
    const got = await deliver(follower, message, body);
    await follower.snapshots.stage(got.snapshot!);
    const staged = path.join(follower.dir, "snap", `${index.toString(16).padStart(16, "0")}.snap.delta`);
    const good = await readFile(staged);
    // A byte of the last page damaged on disk: the rows before it were written, then the checksum fails.
    const bad = Buffer.from(good);
    bad[good.byteLength - 40]! ^= 0xff;
    await writeFile(staged, bad);
    await expect(follower.snapshots.install(index)).rejects.toThrow();
    expect(follower.kv.consistentIndex()).toBe(before.ci);
    expect(follower.kv.hash().hash).toBe(before.hash);
    expect(follower.kv.range({ key: enc.encode("n/0") }).kvs).toHaveLength(0);
    await writeFile(staged, good);

    // A crash (power cut) before the install: the member restarts behind the snapshot and applies the staged delta.
    follower.kv.crashForTest();
    follower.close();
    const again = openMember(follower.dir);
    expect(again.kv.consistentIndex()).toBe(before.ci);
    const snap = { metadata: { index, term: 2, confState: CONF }, data: new Uint8Array(0) };
    await again.snapshots.recoverAtStart(snap);
    await expectEqual(leader, again);
    // And again at the next start: the backend holds the snapshot now, nothing is applied twice.
    again.close();
    const third = openMember(follower.dir);
    await third.snapshots.recoverAtStart(snap);
    await expectEqual(leader, third);
    expect(fs.existsSync(staged)).toBe(false);
  });

  // The stalls are printed, not asserted: on this 2-core machine under the suite's load (load 11-17
  // measured) a process is descheduled for hundreds of ms, whatever the code does; what is
  // asserted is the 10 MiB delta's result.
  it("writes, receives and installs a 10 MiB delta (the longest event-loop stall of each step printed)", { timeout: 120_000 }, async () => {
    const leader = openMember();
    const follower = openMember();
    const feed = new Feed();
    const big = Buffer.alloc(64 * 1024, 7);
    for (let i = 0; i < 600; i++) feed.put([leader, follower], `big/${i}`, big); // ~40 MiB
    const base = follower.kv.deltaBase();
    const small = Buffer.alloc(1024, 1);
    for (let i = 0; i < 10_000; i++) feed.put([leader], `n/${i}`, small);
    leader.backend.forceCommit();
    follower.backend.forceCommit();
    // Measured against the machine itself (as install_rebuild.test.ts): the same base hashed synchronously.
    const syncStarted = performance.now();
    leader.kv.hashKV(base.revision);
    const syncMs = performance.now() - syncStarted;

    // The longest stretch without a turn of the event loop, over the whole catch-up.
    let longestMs = 0;
    let last = performance.now();
    const timer = setInterval(() => {
      const now = performance.now();
      longestMs = Math.max(longestMs, now - last);
      last = now;
    }, 1);
    const steps: Record<string, number> = {};
    const step = async <T>(name: string, f: () => Promise<T>): Promise<T> => {
      const before = longestMs;
      longestMs = 0;
      last = performance.now();
      try {
        return await f();
      } finally {
        steps[name] = Number(longestMs.toFixed(1));
        longestMs = Math.max(longestMs, before);
      }
    };
    try {
      const { message, body } = await step("write", () => leader.snapshots.image(msnap(feed.index), base));
      expect(body.kind?.incremental).toBe(true);
      const got = await step("receive", () => deliver(follower, message, body));
      const staged = await step("stage", () => follower.snapshots.stage(got.snapshot!));
      await step("install", () => follower.snapshots.install(staged.metadata.index));
    } finally {
      clearInterval(timer);
    }
    console.log(`[snapshot delta] longest event-loop stall per step (ms): ${JSON.stringify(steps)}; the base hashed synchronously: ${syncMs.toFixed(1)} ms`);
    await expectEqual(leader, follower);
    expect(follower.kv.range({ key: enc.encode("n/"), rangeEnd: enc.encode("n0"), countOnly: true }).count).toBe(10_000);
  });

  it("falls back to the full image: compacted past the follower, not clearly smaller, and after a refused delta", async () => {
    const leader = openMember();
    const follower = openMember();
    const feed = new Feed();
    sharedHistory(feed, [leader, follower], 100);
    const base = follower.kv.deltaBase();
    for (let i = 0; i < 10; i++) feed.put([leader], `n/${i}`, "v");

    // A delta refused on arrival (the follower moved on since it answered its base): the same base again gets the full image.
    feed.put([follower], "diverged", "only here"); // stands in for an entry the follower applied meanwhile
    const first = await leader.snapshots.image(msnap(feed.index), base);
    expect(first.body.kind?.incremental).toBe(true);
    await expect(deliver(follower, first.message, first.body)).rejects.toThrow(DeltaBaseMismatchError);
    expect(fs.readdirSync(path.join(follower.dir, "snap")).filter((f) => f.startsWith("incoming-"))).toEqual([]);
    const retry = await leader.snapshots.image(msnap(feed.index), base);
    expect(retry.body.kind?.incremental).toBe(false);
    await retry.body.release();

    // A base that was not refused still gets a delta; once the leader compacts past it, the full image.
    const other = { ...base, consistentIndex: base.consistentIndex - 1 };
    const ok = await leader.snapshots.image(msnap(feed.index), other);
    expect(ok.body.kind?.incremental).toBe(true);
    await ok.body.release();
    await feed.compact([leader], base.revision + 5);
    const compacted = await leader.snapshots.image(msnap(feed.index), { ...base, consistentIndex: base.consistentIndex - 2 });
    expect(compacted.body.kind?.incremental).toBe(false);
    await compacted.body.release();

    // A follower with nothing (a new member): the changes are the whole store, not clearly smaller.
    const empty = openMember();
    const full = await leader.snapshots.image(msnap(feed.index), empty.kv.deltaBase());
    expect(full.body.kind?.incremental).toBe(false);
    await full.body.release();
  });
});
