import { describe, expect, it } from "vitest";
import { Cluster, enc, prng } from "./helpers.js";
import { RawNode } from "../../src/raft/rawnode.js";
import { MemoryStorage } from "../../src/raft/storage.js";
import { RaftInvariantError, RaftUsageError } from "../../src/raft/assert.js";
import { newMessage } from "../../src/raft/raft.js";
import { EntryType, MessageType, StateType, type NodeId } from "../../src/raft/types.js";

const newNode = (id: NodeId = 1n) => new RawNode({ id, electionTick: 10, heartbeatTick: 1, storage: new MemoryStorage(), random: prng(1) });

describe("RawNode", () => {
  it("bootstrap produces the initial conf changes as entries to persist and to apply", () => {
    const n = newNode();
    n.bootstrap([1n, 2n, 3n]);
    expect(n.hasReady()).toBe(true);
    const rd = n.ready();
    expect(rd.entries.map((e) => [e.index, e.term, e.type])).toEqual([
      [1, 1, EntryType.ConfChangeV2],
      [2, 1, EntryType.ConfChangeV2],
      [3, 1, EntryType.ConfChangeV2],
    ]);
    expect(rd.committedEntries.length).toBe(3);
    expect(rd.hardState).toEqual({ term: 1, vote: 0n, commit: 3 });
    expect(rd.mustSync).toBe(true);
    expect(() => n.bootstrap([1n])).toThrow(RaftUsageError);
  });

  it("ready() requires advance() of the previous Ready", () => {
    const n = newNode();
    n.bootstrap([1n]);
    const rd = n.ready();
    expect(() => n.ready()).toThrow(RaftUsageError);
    n.advance(rd);
    expect(() => n.advance(rd)).toThrow(RaftUsageError);
  });

  it("validates its configuration", () => {
    const storage = new MemoryStorage();
    expect(() => new RawNode({ id: 0n, electionTick: 10, heartbeatTick: 1, storage, random: Math.random })).toThrow(RaftUsageError);
    expect(() => new RawNode({ id: 1n, electionTick: 1, heartbeatTick: 1, storage, random: Math.random })).toThrow(/election tick/);
    expect(() => new RawNode({ id: 1n, electionTick: 10, heartbeatTick: 1, storage, random: Math.random, readOnlyOption: "lease-based" })).toThrow(/CheckQuorum/);
  });

  it("canSendBeforePersist only for a leader whose term and vote are already persisted", () => {
    const c = new Cluster([1n, 2n, 3n]);
    const n = c.node(1n).raw;
    n.campaign();
    let rd = n.ready(); // candidate: term and vote changed
    expect(rd.canSendBeforePersist).toBe(false);
    expect(rd.mustSync).toBe(true);
    c.node(1n).storage.setHardState(rd.hardState ?? { term: 0, vote: 0n, commit: 0 });
    n.advance(rd);
    for (const m of rd.messages) c.deliver(m);
    for (const id of [2n, 3n]) for (const m of c.readyMessages(id)) c.deliver(m);
    rd = n.ready(); // leader now, with its no-op and MsgApps
    expect(rd.softState?.raftState).toBe(StateType.Leader);
    expect(rd.entries.length).toBe(1);
    expect(rd.messages.some((m) => m.type === MessageType.MsgApp)).toBe(true);
    expect(rd.canSendBeforePersist).toBe(true);
    n.advance(rd);
  });

  it("a leader's commit is only exposed in a Ready after the one carrying the entries", () => {
    const c = new Cluster([1n, 2n, 3n]);
    c.campaign(1n);
    const l = c.node(1n).raw;
    l.propose(enc("x"));
    const rd = l.ready();
    const index = rd.entries[0].index;
    // Followers ack before the leader has advanced (persisted) this Ready.
    for (const m of rd.messages) c.deliver(m);
    for (const id of [2n, 3n]) for (const m of c.readyMessages(id)) c.deliver(m);
    expect(l.raft.raftLog.committed).toBe(index); // decided in memory...
    expect(rd.committedEntries.map((e) => e.index)).not.toContain(index);
    expect(rd.messages.every((m) => m.commit < index)).toBe(true);
    c.node(1n).storage.append(rd.entries);
    l.advance(rd);
    const next = l.ready(); // ...visible only now, after the entries were persisted
    expect(next.committedEntries.map((e) => e.index)).toContain(index);
    l.advance(next);
  });

  it("ignores local message types from the network and responses from unknown peers", () => {
    const c = new Cluster([1n, 2n, 3n]);
    c.campaign(1n);
    const l = c.node(1n).raw;
    l.step(newMessage({ type: MessageType.MsgHup, from: 2n, to: 1n }));
    l.step(newMessage({ type: MessageType.MsgAppResp, from: 9n, to: 1n, term: l.raft.term, index: 100 }));
    expect(l.raft.state).toBe(StateType.Leader);
  });

  it("status reports progress only on the leader", () => {
    const c = new Cluster([1n, 2n, 3n]);
    c.campaign(1n);
    const s = c.node(1n).raw.status();
    expect(s.softState).toEqual({ lead: 1n, raftState: StateType.Leader });
    expect([...(s.progress?.keys() ?? [])]).toEqual([1n, 2n, 3n]);
    expect(s.progress?.get(2n)?.match).toBe(s.hardState.commit);
    expect(c.node(2n).raw.status().progress).toBeUndefined();
  });

  it("asserts invariants: the term never goes back", () => {
    const c = new Cluster([1n, 2n, 3n]);
    c.campaign(1n);
    const r = c.node(2n).raw.raft;
    expect(() => r.becomeFollower(r.term - 1, 0n)).toThrow(RaftInvariantError);
  });
});
