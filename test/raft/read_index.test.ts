import { describe, expect, it } from "vitest";
import { Cluster, enc } from "./helpers.js";
import { MessageType, ProposalDroppedError } from "../../src/raft/types.js";

describe("ReadIndex", () => {
  it("the leader confirms leadership with one heartbeat round for all reads queued in it", () => {
    const c = new Cluster([1n, 2n, 3n]);
    c.campaign(1n);
    c.node(1n).raw.propose(enc("x"));
    c.stabilize();
    const commit = c.node(1n).raw.raft.raftLog.committed;
    const since = c.delivered.length;
    for (let i = 0; i < 10; i++) c.node(1n).raw.readIndex(enc(`r${i}`));
    c.stabilize();
    expect(c.node(1n).readStates.map((r) => r.ctx)).toEqual(Array.from({ length: 10 }, (_, i) => `r${i}`));
    expect(c.node(1n).readStates.every((r) => r.index === commit)).toBe(true);
    // One round: one heartbeat per follower, not one per read.
    expect(c.countDelivered(MessageType.MsgHeartbeat, since)).toBe(2);
  });

  it("a read is not answered without a quorum of heartbeat acks", () => {
    const c = new Cluster([1n, 2n, 3n]);
    c.campaign(1n);
    c.drop = (m) => m.type === MessageType.MsgHeartbeatResp;
    c.node(1n).raw.readIndex(enc("r"));
    c.stabilize();
    expect(c.node(1n).readStates).toEqual([]);
    c.heal();
    c.tickAll(1); // next heartbeat carries the pending read's context
    expect(c.node(1n).readStates.map((r) => r.ctx)).toEqual(["r"]);
  });

  it("a follower asks the leader and gets the leader's commit index", () => {
    const c = new Cluster([1n, 2n, 3n]);
    c.campaign(1n);
    c.node(1n).raw.propose(enc("x"));
    c.stabilize();
    c.node(3n).raw.readIndex(enc("fr"));
    c.stabilize();
    expect(c.node(3n).readStates).toEqual([{ index: c.node(1n).raw.raft.raftLog.committed, ctx: "fr" }]);
    expect(c.node(1n).readStates).toEqual([]);
  });

  it("a new leader answers reads only after committing an entry of its term", () => {
    const c = new Cluster([1n, 2n, 3n]);
    c.campaign(1n);
    c.drop = (m) => m.type === MessageType.MsgApp || m.type === MessageType.MsgAppResp;
    c.campaign(2n);
    const l = c.node(2n).raw;
    expect(l.raft.raftLog.committed).toBeLessThan(l.raft.raftLog.lastIndex());
    l.readIndex(enc("early"));
    c.stabilize();
    expect(c.node(2n).readStates).toEqual([]);
    c.heal();
    c.tickAll(2);
    expect(c.node(2n).readStates.map((r) => r.ctx)).toEqual(["early"]);
    expect(c.node(2n).readStates[0].index).toBe(l.raft.raftLog.committed);
  });

  it("a single-voter cluster answers at once", () => {
    const c = new Cluster([1n]);
    c.campaign(1n);
    c.node(1n).raw.readIndex(enc("solo"));
    c.stabilize();
    expect(c.node(1n).readStates.map((r) => r.ctx)).toEqual(["solo"]);
  });

  it("lease-based reads are answered without a heartbeat round", () => {
    const c = new Cluster([1n, 2n, 3n], { readOnlyOption: "lease-based", checkQuorum: true });
    c.campaign(1n);
    c.drop = () => true;
    c.node(1n).raw.readIndex(enc("lease"));
    c.stabilize();
    expect(c.node(1n).readStates.map((r) => r.ctx)).toEqual(["lease"]);
  });

  it("a read with no known leader fails at once", () => {
    const c = new Cluster([1n, 2n, 3n]);
    expect(() => c.node(2n).raw.readIndex(enc("r"))).toThrow(ProposalDroppedError);
  });
});
