import { describe, expect, it } from "vitest";
import { Cluster, enc } from "./helpers.js";
import { ProgressState } from "../../src/raft/progress.js";
import { ConfChangeTransition, ConfChangeType, MessageType } from "../../src/raft/types.js";

describe("snapshots", () => {
  it("a follower behind the leader's first index gets a snapshot, installs it, and catches up", () => {
    const c = new Cluster([1, 2, 3]);
    c.campaign(1);
    c.isolate(3);
    for (let i = 0; i < 10; i++) c.node(1).raw.propose(enc(`e${i}`));
    c.stabilize();
    const snapIndex = c.compact(1);
    c.node(1).raw.propose(enc("after"));
    c.stabilize();
    c.heal();
    const since = c.delivered.length;
    c.tickAll(3);
    expect(c.countDelivered(MessageType.MsgSnap, since)).toBe(1);
    const f = c.node(3);
    expect(f.storage.firstIndex()).toBe(snapIndex + 1);
    expect(f.storage.snapshot().metadata.index).toBe(snapIndex);
    expect([...f.applied.values()]).toEqual([...Array.from({ length: 10 }, (_, i) => `e${i}`), "after"]);
    expect(c.node(1).raw.status().progress?.get(3)?.state).toBe(ProgressState.Replicate);
  });

  it("a failed snapshot send goes back to probing and is retried", () => {
    const c = new Cluster([1, 2, 3]);
    c.campaign(1);
    c.isolate(3);
    c.node(1).raw.propose(enc("x"));
    c.stabilize();
    c.compact(1);
    c.heal();
    c.drop = (m) => m.type === MessageType.MsgSnap;
    c.tickAll(2);
    const l = c.node(1).raw;
    expect(l.status().progress?.get(3)?.state).toBe(ProgressState.Snapshot);
    l.reportSnapshot(3, true);
    expect(l.status().progress?.get(3)?.state).toBe(ProgressState.Probe);
    c.heal();
    c.tickAll(3);
    expect([...c.node(3).applied.values()]).toEqual(["x"]);
  });

  it("a restarted node recovers from its snapshot plus the log after it", () => {
    const c = new Cluster([1, 2, 3]);
    c.campaign(1);
    for (let i = 0; i < 5; i++) c.node(1).raw.propose(enc(`a${i}`));
    c.stabilize();
    c.compact(2);
    c.node(1).raw.propose(enc("b"));
    c.stabilize();
    c.restart(2);
    expect(c.node(2).raw.raft.prs.confState().voters).toEqual([1, 2, 3]);
    expect([...c.node(2).applied.values()]).toEqual(["a0", "a1", "a2", "a3", "a4", "b"]);
    c.campaign(2);
    expect(c.leader()).toBe(2);
  });

  it("a snapshot carries the configuration: a learner added after it waits for a newer one", () => {
    const c = new Cluster([1, 2, 3]);
    c.campaign(1);
    c.node(1).raw.propose(enc("x"));
    c.stabilize();
    c.compact(1); // config (1 2 3) without 4
    c.addEmptyNode(4);
    c.node(1).raw.proposeConfChange({ transition: ConfChangeTransition.Auto, changes: [{ type: ConfChangeType.AddLearnerNode, nodeId: 4 }], context: new Uint8Array(0) });
    c.stabilize();
    c.tickAll(3);
    expect(c.countDelivered(MessageType.MsgSnap)).toBe(0);
    expect(c.node(4).appliedIndex).toBe(0);
    c.compact(1); // now includes 4
    c.tickAll(3);
    expect(c.node(4).confState?.learners).toEqual([4]);
    expect([...c.node(4).applied.values()]).toEqual(["x"]);
  });

  it("ignores a snapshot older than its commit index", () => {
    const c = new Cluster([1, 2, 3]);
    c.campaign(1);
    c.node(1).raw.propose(enc("x"));
    c.stabilize();
    const snap = c.node(1).storage.createSnapshot(3, c.node(1).confState, enc("[]"));
    const f = c.node(2).raw;
    const committed = f.raft.raftLog.committed;
    f.step({ type: MessageType.MsgSnap, from: 1, to: 2, term: f.raft.term, logTerm: 0, index: 0, entries: [], commit: 0, reject: false, rejectHint: 0, context: new Uint8Array(0), snapshot: snap });
    expect(f.raft.raftLog.hasPendingSnapshot()).toBe(false);
    const resp = c.readyMessages(2).find((m) => m.type === MessageType.MsgAppResp);
    expect(resp?.index).toBe(committed);
  });
});
