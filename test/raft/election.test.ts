import { describe, expect, it } from "vitest";
import { Cluster, enc } from "./helpers.js";
import { newMessage } from "../../src/raft/raft.js";
import { MessageType, NONE, ProposalDroppedError, StateType } from "../../src/raft/types.js";

describe("leader election", () => {
  it("elects a leader that appends a no-op of its term", () => {
    const c = new Cluster([1, 2, 3]);
    c.campaign(1);
    const r = c.node(1).raw.raft;
    expect(r.state).toBe(StateType.Leader);
    expect(r.term).toBe(2);
    const last = r.raftLog.lastIndex();
    expect(r.raftLog.term(last)).toBe(2);
    expect(r.raftLog.entries(last, Infinity)[0].data.byteLength).toBe(0);
    expect(r.raftLog.committed).toBe(last); // the no-op commits everything before it
    for (const id of [2, 3]) expect(c.node(id).raw.raft.lead).toBe(1);
  });

  it("randomizes the election timeout in [electionTick, 2*electionTick)", () => {
    const c = new Cluster([1, 2, 3], { seed: 42 });
    const seen = new Set<number>();
    const r = c.node(1).raw.raft;
    for (let i = 0; i < 200; i++) {
      r.becomeFollower(r.term + 1, NONE);
      seen.add(r.randomizedElectionTimeout);
    }
    expect(Math.min(...seen)).toBeGreaterThanOrEqual(10);
    expect(Math.max(...seen)).toBeLessThan(20);
    expect(seen.size).toBeGreaterThan(5);
  });

  it("a follower campaigns after its election timeout", () => {
    const c = new Cluster([1, 2, 3]);
    c.tickAll(25);
    expect(c.leader()).toBeDefined();
  });

  it("election restriction: a candidate with a stale log cannot win", () => {
    const c = new Cluster([1, 2, 3]);
    c.campaign(1);
    c.isolate(3);
    c.node(1).raw.propose(enc("x"));
    c.stabilize();
    c.heal();
    // 3 lacks the committed entry: 1 and 2 refuse their votes.
    c.node(3).raw.campaign();
    c.stabilize();
    expect(c.node(3).raw.raft.state).not.toBe(StateType.Leader);
    // 2 has it and wins.
    c.campaign(2);
    expect(c.node(2).raw.raft.state).toBe(StateType.Leader);
    expect([...c.node(3).applied.values()]).toEqual(["x"]);
  });

  it("votes at most once per term", () => {
    const c = new Cluster([1, 2, 3]);
    const r = c.node(1).raw.raft;
    const vote = (from: number) =>
      r.step(newMessage({ type: MessageType.MsgVote, from, to: 1, term: 5, index: 100, logTerm: 5 }));
    vote(2);
    vote(3);
    const resps = c.readyMessages(1).filter((m) => m.type === MessageType.MsgVoteResp);
    expect(resps.map((m) => [m.to, m.reject])).toEqual([
      [2, false],
      [3, true],
    ]);
    expect(r.vote).toBe(2);
    // The vote is persisted before the response may be sent.
    expect(c.node(1).storage.persistedHardState()).toMatchObject({ term: 5, vote: 2 });
  });

  it("a proposal without a known leader fails with 'no leader'", () => {
    const c = new Cluster([1, 2, 3]);
    expect(() => c.node(2).raw.propose(enc("x"))).toThrow(ProposalDroppedError);
    try {
      c.node(2).raw.propose(enc("x"));
    } catch (e) {
      expect((e as ProposalDroppedError).reason).toBe("no leader");
    }
    c.node(2).raw.campaign(); // candidate: still no leader
    expect(() => c.node(2).raw.propose(enc("x"))).toThrow(/no leader/);
  });
});

describe("pre-vote", () => {
  it("a partitioned node does not inflate its term and does not disrupt on rejoin", () => {
    const c = new Cluster([1, 2, 3], { preVote: true });
    c.campaign(1);
    const term = c.node(1).raw.raft.term;
    c.isolate(3);
    c.tickAll(100);
    expect(c.node(3).raw.raft.term).toBe(term);
    expect(c.node(3).raw.raft.state).toBe(StateType.PreCandidate);
    c.heal();
    c.tickAll(5);
    expect(c.leader()).toBe(1);
    expect(c.node(1).raw.raft.term).toBe(term);
  });

  it("without pre-vote the same partition inflates the term and disrupts the leader", () => {
    const c = new Cluster([1, 2, 3], { preVote: false });
    c.campaign(1);
    const term = c.node(1).raw.raft.term;
    c.isolate(3);
    c.tickAll(100);
    expect(c.node(3).raw.raft.term).toBeGreaterThan(term + 2);
    c.heal();
    c.tickAll(20);
    expect(c.node(1).raw.raft.term).toBeGreaterThan(term);
  });

  it("grants a pre-vote without changing term or vote, and rejects a stale log", () => {
    const c = new Cluster([1, 2, 3], { preVote: true });
    const r = c.node(1).raw.raft;
    r.step(newMessage({ type: MessageType.MsgPreVote, from: 2, to: 1, term: 7, index: 10, logTerm: 1 }));
    r.step(newMessage({ type: MessageType.MsgPreVote, from: 3, to: 1, term: 7, index: 1, logTerm: 1 }));
    const resps = c.readyMessages(1).filter((m) => m.type === MessageType.MsgPreVoteResp);
    expect(resps.map((m) => [m.to, m.reject, m.term])).toEqual([
      [2, false, 7],
      [3, true, 1],
    ]);
    expect(r.term).toBe(1);
    expect(r.vote).toBe(NONE);
  });
});

describe("check-quorum", () => {
  it("a leader that loses contact with a quorum steps down", () => {
    const c = new Cluster([1, 2, 3], { checkQuorum: true });
    c.campaign(1);
    c.drop = (m) => m.from === 1 || m.to === 1;
    for (let i = 0; i < 21; i++) c.tick(1);
    c.stabilize();
    expect(c.node(1).raw.raft.state).toBe(StateType.Follower);
  });

  it("a leader with a quorum stays", () => {
    const c = new Cluster([1, 2, 3], { checkQuorum: true });
    c.campaign(1);
    c.isolate(3);
    for (let i = 0; i < 50; i++) {
      c.tick(1);
      c.stabilize();
    }
    expect(c.node(1).raw.raft.state).toBe(StateType.Leader);
  });

  it("lease: a follower that heard from its leader ignores a disruptive vote request", () => {
    const c = new Cluster([1, 2, 3], { checkQuorum: true });
    c.campaign(1);
    const f = c.node(2).raw.raft;
    const term = f.term;
    f.step(newMessage({ type: MessageType.MsgVote, from: 3, to: 2, term: term + 5, index: 100, logTerm: term + 5 }));
    expect(f.term).toBe(term);
    expect(c.readyMessages(2).filter((m) => m.type === MessageType.MsgVoteResp)).toEqual([]);
    // Once the lease expires (no leader contact for an election timeout) it does vote.
    c.drop = () => true;
    c.tick(2, 10);
    f.step(newMessage({ type: MessageType.MsgVote, from: 3, to: 2, term: term + 5, index: 100, logTerm: term + 5 }));
    expect(f.term).toBe(term + 5);
    expect(f.vote).toBe(3);
  });

  it("a vote with the transfer marker overrides the lease", () => {
    const c = new Cluster([1, 2, 3], { checkQuorum: true });
    c.campaign(1);
    c.node(1).raw.transferLeader(3);
    c.stabilize();
    expect(c.leader()).toBe(3);
  });
});
