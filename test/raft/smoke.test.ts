import { describe, expect, it } from "vitest";
import { Cluster, enc } from "./helpers.js";
import { StateType } from "../../src/raft/types.js";

describe("smoke", () => {
  it("elects a leader and commits a proposal in a 3-node cluster", () => {
    const c = new Cluster([1, 2, 3]);
    c.campaign(1);
    expect(c.node(1).raw.raft.state).toBe(StateType.Leader);
    c.node(1).raw.propose(enc("hello"));
    c.stabilize();
    for (const id of [1, 2, 3]) expect([...c.node(id).applied.values()]).toEqual(["hello"]);
  });
});
