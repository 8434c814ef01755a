import { describe, expect, it } from "vitest";
import { Cluster, enc } from "./helpers.js";
import { StateType } from "../../src/raft/types.js";

describe("smoke", () => {
  it("elects a leader and commits a proposal in a 3-node cluster", () => {
    const c = new Cluster([1n, 2n, 3n]);
    c.campaign(1n);
    expect(c.node(1n).raw.raft.state).toBe(StateType.Leader);
    c.node(1n).raw.propose(enc("hello"));
    c.stabilize();
    for (const id of [1n, 2n, 3n]) expect([...c.node(id).applied.values()]).toEqual(["hello"]);
  });
});
