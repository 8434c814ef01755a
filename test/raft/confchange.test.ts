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
} from "../../src/raft/types.js";

const cc = (changes: ConfChangeSingle[], transition = ConfChangeTransition.Auto): ConfChangeV2 => ({ transition, changes, context: new Uint8Array(0) });
const add = (nodeId: number) => ({ type: ConfChangeType.AddNode, nodeId });
const addLearner = (nodeId: number) => ({ type: ConfChangeType.AddLearnerNode, nodeId });
const remove = (nodeId: number) => ({ type: ConfChangeType.RemoveNode, nodeId });

describe("learners", () => {
  it("a learner receives the log but neither votes, counts for commit nor campaigns", () => {
    const c = new Cluster([1, 2, 3, 4], { learners: [4] });
    c.campaign(1);
    c.node(1).raw.propose(enc("x"));
    c.stabilize();
    expect([...c.node(4).applied.values()]).toEqual(["x"]);
    // With voter 2 and 3 cut off, the learner's ack cannot commit anything.
    c.drop = (m) => [2, 3].includes(m.from) || [2, 3].includes(m.to);
    c.node(1).raw.propose(enc("y"));
    c.stabilize();
    expect(c.node(4).raw.raft.raftLog.lastIndex()).toBe(c.node(1).raw.raft.raftLog.lastIndex());
    expect(c.node(1).applied.size).toBe(1);
    // A learner never campaigns, however long it waits.
    c.drop = () => true;
    c.tick(4, 100);
    expect(c.node(4).raw.raft.state).toBe(StateType.Follower);
    expect(c.node(4).raw.raft.isLearner).toBe(true);
  });

  it("adds a new member as learner, lets it catch up, then promotes it", () => {
    const c = new Cluster([1, 2, 3]);
    c.campaign(1);
    for (let i = 0; i < 5; i++) c.node(1).raw.propose(enc(`e${i}`));
    c.stabilize();
    c.addEmptyNode(4);
    c.node(1).raw.proposeConfChange(cc([addLearner(4)]));
    c.stabilize();
    expect(c.node(1).confState?.learners).toEqual([4]);
    expect(c.node(4).applied.size).toBe(5);
    c.node(1).raw.proposeConfChange(cc([add(4)]));
    c.stabilize();
    expect(c.node(4).confState?.voters).toEqual([1, 2, 3, 4]);
    expect(c.node(4).raw.raft.isLearner).toBe(false);
    c.campaign(4);
    expect(c.leader()).toBe(4);
  });
});

