import { describe, expect, it } from "vitest";
import { Cluster, enc } from "./helpers.js";
import { MessageType, NONE, StateType } from "../../src/raft/types.js";

describe("leadership transfer", () => {
  it("transfers to an up-to-date follower via MsgTimeoutNow", () => {
    const c = new Cluster([1n, 2n, 3n], { checkQuorum: true, preVote: true });
    c.campaign(1n);
    const since = c.delivered.length;
    c.node(1n).raw.transferLeader(2n);
    c.stabilize();
    expect(c.leader()).toBe(2n);
    expect(c.countDelivered(MessageType.MsgTimeoutNow, since)).toBe(1);
    expect(c.node(2n).raw.raft.term).toBe(3);
  });

  it("a transfer requested on a follower is forwarded to the leader", () => {
    const c = new Cluster([1n, 2n, 3n]);
    c.campaign(1n);
    c.node(3n).raw.transferLeader(3n);
    c.stabilize();
    expect(c.leader()).toBe(3n);
  });

  it("catches up a lagging transferee first, then hands over", () => {
    const c = new Cluster([1n, 2n, 3n]);
    c.campaign(1n);
    c.isolate(3n);
    for (let i = 0; i < 5; i++) c.node(1n).raw.propose(enc(`e${i}`));
    c.stabilize();
    c.heal();
    c.node(1n).raw.transferLeader(3n);
    c.stabilize();
    expect(c.leader()).toBe(3n);
    expect(c.node(3n).applied.size).toBe(5);
  });

  it("refuses proposals during a transfer and abandons a transferee that does not catch up within an election timeout", () => {
    const c = new Cluster([1n, 2n, 3n], { checkQuorum: true });
    c.campaign(1n);
    c.isolate(3n);
    c.node(1n).raw.propose(enc("x"));
    c.stabilize();
    c.node(1n).raw.transferLeader(3n);
    c.stabilize();
    expect(c.node(1n).raw.status().leadTransferee).toBe(3n);
    expect(() => c.node(1n).raw.propose(enc("y"))).toThrow(/transfer in progress/);
    // The transferee stays unreachable: after an election timeout the transfer is dropped.
    for (let i = 0; i < 10; i++) {
      c.tick(1n);
      c.stabilize();
    }
    expect(c.node(1n).raw.status().leadTransferee).toBe(NONE);
    expect(c.node(1n).raw.raft.state).toBe(StateType.Leader);
    c.node(1n).raw.propose(enc("y"));
    c.stabilize();
    expect([...c.node(2n).applied.values()]).toEqual(["x", "y"]);
  });

  it("ignores a transfer to a learner", () => {
    const c = new Cluster([1n, 2n, 3n], { learners: [3n] });
    c.campaign(1n);
    c.node(1n).raw.transferLeader(3n);
    c.stabilize();
    expect(c.leader()).toBe(1n);
    expect(c.node(1n).raw.status().leadTransferee).toBe(NONE);
  });
});
