import { describe, expect, it } from "vitest";
import { loadMemberCodecs } from "../../src/pb/protos.js";
import { decodeRaftRequest, encodeRaftRequest } from "../../src/server/raft_request.js";
import { type WarmupCounts, warmUp, warmupEnabled } from "../../src/server/warmup.js";
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/**
 * What each path must have verified after `rounds` rounds. The scratch raft commits a batch of 8
 * proposals at a time (it throws unless all three voters apply each one), so the WAL holds at least
 * every entry and a hard state per batch, and each batch takes at least a MsgApp and a MsgAppResp
 * per follower. A loopback call counts only once its response decoded to what the stub answered.
 * Every committed request (a put, or a txn whose compare holds and whose success branch puts) is
 * applied to the scratch store at the next revision and reaches its watcher as one event; a
 * range runs every 16th round and counts only when it found its key.
 */
function expectCounts(counts: WarmupCounts, rounds: number, loopbackCalls: number): void {
  const batches = Math.ceil(rounds / 8);
  expect({ ...counts, walRecords: 0, peerMessages: 0 }).toEqual({
    protobuf: 10 * rounds,
    grpcFrames: rounds,
    hpackBlocks: rounds,
    walRecords: 0,
    peerMessages: 0,
    raftRequests: rounds,
    indexOps: 3 * rounds,
    loopbackCalls,
    storeApplied: rounds,
    watchEvents: rounds,
    storeRanges: Math.floor(rounds / 16),
  });
  expect(counts.walRecords).toBeGreaterThanOrEqual(rounds + batches);
  expect(counts.peerMessages).toBeGreaterThanOrEqual(4 * batches);
}

describe("warm-up", () => {
  it("round-trips every codec it warms, once per round", async () => {
    const r = await warmUp({ rounds: 100, budgetMs: 60_000, loopbackCalls: 50 });
    expect(r.budgetExceeded).toBe(false);
    expect(r.rounds).toBe(100);
    expectCounts(r.counts, 100, 50);
  });

  it("commits a last partial batch too", async () => {
    const r = await warmUp({ rounds: 13, budgetMs: 60_000, loopbackCalls: 13 });
    expectCounts(r.counts, 13, 13);
  });

  it("leaves nothing behind: no open socket, the process's codecs give the same bytes, a second run counts the same", async () => {
    const put = loadMemberCodecs().message<{ key: Buffer }, { key?: Uint8Array; value?: Uint8Array }>("etcdserverpb.PutRequest");
    const req = { ID: 7, put: { key: Buffer.from("k"), value: Buffer.from("v") } };
    const putBefore = put.encode({ key: Buffer.from("k"), value: Buffer.from("v") });
    const raftBefore = encodeRaftRequest(req);
    const sockets = () => process.getActiveResourcesInfo().filter((r) => r.startsWith("TCP")).length;
    const socketsBefore = sockets();
    // A temp dir of this test's own (other test files start members, whose warm-ups use the shared one).
    const ownTmp = mkdtempSync(join(tmpdir(), "warmup-test-"));
    const savedTmp = process.env.TMPDIR;
    process.env.TMPDIR = ownTmp;
    let first: Awaited<ReturnType<typeof warmUp>>;
    try {
      first = await warmUp({ rounds: 200, budgetMs: 60_000, loopbackCalls: 20 });
      // The scratch store ran in ownTmp (tmpdir() follows TMPDIR) and its directory is removed.
      expect(first.storeSkipped).toBeUndefined();
      expect(first.counts.storeApplied).toBe(200);
      expect(readdirSync(ownTmp)).toEqual([]);
    } finally {
      if (savedTmp === undefined) delete process.env.TMPDIR;
      else process.env.TMPDIR = savedTmp;
      rmSync(ownTmp, { recursive: true, force: true });
    }
    // The scratch gRPC server and its client session are closed: no listener or socket stays open.
    await new Promise((r) => setImmediate(r));
    expect(sockets()).toBe(socketsBefore);
    const second = await warmUp({ rounds: 200, budgetMs: 60_000, loopbackCalls: 20 });
    expect(second.counts).toEqual(first.counts);
    expect(put.encode({ key: Buffer.from("k"), value: Buffer.from("v") })).toEqual(putBefore);
    expect(encodeRaftRequest(req)).toEqual(raftBefore);
    expect(decodeRaftRequest(raftBefore).put?.key.toString()).toBe("k");
  });

  it("stops at its time budget with the rounds it did, all verified", async () => {
    // A 0 ms budget ends after the first slice (a few ms), far short of a billion rounds, and
    // leaves no time for loopback calls.
    const r = await warmUp({ rounds: 1e9, budgetMs: 0 });
    expect(r.budgetExceeded).toBe(true);
    expect(r.rounds).toBeGreaterThan(0);
    expect(r.rounds).toBeLessThan(1e9);
    expectCounts(r.counts, r.rounds, 0);
  });

  it("runs the rest when its scratch store cannot be made (a temp dir that takes no files), and says why", async () => {
    const saved = process.env.TMPDIR;
    process.env.TMPDIR = "/nonexistent-etcetera-warmup-test/tmp";
    try {
      const r = await warmUp({ rounds: 40, budgetMs: 60_000, loopbackCalls: 4 });
      expect(r.storeSkipped).toMatch(/^no scratch store \(Error: ENOENT/);
      expect(r.counts.storeApplied).toBe(0);
      expect(r.counts.raftRequests).toBe(40);
      expect(r.counts.loopbackCalls).toBe(4);
    } finally {
      if (saved === undefined) delete process.env.TMPDIR;
      else process.env.TMPDIR = saved;
    }
  });

  it("is on unless ETCETERA_WARMUP=0; another value is an error naming the variable", () => {
    expect(warmupEnabled({})).toBe(true);
    expect(warmupEnabled({ ETCETERA_WARMUP: "" })).toBe(true);
    expect(warmupEnabled({ ETCETERA_WARMUP: "1" })).toBe(true);
    expect(warmupEnabled({ ETCETERA_WARMUP: "0" })).toBe(false);
    expect(warmupEnabled({ ETCETERA_WARMUP: "off" })).toEqual({ error: 'ETCETERA_WARMUP must be 0 or 1, got "off"' });
  });
});
