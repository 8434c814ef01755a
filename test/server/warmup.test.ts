import { describe, expect, it } from "vitest";
import { loadMemberCodecs } from "../../src/pb/protos.js";
import { decodeRaftRequest, encodeRaftRequest } from "../../src/server/raft_request.js";
import { FIRST_HEAP_NUMBER_REVISION, MEMBER_SINGLE_PUTS, PRIMER_PUTS, type WarmupCounts, warmUp, warmupEnabled } from "../../src/server/warmup.js";
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/**
 * What each path must have verified after `rounds` rounds and `puts` scratch cluster puts. The
 * scratch raft commits a batch of 8 proposals at a time (it throws unless all three voters apply
 * each one), so the WAL holds at least every entry and a hard state per batch, and each batch takes
 * at least a MsgApp and a MsgAppResp per follower. A scratch cluster put counts only once it
 * answered a revision past the first; every eighth is a txn whose compare held, and every fourth
 * is followed by a range of its key (a linearizable one must find it).
 */
function expectCounts(counts: WarmupCounts, rounds: number, puts: number, primed = puts > 0): void {
  const batches = Math.ceil(rounds / 8);
  expect({ ...counts, walRecords: 0, peerMessages: 0 }).toEqual({
    protobuf: 10 * rounds,
    grpcFrames: rounds,
    hpackBlocks: rounds,
    walRecords: 0,
    peerMessages: 0,
    raftRequests: rounds,
    indexOps: 3 * rounds,
    // The primer's store, straight puts until its packed revisions leave V8's small integers.
    primerPuts: primed ? PRIMER_PUTS : 0,
    memberPuts: puts,
    // The last fifth of them one at a time (one client's path), never more than MEMBER_SINGLE_PUTS.
    memberSinglePuts: Math.min(MEMBER_SINGLE_PUTS, Math.floor(puts / 5)),
    memberTxns: Math.floor(puts / 8),
    memberRanges: Math.floor(puts / 4),
  });
  expect(counts.walRecords).toBeGreaterThanOrEqual(rounds + batches);
  expect(counts.peerMessages).toBeGreaterThanOrEqual(4 * batches);
}

const sockets = () => process.getActiveResourcesInfo().filter((r) => r.startsWith("TCP")).length;