describe("membership changes", () => {
  it("allows only one pending conf change at a time", () => {
    const c = new Cluster([1, 2, 3]);
    c.campaign(1);
    c.node(1).raw.proposeConfChange(cc([addLearner(4)]));
    expect(() => c.node(1).raw.proposeConfChange(cc([addLearner(5)]))).toThrow(/conf change pending/);
    c.stabilize();
    c.node(1).raw.proposeConfChange(cc([addLearner(5)]));
  });

  it("refuses invalid changes at proposal time", () => {
    const c = new Cluster([1, 2, 3]);
    c.campaign(1);
    expect(() => c.node(1).raw.proposeConfChange(cc([]))).toThrow(/invalid conf change/); // not joint
    expect(() => c.node(1).raw.proposeConfChange(cc([remove(1), remove(2), remove(3)]))).toThrow(/invalid conf change/);
  });

  it("removing a voter shrinks the quorum", () => {
    const c = new Cluster([1, 2, 3]);
    c.campaign(1);
    c.node(1).raw.proposeConfChange(cc([remove(3)]));
    c.stabilize();
    expect(c.node(1).confState?.voters).toEqual([1, 2]);
    // Now 1 and 2 are the quorum: cutting off 3 changes nothing, cutting off 2 stops commits.
    c.drop = (m) => m.to === 2 || m.from === 2;
    c.node(1).raw.propose(enc("x"));
    c.stabilize();
    expect(c.node(1).applied.size).toBe(0);
    c.heal();
    c.tickAll(2);
    expect([...c.node(1).applied.values()]).toEqual(["x"]);
  });

  it("joint consensus: enters a joint config, needs both majorities, and leaves it automatically", () => {
    const c = new Cluster([1, 2, 3, 4, 5], { learners: [4, 5] });
    c.campaign(1);
    // Replace voters 2,3 by 4,5 in one step: (1 2 3) -> (1 4 5).
    c.node(1).raw.proposeConfChange(cc([add(4), add(5), remove(2), remove(3)]));
    const l = c.node(1);
    for (let i = 0; i < 3; i++) c.stabilize();
    expect(l.confState?.voters).toEqual([1, 4, 5]);
    expect(l.confState?.votersOutgoing ?? []).toEqual([]); // left automatically
    expect(l.raw.raft.prs.config.voters.isJoint()).toBe(false);
    // The auto-leave entry was proposed by raft itself and applied everywhere in the new config.
    for (const id of [4, 5]) expect(c.node(id).confState?.votersOutgoing).toEqual([]);
  });

  it("joint consensus: while joint, the outgoing majority is required too", () => {
    const c = new Cluster([1, 2, 3, 4, 5], { learners: [4, 5] });
    c.campaign(1);
    c.node(1).raw.proposeConfChange(cc([add(4), add(5), remove(2), remove(3)], ConfChangeTransition.JointExplicit));
    c.stabilize();
    const l = c.node(1);
    expect(l.confState?.votersOutgoing).toEqual([1, 2, 3]);
    expect(l.confState?.voters).toEqual([1, 4, 5]);
    // Incoming majority (1,4,5) alone cannot commit while outgoing (1,2,3) is cut off.
    c.drop = (m) => [2, 3].includes(m.to) || [2, 3].includes(m.from);
    l.raw.propose(enc("joint"));
    c.stabilize();
    expect(l.applied.size).toBe(0);
    c.heal();
    c.tickAll(2);
    expect([...l.applied.values()]).toEqual(["joint"]);
    // Explicit transition: stays joint until an empty change leaves it.
    expect(() => l.raw.proposeConfChange(cc([addLearner(6)]))).toThrow(/invalid conf change/);
    l.raw.proposeConfChange(cc([]));
    c.stabilize();
    expect(l.confState?.votersOutgoing).toEqual([]);
    expect(l.confState?.voters).toEqual([1, 4, 5]);
  });

  it("demoting a voter goes through LearnersNext", () => {
    const c = new Cluster([1, 2, 3, 4]);
    c.campaign(1);
    c.node(1).raw.proposeConfChange(cc([addLearner(4)], ConfChangeTransition.JointExplicit));
    c.stabilize();
    expect(c.node(1).confState).toMatchObject({ voters: [1, 2, 3], votersOutgoing: [1, 2, 3, 4], learnersNext: [4], learners: [] });
    c.node(1).raw.proposeConfChange(cc([]));
    c.stabilize();
    expect(c.node(1).confState).toMatchObject({ voters: [1, 2, 3], votersOutgoing: [], learnersNext: [], learners: [4] });
  });

  it("the Changer refuses unsafe transitions", () => {
    const t = new ProgressTracker(8, 0);
    restoreConfState(t, 10, { ...emptyConfState(), voters: [1, 2, 3] });
    const ch = () => new Changer(t, 10);
    expect(() => ch().simple([add(4), add(5)])).toThrow(/more than one voter changed/);
    expect(() => ch().leaveJoint()).toThrow(/can't leave a non-joint config/);
    const joint = ch().enterJoint(false, [add(4)]);
    t.config = joint.config;
    t.progress = joint.progress;
    expect(() => ch().enterJoint(false, [add(5)])).toThrow(/already joint/);
    expect(() => ch().simple([add(5)])).toThrow(/in joint config/);
  });

  it("restores a joint configuration from a ConfState", () => {
    const t = new ProgressTracker(8, 0);
    const cs = { voters: [1, 2, 4], votersOutgoing: [1, 2, 3], learners: [5], learnersNext: [3], autoLeave: true };
    restoreConfState(t, 10, cs);
    expect(t.confState()).toEqual(cs);
  });
});
