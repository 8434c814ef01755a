/**
 * The proposal registry on its own, with a fake raft and a fake clock: batching, the apply that
 * answers, and every way a proposal fails (too many requests, too large, dropped by raft, deadline
 * with and without a leader, abort, stop).
 */
import { describe, expect, it } from "vitest";
import { ProposalDroppedError, type ConfChangeV2 } from "../../src/raft/types.js";
import { IdGenerator } from "../../src/server/id_gen.js";
import { MAX_GAP_BETWEEN_APPLY_AND_COMMIT, Proposals, type ProposalsOptions } from "../../src/server/proposals.js";
import { decodeRaftRequest } from "../../src/server/raft_request.js";

const TIMEOUT_MS = 1000;

class FakeRaft {
  readonly batches: number[][] = [];
  drop: ProposalDroppedError | undefined;
  proposeBatch(data: Uint8Array[]): void {
    if (this.drop) throw this.drop;
    this.batches.push(data.map((d) => decodeRaftRequest(d).ID));
  }
  readonly confChanges: ConfChangeV2[] = [];
  proposeConfChange(cc: ConfChangeV2): void {
    if (this.drop) throw this.drop;
    this.confChanges.push(cc);
  }
}

function setup(extra: Partial<ProposalsOptions> = {}) {
  const t = { ms: 0, committed: 0, applied: 0, leader: true, wakes: 0, failed: 0 };
  const p = new Proposals({
    ids: new IdGenerator(1n, 0),
    maxRequestBytes: 1024,
    requestTimeoutMs: TIMEOUT_MS,
    now: () => t.ms,
    state: { committedIndex: () => t.committed, appliedIndex: () => t.applied, hasLeader: () => t.leader },
    wake: () => t.wakes++,
    failed: { inc: () => t.failed++ },
    ...extra,
  });
  return { t, p, raft: new FakeRaft() };
}

/** Settles `p` into a value or the error's message. */
async function outcome(p: Promise<unknown>): Promise<unknown> {
  try {
    return await p;
  } catch (e) {
    return (e as Error).message;
  }
}

