import { describe, expect, it } from "vitest";
import { Cluster, enc } from "./helpers.js";
import { newMessage } from "../../src/raft/raft.js";
import { MessageType, NONE, ProposalDroppedError, StateType, type NodeId } from "../../src/raft/types.js";

describe("leader election", () => {
  it("elects a leader that appends a no-op of its term", () => {
    const c = new Cluster([1n, 2n, 3n]);
    c.campaign(1n);
    const r = c.node(1n).raw.raft;
    expect(r.state).toBe(StateType.Leader);
    expect(r.term).toBe(2);
    const last = r.raftLog.lastIndex();
    expect(r.raftLog.term(last)).toBe(2);
    expect(r.raftLog.entries(last, Infinity)[0].data.byteLength).toBe(0);
    expect(r.raftLog.committed).toBe(last); // the no-op commits everything before it
    for (const id of [2n, 3n]) expect(c.node(id).raw.raft.lead).toBe(1n);
  });

  it("randomizes the election timeout in [electionTick, 2*electionTick)", () => {
    const c = new Cluster([1n, 2n, 3n], { seed: 42 });
    const seen = new Set<number>();
    const r = c.node(1n).raw.raft;
    for (let i = 0; i < 200; i++) {
      r.becomeFollower(r.term + 1, NONE);
      seen.add(r.randomizedElectionTimeout);
    }
    expect(Math.min(...seen)).toBeGreaterThanOrEqual(10);
    expect(Math.max(...seen)).toBeLessThan(20);
    expect(seen.size).toBeGreaterThan(5);
  });

  it("a follower campaigns after its election timeout", () => {
    const c = new Cluster([1n, 2n, 3n]);
    c.tickAll(25);
    expect(c.leader()).toBeDefined();
  });

  it("election restriction: a candidate with a stale log cannot win", () => {
    const c = new Cluster([1n, 2n, 3n]);
    c.campaign(1n);
    c.isolate(3n);
    c.node(1n).raw.propose(enc("x"));
    c.stabilize();
    c.heal();
    // 3 lacks the committed entry: 1 and 2 refuse their votes.
    c.node(3n).raw.campaign();
    c.stabilize();
    expect(c.node(3n).raw.raft.state).not.toBe(StateType.Leader);
    // 2 has it and wins.
    c.campaign(2n);
    expect(c.node(2n).raw.raft.state).toBe(StateType.Leader);
    expect([...c.node(3n).applied.values()]).toEqual(["x"]);
  });

  it("votes at most once per term", () => {
    const c = new Cluster([1n, 2n, 3n]);
    const r = c.node(1n).raw.raft;
    const vote = (from: NodeId) =>
      r.step(newMessage({ type: MessageType.MsgVote, from, to: 1n, term: 5, index: 100, logTerm: 5 }));
    vote(2n);
    vote(3n);
    const resps = c.readyMessages(1n).filter((m) => m.type === MessageType.MsgVoteResp);
    expect(resps.map((m) => [m.to, m.reject])).toEqual([
      [2n, false],
      [3n, true],
    ]);
    expect(r.vote).toBe(2n);
    // The vote is persisted before the response may be sent.
    expect(c.node(1n).storage.persistedHardState()).toMatchObject({ term: 5, vote: 2n });
  });

  it("a proposal without a known leader fails with 'no leader'", () => {
    const c = new Cluster([1n, 2n, 3n]);
    expect(() => c.node(2n).raw.propose(enc("x"))).toThrow(ProposalDroppedError);
    try {
      c.node(2n).raw.propose(enc("x"));
    } catch (e) {
      expect((e as ProposalDroppedError).reason).toBe("no leader");
    }
    c.node(2n).raw.campaign(); // candidate: still no leader
    expect(() => c.node(2n).raw.propose(enc("x"))).toThrow(/no leader/);
  });
});

