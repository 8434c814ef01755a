import { describe, expect, it } from "vitest";
import { Cluster, enc } from "./helpers.js";
import { Changer, restoreConfState } from "../../src/raft/confchange.js";
import { ProgressTracker } from "../../src/raft/tracker.js";
import {
  ConfChangeTransition,
  ConfChangeType,
  StateType,
  emptyConfState,
  type ConfChangeSingle,
  type ConfChangeV2,
  type NodeId,
} from "../../src/raft/types.js";

const cc = (changes: ConfChangeSingle[], transition = ConfChangeTransition.Auto): ConfChangeV2 => ({ transition, changes, context: new Uint8Array(0) });
const add = (nodeId: NodeId) => ({ type: ConfChangeType.AddNode, nodeId });
const addLearner = (nodeId: NodeId) => ({ type: ConfChangeType.AddLearnerNode, nodeId });
const remove = (nodeId: NodeId) => ({ type: ConfChangeType.RemoveNode, nodeId });

describe("learners", () => {
  it("a learner receives the log but neither votes, counts for commit nor campaigns", () => {
    const c = new Cluster([1n, 2n, 3n, 4n], { learners: [4n] });
    c.campaign(1n);
    c.node(1n).raw.propose(enc("x"));
    c.stabilize();
    expect([...c.node(4n).applied.values()]).toEqual(["x"]);
    // With voter 2 and 3 cut off, the learner's ack cannot commit anything.
    c.drop = (m) => [2n, 3n].includes(m.from) || [2n, 3n].includes(m.to);
    c.node(1n).raw.propose(enc("y"));
    c.stabilize();
    expect(c.node(4n).raw.raft.raftLog.lastIndex()).toBe(c.node(1n).raw.raft.raftLog.lastIndex());
    expect(c.node(1n).applied.size).toBe(1);
    // A learner never campaigns, however long it waits.
    c.drop = () => true;
    c.tick(4n, 100);
    expect(c.node(4n).raw.raft.state).toBe(StateType.Follower);
    expect(c.node(4n).raw.raft.isLearner).toBe(true);
  });

  it("adds a new member as learner, lets it catch up, then promotes it", () => {
    const c = new Cluster([1n, 2n, 3n]);
    c.campaign(1n);
    for (let i = 0; i < 5; i++) c.node(1n).raw.propose(enc(`e${i}`));
    c.stabilize();
    c.addEmptyNode(4n);
    c.node(1n).raw.proposeConfChange(cc([addLearner(4n)]));
    c.stabilize();
    expect(c.node(1n).confState?.learners).toEqual([4n]);
    expect(c.node(4n).applied.size).toBe(5);
    c.node(1n).raw.proposeConfChange(cc([add(4n)]));
    c.stabilize();
    expect(c.node(4n).confState?.voters).toEqual([1n, 2n, 3n, 4n]);
    expect(c.node(4n).raw.raft.isLearner).toBe(false);
    c.campaign(4n);
    expect(c.leader()).toBe(4n);
  });
});

