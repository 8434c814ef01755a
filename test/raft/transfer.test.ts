import { describe, expect, it } from "vitest";
import { Cluster, enc } from "./helpers.js";
import { MessageType, NONE, StateType } from "../../src/raft/types.js";

describe("leadership transfer", () => {
  it("transfers to an up-to-date follower via MsgTimeoutNow", () => {
    const c = new Cluster([1, 2, 3], { checkQuorum: true, preVote: true });
    c.campaign(1);
    const since = c.delivered.length;
    c.node(1).raw.transferLeader(2);
    c.stabilize();
    expect(c.leader()).toBe(2);
    expect(c.countDelivered(MessageType.MsgTimeoutNow, since)).toBe(1);
    expect(c.node(2).raw.raft.term).toBe(3);
  });

  it("a transfer requested on a follower is forwarded to the leader", () => {
    const c = new Cluster([1, 2, 3]);
    c.campaign(1);
    c.node(3).raw.transferLeader(3);
    c.stabilize();
    expect(c.leader()).toBe(3);
  });

  it("catches up a lagging transferee first, then hands over", () => {
    const c = new Cluster([1, 2, 3]);
    c.campaign(1);
    c.isolate(3);
    for (let i = 0; i < 5; i++) c.node(1).raw.propose(enc(`e${i}`));
    c.stabilize();
    c.heal();
    c.node(1).raw.transferLeader(3);
    c.stabilize();
    expect(c.leader()).toBe(3);
    expect(c.node(3).applied.size).toBe(5);
  });

  it("refuses proposals during a transfer and abandons a transferee that does not catch up within an election timeout", () => {
    const c = new Cluster([1, 2, 3], { checkQuorum: true });
    c.campaign(1);
    c.isolate(3);
    c.node(1).raw.propose(enc("x"));
    c.stabilize();
    c.node(1).raw.transferLeader(3);
    c.stabilize();
    expect(c.node(1).raw.status().leadTransferee).toBe(3);
    expect(() => c.node(1).raw.propose(enc("y"))).toThrow(/transfer in progress/);
    // The transferee stays unreachable: after an election timeout the transfer is dropped.
    for (let i = 0; i < 10; i++) {
      c.tick(1);
      c.stabilize();
    }
    expect(c.node(1).raw.status().leadTransferee).toBe(NONE);
    expect(c.node(1).raw.raft.state).toBe(StateType.Leader);
    c.node(1).raw.propose(enc("y"));
    c.stabilize();
    expect([...c.node(2).applied.values()]).toEqual(["x", "y"]);
  });

  it("ignores a transfer to a learner", () => {
    const c = new Cluster([1, 2, 3], { learners: [3] });
    c.campaign(1);
    c.node(1).raw.transferLeader(3);
    c.stabilize();
    expect(c.leader()).toBe(1);
    expect(c.node(1).raw.status().leadTransferee).toBe(NONE);
  });
});