/** Runs `f` with the OS temp dir pointed at `dir` (tmpdir() follows TMPDIR). */
async function withTmpdir<T>(dir: string, f: () => Promise<T>): Promise<T> {
  const saved = process.env.TMPDIR;
  process.env.TMPDIR = dir;
  try {
    return await f();
  } finally {
    if (saved === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = saved;
  }
}

describe("warm-up", () => {
  it("round-trips every codec it warms, once per round, and every call to the scratch cluster", async () => {
    const r = await warmUp({ rounds: 100, budgetMs: 60_000, memberPuts: 50 });
    expect(r.budgetExceeded).toBe(false);
    expect(r.memberSkipped).toBeUndefined();
    expect(r.rounds).toBe(100);
    expectCounts(r.counts, 100, 50);
  });

  it("primes past the first revision whose packed revisions are heap numbers", () => {
    // 2,048 * 2^20 = 2^31: the first packed revision past a 32-bit small integer.
    expect(FIRST_HEAP_NUMBER_REVISION * 2 ** 20).toBe(2 ** 31);
    expect(PRIMER_PUTS).toBeGreaterThan(FIRST_HEAP_NUMBER_REVISION);
  });

  it("commits a last partial batch too", async () => {
    const r = await warmUp({ rounds: 13, budgetMs: 60_000, memberPuts: 13 });
    expectCounts(r.counts, 13, 13);
  });

  it("leaves nothing behind: no directory, no open socket, the process's codecs give the same bytes, a second run counts the same", async () => {
    const put = loadMemberCodecs().message<{ key: Buffer }, { key?: Uint8Array; value?: Uint8Array }>("etcdserverpb.PutRequest");
    const req = { ID: 7, put: { key: Buffer.from("k"), value: Buffer.from("v") } };
    const putBefore = put.encode({ key: Buffer.from("k"), value: Buffer.from("v") });
    const raftBefore = encodeRaftRequest(req);
    const socketsBefore = sockets();
    // A temp dir of this test's own (other test files start members, whose warm-ups use the shared one).
    const ownTmp = mkdtempSync(join(tmpdir(), "warmup-test-"));
    try {
      const first = await withTmpdir(ownTmp, () => warmUp({ rounds: 200, budgetMs: 60_000, memberPuts: 40 }));
      // The scratch cluster ran in ownTmp and its members' directories are removed.
      expect(first.memberSkipped).toBeUndefined();
      expect(first.counts.memberPuts).toBe(40);
      expect(readdirSync(ownTmp)).toEqual([]);
      // The scratch cluster's listeners, peer streams and client sessions are closed.
      await new Promise((r) => setTimeout(r, 50));
      expect(sockets()).toBe(socketsBefore);
      const second = await warmUp({ rounds: 200, budgetMs: 60_000, memberPuts: 40 });
      expect(second.counts).toEqual(first.counts);
    } finally {
      rmSync(ownTmp, { recursive: true, force: true });
    }
    expect(put.encode({ key: Buffer.from("k"), value: Buffer.from("v") })).toEqual(putBefore);
    expect(encodeRaftRequest(req)).toEqual(raftBefore);
    expect(decodeRaftRequest(raftBefore).put?.key.toString()).toBe("k");
  });

  it("stops at its time budget with the rounds it did, all verified", async () => {
    // A 0 ms budget ends after the first slice (a few ms), far short of a billion rounds, and
    // leaves no time for the scratch cluster.
    const r = await warmUp({ rounds: 1e9, budgetMs: 0 });
    expect(r.budgetExceeded).toBe(true);
    expect(r.rounds).toBeGreaterThan(0);
    expect(r.rounds).toBeLessThan(1e9);
    expectCounts(r.counts, r.rounds, 0);
  });

  it("gives up on a scratch cluster not serving by the deadline, and removes it", async () => {
    const ownTmp = mkdtempSync(join(tmpdir(), "warmup-test-"));
    const socketsBefore = sockets();
    try {
      // Its election alone takes 200-400 ms (ticks of 20 ms, election timeout 200 ms): 50 ms is too short.
      const r = await withTmpdir(ownTmp, () => warmUp({ rounds: 1, budgetMs: 50, memberPuts: 100 }));
      expect(r.budgetExceeded).toBe(true);
      expect(r.memberSkipped).toBeUndefined();
      expect(r.counts.memberPuts).toBe(0);
      expect(readdirSync(ownTmp)).toEqual([]);
      await new Promise((res) => setTimeout(res, 50));
      expect(sockets()).toBe(socketsBefore);
    } finally {
      rmSync(ownTmp, { recursive: true, force: true });
    }
  });

  it("runs the rest when its scratch cluster cannot be made (a temp dir that takes no files), and says why", async () => {
    const r = await withTmpdir("/nonexistent-etcetera-warmup-test/tmp", () => warmUp({ rounds: 40, budgetMs: 60_000, memberPuts: 4 }));
    expect(r.memberSkipped).toMatch(/^no scratch cluster \(Error: ENOENT/);
    expect(r.budgetExceeded).toBe(false);
    expectCounts(r.counts, 40, 0, false);
  });

  it("is on unless ETCETERA_WARMUP=0; another value is an error naming the variable", () => {
    expect(warmupEnabled({})).toBe(true);
    expect(warmupEnabled({ ETCETERA_WARMUP: "" })).toBe(true);
    expect(warmupEnabled({ ETCETERA_WARMUP: "1" })).toBe(true);
    expect(warmupEnabled({ ETCETERA_WARMUP: "0" })).toBe(false);
    expect(warmupEnabled({ ETCETERA_WARMUP: "off" })).toEqual({ error: 'ETCETERA_WARMUP must be 0 or 1, got "off"' });
  });
});