describe("membership changes", () => {
  it("allows only one pending conf change at a time", () => {
    const c = new Cluster([1n, 2n, 3n]);
    c.campaign(1n);
    c.node(1n).raw.proposeConfChange(cc([addLearner(4n)]));
    expect(() => c.node(1n).raw.proposeConfChange(cc([addLearner(5n)]))).toThrow(/conf change pending/);
    c.stabilize();
    c.node(1n).raw.proposeConfChange(cc([addLearner(5n)]));
  });

  it("refuses invalid changes at proposal time", () => {
    const c = new Cluster([1n, 2n, 3n]);
    c.campaign(1n);
    expect(() => c.node(1n).raw.proposeConfChange(cc([]))).toThrow(/invalid conf change/); // not joint
    expect(() => c.node(1n).raw.proposeConfChange(cc([remove(1n), remove(2n), remove(3n)]))).toThrow(/invalid conf change/);
  });

  it("removing a voter shrinks the quorum", () => {
    const c = new Cluster([1n, 2n, 3n]);
    c.campaign(1n);
    c.node(1n).raw.proposeConfChange(cc([remove(3n)]));
    c.stabilize();
    expect(c.node(1n).confState?.voters).toEqual([1n, 2n]);
    // Now 1 and 2 are the quorum: cutting off 3 changes nothing, cutting off 2 stops commits.
    c.drop = (m) => m.to === 2n || m.from === 2n;
    c.node(1n).raw.propose(enc("x"));
    c.stabilize();
    expect(c.node(1n).applied.size).toBe(0);
    c.heal();
    c.tickAll(2);
    expect([...c.node(1n).applied.values()]).toEqual(["x"]);
  });

  it("joint consensus: enters a joint config, needs both majorities, and leaves it automatically", () => {
    const c = new Cluster([1n, 2n, 3n, 4n, 5n], { learners: [4n, 5n] });
    c.campaign(1n);
    // Replace voters 2,3 by 4,5 in one step: (1 2 3) -> (1 4 5).
    c.node(1n).raw.proposeConfChange(cc([add(4n), add(5n), remove(2n), remove(3n)]));
    const l = c.node(1n);
    for (let i = 0; i < 3; i++) c.stabilize();
    expect(l.confState?.voters).toEqual([1n, 4n, 5n]);
    expect(l.confState?.votersOutgoing ?? []).toEqual([]); // left automatically
    expect(l.raw.raft.prs.config.voters.isJoint()).toBe(false);
    // The auto-leave entry was proposed by raft itself and applied everywhere in the new config.
    for (const id of [4n, 5n]) expect(c.node(id).confState?.votersOutgoing).toEqual([]);
  });

  it("joint consensus: while joint, the outgoing majority is required too", () => {
    const c = new Cluster([1n, 2n, 3n, 4n, 5n], { learners: [4n, 5n] });
    c.campaign(1n);
    c.node(1n).raw.proposeConfChange(cc([add(4n), add(5n), remove(2n), remove(3n)], ConfChangeTransition.JointExplicit));
    c.stabilize();
    const l = c.node(1n);
    expect(l.confState?.votersOutgoing).toEqual([1n, 2n, 3n]);
    expect(l.confState?.voters).toEqual([1n, 4n, 5n]);
    // Incoming majority (1,4,5) alone cannot commit while outgoing (1,2,3) is cut off.
    c.drop = (m) => [2n, 3n].includes(m.to) || [2n, 3n].includes(m.from);
    l.raw.propose(enc("joint"));
    c.stabilize();
    expect(l.applied.size).toBe(0);
    c.heal();
    c.tickAll(2);
    expect([...l.applied.values()]).toEqual(["joint"]);
    // Explicit transition: stays joint until an empty change leaves it.
    expect(() => l.raw.proposeConfChange(cc([addLearner(6n)]))).toThrow(/invalid conf change/);
    l.raw.proposeConfChange(cc([]));
    c.stabilize();
    expect(l.confState?.votersOutgoing).toEqual([]);
    expect(l.confState?.voters).toEqual([1n, 4n, 5n]);
  });

  it("demoting a voter goes through LearnersNext", () => {
    const c = new Cluster([1n, 2n, 3n, 4n]);
    c.campaign(1n);
    c.node(1n).raw.proposeConfChange(cc([addLearner(4n)], ConfChangeTransition.JointExplicit));
    c.stabilize();
    expect(c.node(1n).confState).toMatchObject({ voters: [1n, 2n, 3n], votersOutgoing: [1n, 2n, 3n, 4n], learnersNext: [4n], learners: [] });
    c.node(1n).raw.proposeConfChange(cc([]));
    c.stabilize();
    expect(c.node(1n).confState).toMatchObject({ voters: [1n, 2n, 3n], votersOutgoing: [], learnersNext: [], learners: [4n] });
  });

  it("the Changer refuses unsafe transitions", () => {
    const t = new ProgressTracker(8, 0);
    restoreConfState(t, 10, { ...emptyConfState(), voters: [1n, 2n, 3n] });
    const ch = () => new Changer(t, 10);
    expect(() => ch().simple([add(4n), add(5n)])).toThrow(/more than one voter changed/);
    expect(() => ch().leaveJoint()).toThrow(/can't leave a non-joint config/);
    const joint = ch().enterJoint(false, [add(4n)]);
    t.config = joint.config;
    t.progress = joint.progress;
    expect(() => ch().enterJoint(false, [add(5n)])).toThrow(/already joint/);
    expect(() => ch().simple([add(5n)])).toThrow(/in joint config/);
  });

  it("restores a joint configuration from a ConfState", () => {
    const t = new ProgressTracker(8, 0);
    const cs = { voters: [1n, 2n, 4n], votersOutgoing: [1n, 2n, 3n], learners: [5n], learnersNext: [3n], autoLeave: true };
    restoreConfState(t, 10, cs);
    expect(t.confState()).toEqual(cs);
  });
});
