/**
 * ReadIndex rounds on their own, with a fake raft (records each ReadIndex request, can refuse it
 * as raft does without a leader), the real applied-index waiters and fake timers.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { ProposalDroppedError } from "../../src/raft/types.js";
import { READ_INDEX_RETRY_MS, ReadIndex, type ReadIndexOptions } from "../../src/server/read_index.js";
import { WaitTime } from "../../src/server/wait_time.js";

const TIMEOUT_MS = 3000;

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

function setup(extra: Partial<ReadIndexOptions> = {}) {
  const applied = new WaitTime();
  const t = { asked: [] as string[], leader: true, wakes: 0, failed: 0 };
  const ri = new ReadIndex({
    memberId: 0xabcn,
    requestTimeoutMs: TIMEOUT_MS,
    readIndex: (ctx) => {
      if (!t.leader) throw new ProposalDroppedError("no leader");
      t.asked.push(Buffer.from(ctx).toString("hex"));
    },
    wake: () => t.wakes++,
    waitApplied: (index) => applied.wait(index),
    failed: { inc: () => t.failed++ },
    ...extra,
  });
  const answer = (ctxHex: string, index: number) => ri.onReadStates([{ index, requestCtx: Buffer.from(ctxHex, "hex") }]);
  return { t, ri, applied, answer };
}

/** Records how each promise settled, without waiting. */
function track(p: Promise<void>): { state: string } {
  const r = { state: "pending" };
  p.then(
    () => (r.state = "resolved"),
    (e: Error) => (r.state = e.message),
  );
  return r;
}

async function settle(): Promise<void> {
  await vi.advanceTimersByTimeAsync(0);
}

describe("read index", () => {
  it("reads waiting when a round starts share it, and are released once the read index is applied", async () => {
    const { t, ri, applied, answer } = setup();
    const a = track(ri.notify());
    const b = track(ri.notify());
    expect(t.asked.length).toBe(1); // b joined the pending batch; a's round is already out
    answer(t.asked[0]!, 10);
    expect(t.asked.length).toBe(2); // b's round starts as soon as a's is answered, before a's apply
    applied.trigger(9);
    await settle();
    expect(a.state).toBe("pending");
    applied.trigger(10);
    await settle();
    expect(a.state).toBe("resolved");
    expect(b.state).toBe("pending");
    answer(t.asked[1]!, 10);
    await settle();
    expect(b.state).toBe("resolved");
    expect(t.asked[0]!.startsWith("00000abc")).toBe(true);
    expect(new Set(t.asked).size).toBe(2);
    expect(t.wakes).toBe(2);
  });

  it("batches every read of the turn into one round", async () => {
    const { t, ri, applied, answer } = setup();
    const first = track(ri.notify());
    const batch = [0, 1, 2, 3, 4].map(() => track(ri.notify()));
    answer(t.asked[0]!, 1);
    expect(t.asked.length).toBe(2);
    answer(t.asked[1]!, 2);
    applied.trigger(2);
    await settle();
    expect([first, ...batch].map((r) => r.state)).toEqual(Array(6).fill("resolved"));
    expect(t.asked.length).toBe(2);
  });

  it("ignores answers to other rounds (another member's, or one already answered)", async () => {
    const { t, ri, applied, answer } = setup();
    const a = track(ri.notify());
    answer("00000def00000000", 1);
    answer(t.asked[0]!.replace(/.$/, "9"), 1);
    applied.trigger(5);
    await settle();
    expect(a.state).toBe("pending");
    answer(t.asked[0]!, 5);
    await settle();
    expect(a.state).toBe("resolved");
  });

  it("asks again every retry interval while raft has no leader, and is answered once one is elected", async () => {
    const { t, ri, applied, answer } = setup();
    t.leader = false;
    const a = track(ri.notify());
    await vi.advanceTimersByTimeAsync(READ_INDEX_RETRY_MS * 3);
    expect(t.asked.length).toBe(0);
    expect(t.wakes).toBe(0);
    t.leader = true;
    await vi.advanceTimersByTimeAsync(READ_INDEX_RETRY_MS);
    expect(t.asked.length).toBe(1);
    answer(t.asked[0]!, 3);
    applied.trigger(3);
    await settle();
    expect(a.state).toBe("resolved");
    await vi.advanceTimersByTimeAsync(READ_INDEX_RETRY_MS * 2);
    expect(t.asked.length).toBe(1); // an answered round asks no more
  });

  it("fails a round not answered within the request timeout, and the next round goes on", async () => {
    const { t, ri, applied, answer } = setup();
    t.leader = false;
    const a = track(ri.notify());
    const b = track(ri.notify());
    await vi.advanceTimersByTimeAsync(TIMEOUT_MS);
    expect(a.state).toBe("etcdserver: request timed out");
    expect(b.state).toBe("pending");
    expect(t.failed).toBe(1);
    t.leader = true;
    await vi.advanceTimersByTimeAsync(READ_INDEX_RETRY_MS);
    answer(t.asked[0]!, 1);
    applied.trigger(1);
    await settle();
    expect(b.state).toBe("resolved");
  });

  it("a round answered but not applied within the request timeout fails too", async () => {
    const { t, ri, answer } = setup();
    const a = track(ri.notify());
    answer(t.asked[0]!, 100);
    await vi.advanceTimersByTimeAsync(TIMEOUT_MS);
    expect(a.state).toBe("etcdserver: request timed out");
    expect(t.failed).toBe(1);
  });

  it("refuses with too many requests when the next round's batch is full", async () => {
    const { ri } = setup({ maxPending: 2 });
    const inRound = track(ri.notify());
    const waiting = [track(ri.notify()), track(ri.notify())];
    const refused = track(ri.notify());
    await settle();
    expect(refused.state).toBe("etcdserver: too many requests");
    ri.stop();
    await settle();
    expect([inRound, ...waiting].map((r) => r.state)).toEqual(Array(3).fill("etcdserver: server stopped"));
  });

  it("after stop, fails the round in flight and the waiting reads, refuses new ones, and asks raft no more", async () => {
    const { t, ri } = setup();
    const a = track(ri.notify());
    const b = track(ri.notify());
    ri.stop();
    const c = track(ri.notify());
    await vi.advanceTimersByTimeAsync(TIMEOUT_MS * 2);
    expect([a.state, b.state, c.state]).toEqual(Array(3).fill("etcdserver: server stopped"));
    expect(t.asked.length).toBe(1);
    expect(t.failed).toBe(1);
  });
});