describe("proposals", () => {
  it("sends the requests of one turn to raft as one batch and answers each by its id when applied", async () => {
    const { t, p, raft } = setup();
    const a = p.propose({ leaseRevoke: { ID: 1 } });
    const b = p.propose({ leaseRevoke: { ID: 2 } });
    expect(t.wakes).toBe(2);
    expect(p.size).toBe(2);
    p.flush(raft);
    p.flush(raft); // nothing new: no empty batch
    expect(raft.batches.length).toBe(1);
    const [idA, idB] = raft.batches[0]!;
    p.applied(idB!, { revision: 7, response: "b" });
    p.applied(idA!, { revision: 6, response: "a" });
    expect(await a).toEqual({ revision: 6, response: "a" });
    expect(await b).toEqual({ revision: 7, response: "b" });
    expect(p.size).toBe(0);
    // An id nobody waits for (another member's request, or one already failed) is ignored.
    p.applied(12345, { revision: 8 });
    expect(t.failed).toBe(0);
  });

  it("refuses with too many requests when apply lags commit by more than etcd's gap, or the registry is full", async () => {
    const { t, p } = setup({ maxPending: 2 });
    t.committed = MAX_GAP_BETWEEN_APPLY_AND_COMMIT + 1;
    expect(await outcome(p.propose({ leaseRevoke: { ID: 1 } }))).toBe("etcdserver: too many requests");
    t.applied = 1; // the gap is exactly the maximum now: accepted
    const first = p.propose({ leaseRevoke: { ID: 1 } });
    const second = p.propose({ leaseRevoke: { ID: 2 } });
    expect(await outcome(p.propose({ leaseRevoke: { ID: 3 } }))).toBe("etcdserver: too many requests");
    expect(p.size).toBe(2);
    p.stop();
    expect(await outcome(first)).toBe("etcdserver: server stopped");
    expect(await outcome(second)).toBe("etcdserver: server stopped");
  });

  it("refuses a request larger than --max-request-bytes before it reaches raft", async () => {
    const { p, raft } = setup({ maxRequestBytes: 64 });
    const big = p.propose({ put: { key: Buffer.alloc(10, 1), value: Buffer.alloc(100, 2) } });
    expect(await outcome(big)).toBe("etcdserver: request is too large");
    p.flush(raft);
    expect(raft.batches).toEqual([]);
    expect(p.size).toBe(0);
  });

  it("holds proposals while no leader is known and proposes them once one is, as etcd's raft node does", async () => {
    const { t, p, raft } = setup();
    t.leader = false;
    const a = p.propose({ leaseRevoke: { ID: 1 } });
    p.flush(raft);
    expect(raft.batches).toEqual([]);
    expect(p.held).toBe(1);
    const b = p.propose({ leaseRevoke: { ID: 2 } });
    p.flush(raft);
    expect(p.held).toBe(2);
    t.leader = true;
    p.flush(raft);
    expect(raft.batches.length).toBe(1);
    expect(raft.batches[0]!.length).toBe(2);
    for (const id of raft.batches[0]!) p.applied(id, { revision: 1 });
    expect(await a).toEqual({ revision: 1 });
    expect(await b).toEqual({ revision: 1 });
    expect(t.failed).toBe(0);
  });

  it("holds again a batch raft drops for want of a leader; fails one dropped by a leadership transfer", async () => {
    const { t, p, raft } = setup();
    raft.drop = new ProposalDroppedError("no leader");
    const a = p.propose({ leaseRevoke: { ID: 1 } });
    p.flush(raft);
    expect(p.held).toBe(1);
    raft.drop = new ProposalDroppedError("transfer in progress");
    const c = p.propose({ leaseRevoke: { ID: 3 } });
    p.flush(raft);
    expect(await outcome(a)).toBe("etcdserver: leader changed");
    expect(await outcome(c)).toBe("etcdserver: leader changed");
    expect(t.failed).toBe(2);
    raft.drop = undefined;
    p.flush(raft);
    expect(raft.batches).toEqual([]); // failed proposals do not come back
  });

  it("fails a held proposal at its deadline with the leader-failure text and never proposes it", async () => {
    const { t, p, raft } = setup();
    t.leader = false;
    const a = p.propose({ leaseRevoke: { ID: 1 } });
    p.flush(raft);
    t.ms = TIMEOUT_MS;
    p.sweep();
    expect(await outcome(a)).toBe("etcdserver: request timed out, possibly due to previous leader failure");
    expect(t.failed).toBe(1);
    t.leader = true;
    p.flush(raft);
    expect(raft.batches).toEqual([]);
    expect(p.held).toBe(0);
  });

  it("fails proposals past their deadline, in order, with the leader-failure text while there is no leader", async () => {
    const { t, p, raft } = setup();
    const early = p.propose({ leaseRevoke: { ID: 1 } });
    t.ms = 400;
    const late = p.propose({ leaseRevoke: { ID: 2 } });
    const answered = p.propose({ leaseRevoke: { ID: 3 } });
    p.flush(raft);
    p.applied(raft.batches[0]![2]!, { revision: 1 });
    t.ms = TIMEOUT_MS - 1;
    p.sweep();
    expect(p.size).toBe(2);
    t.ms = TIMEOUT_MS;
    p.sweep();
    expect(await outcome(early)).toBe("etcdserver: request timed out");
    expect(p.size).toBe(1);
    t.leader = false;
    t.ms = 400 + TIMEOUT_MS;
    p.sweep();
    expect(await outcome(late)).toBe("etcdserver: request timed out, possibly due to previous leader failure");
    expect(await answered).toEqual({ revision: 1 });
    expect(t.failed).toBe(2);
  });

  it("sweeps only what is due: thousands of proposals, each failed once at its own deadline", async () => {
    const { t, p, raft } = setup();
    const waves: Promise<unknown>[][] = [];
    for (let wave = 0; wave < 5; wave++) {
      waves.push(Array.from({ length: 1000 }, (_, i) => outcome(p.propose({ leaseRevoke: { ID: i + 1 } }))));
      p.flush(raft);
      t.ms += TIMEOUT_MS / 4;
    }
    // Waves 0..4 were made at 0, T/4, .., T; now is 5T/4: waves 0 and 1 are due, 2..4 are not.
    t.ms = TIMEOUT_MS + TIMEOUT_MS / 4 - 1;
    p.sweep();
    expect(p.size).toBe(4000);
    t.ms += 1;
    p.sweep();
    expect(p.size).toBe(3000);
    expect(t.failed).toBe(2000);
    for (const w of waves.slice(0, 2)) expect(new Set(await Promise.all(w))).toEqual(new Set(["etcdserver: request timed out"]));
    t.ms += TIMEOUT_MS;
    p.sweep();
    expect(p.size).toBe(0);
    expect(t.failed).toBe(5000);
  });

  it("fails a proposal whose caller gave up (abort) with request timed out", async () => {
    const { t, p } = setup();
    const ac = new AbortController();
    const pending = p.propose({ leaseRevoke: { ID: 1 } }, ac.signal);
    ac.abort();
    expect(await outcome(pending)).toBe("etcdserver: request timed out");
    expect(p.size).toBe(0);
    expect(t.failed).toBe(1);
  });

  it("after stop, fails every waiting proposal and refuses new ones", async () => {
    const { p, raft } = setup();
    const a = p.propose({ leaseRevoke: { ID: 1 } });
    p.stop();
    expect(await outcome(a)).toBe("etcdserver: server stopped");
    expect(await outcome(p.propose({ leaseRevoke: { ID: 2 } }))).toBe("etcdserver: server stopped");
    p.flush(raft);
    expect(raft.batches).toEqual([]);
  });
});