describe("pre-vote", () => {
  it("a partitioned node does not inflate its term and does not disrupt on rejoin", () => {
    const c = new Cluster([1n, 2n, 3n], { preVote: true });
    c.campaign(1n);
    const term = c.node(1n).raw.raft.term;
    c.isolate(3n);
    c.tickAll(100);
    expect(c.node(3n).raw.raft.term).toBe(term);
    expect(c.node(3n).raw.raft.state).toBe(StateType.PreCandidate);
    c.heal();
    c.tickAll(5);
    expect(c.leader()).toBe(1n);
    expect(c.node(1n).raw.raft.term).toBe(term);
  });

  it("without pre-vote the same partition inflates the term and disrupts the leader", () => {
    const c = new Cluster([1n, 2n, 3n], { preVote: false });
    c.campaign(1n);
    const term = c.node(1n).raw.raft.term;
    c.isolate(3n);
    c.tickAll(100);
    expect(c.node(3n).raw.raft.term).toBeGreaterThan(term + 2);
    c.heal();
    c.tickAll(20);
    expect(c.node(1n).raw.raft.term).toBeGreaterThan(term);
  });

  it("grants a pre-vote without changing term or vote, and rejects a stale log", () => {
    const c = new Cluster([1n, 2n, 3n], { preVote: true });
    const r = c.node(1n).raw.raft;
    r.step(newMessage({ type: MessageType.MsgPreVote, from: 2n, to: 1n, term: 7, index: 10, logTerm: 1 }));
    r.step(newMessage({ type: MessageType.MsgPreVote, from: 3n, to: 1n, term: 7, index: 1, logTerm: 1 }));
    const resps = c.readyMessages(1n).filter((m) => m.type === MessageType.MsgPreVoteResp);
    expect(resps.map((m) => [m.to, m.reject, m.term])).toEqual([
      [2n, false, 7],
      [3n, true, 1],
    ]);
    expect(r.term).toBe(1);
    expect(r.vote).toBe(NONE);
  });
});

describe("check-quorum", () => {
  it("a leader that loses contact with a quorum steps down", () => {
    const c = new Cluster([1n, 2n, 3n], { checkQuorum: true });
    c.campaign(1n);
    c.drop = (m) => m.from === 1n || m.to === 1n;
    for (let i = 0; i < 21; i++) c.tick(1n);
    c.stabilize();
    expect(c.node(1n).raw.raft.state).toBe(StateType.Follower);
  });

  it("a leader with a quorum stays", () => {
    const c = new Cluster([1n, 2n, 3n], { checkQuorum: true });
    c.campaign(1n);
    c.isolate(3n);
    for (let i = 0; i < 50; i++) {
      c.tick(1n);
      c.stabilize();
    }
    expect(c.node(1n).raw.raft.state).toBe(StateType.Leader);
  });

  it("lease: a follower that heard from its leader ignores a disruptive vote request", () => {
    const c = new Cluster([1n, 2n, 3n], { checkQuorum: true });
    c.campaign(1n);
    const f = c.node(2n).raw.raft;
    const term = f.term;
    f.step(newMessage({ type: MessageType.MsgVote, from: 3n, to: 2n, term: term + 5, index: 100, logTerm: term + 5 }));
    expect(f.term).toBe(term);
    expect(c.readyMessages(2n).filter((m) => m.type === MessageType.MsgVoteResp)).toEqual([]);
    // Once the lease expires (no leader contact for an election timeout) it does vote.
    c.drop = () => true;
    c.tick(2n, 10);
    f.step(newMessage({ type: MessageType.MsgVote, from: 3n, to: 2n, term: term + 5, index: 100, logTerm: term + 5 }));
    expect(f.term).toBe(term + 5);
    expect(f.vote).toBe(3n);
  });

  it("a vote with the transfer marker overrides the lease", () => {
    const c = new Cluster([1n, 2n, 3n], { checkQuorum: true });
    c.campaign(1n);
    c.node(1n).raw.transferLeader(3n);
    c.stabilize();
    expect(c.leader()).toBe(3n);
  });
});
