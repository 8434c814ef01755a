import { describe, expect, it } from "vitest";
import { Cluster, enc } from "./helpers.js";
import { ProgressState } from "../../src/raft/progress.js";
import { ConfChangeTransition, ConfChangeType, MessageType } from "../../src/raft/types.js";

describe("snapshots", () => {
  it("a follower behind the leader's first index gets a snapshot, installs it, and catches up", () => {
    const c = new Cluster([1n, 2n, 3n]);
    c.campaign(1n);
    c.isolate(3n);
    for (let i = 0; i < 10; i++) c.node(1n).raw.propose(enc(`e${i}`));
    c.stabilize();
    const snapIndex = c.compact(1n);
    c.node(1n).raw.propose(enc("after"));
    c.stabilize();
    c.heal();
    const since = c.delivered.length;
    c.tickAll(3);
    expect(c.countDelivered(MessageType.MsgSnap, since)).toBe(1);
    const f = c.node(3n);
    expect(f.storage.firstIndex()).toBe(snapIndex + 1);
    expect(f.storage.snapshot().metadata.index).toBe(snapIndex);
    expect([...f.applied.values()]).toEqual([...Array.from({ length: 10 }, (_, i) => `e${i}`), "after"]);
    expect(c.node(1n).raw.status().progress?.get(3n)?.state).toBe(ProgressState.Replicate);
  });

  it("a failed snapshot send goes back to probing and is retried", () => {
    const c = new Cluster([1n, 2n, 3n]);
    c.campaign(1n);
    c.isolate(3n);
    c.node(1n).raw.propose(enc("x"));
    c.stabilize();
    c.compact(1n);
    c.heal();
    c.drop = (m) => m.type === MessageType.MsgSnap;
    c.tickAll(2);
    const l = c.node(1n).raw;
    expect(l.status().progress?.get(3n)?.state).toBe(ProgressState.Snapshot);
    l.reportSnapshot(3n, true);
    expect(l.status().progress?.get(3n)?.state).toBe(ProgressState.Probe);
    c.heal();
    c.tickAll(3);
    expect([...c.node(3n).applied.values()]).toEqual(["x"]);
  });

  it("a restarted node recovers from its snapshot plus the log after it", () => {
    const c = new Cluster([1n, 2n, 3n]);
    c.campaign(1n);
    for (let i = 0; i < 5; i++) c.node(1n).raw.propose(enc(`a${i}`));
    c.stabilize();
    c.compact(2n);
    c.node(1n).raw.propose(enc("b"));
    c.stabilize();
    c.restart(2n);
    expect(c.node(2n).raw.raft.prs.confState().voters).toEqual([1n, 2n, 3n]);
    expect([...c.node(2n).applied.values()]).toEqual(["a0", "a1", "a2", "a3", "a4", "b"]);
    c.campaign(2n);
    expect(c.leader()).toBe(2n);
  });

  it("a snapshot carries the configuration: a learner added after it waits for a newer one", () => {
    const c = new Cluster([1n, 2n, 3n]);
    c.campaign(1n);
    c.node(1n).raw.propose(enc("x"));
    c.stabilize();
    c.compact(1n); // config (1 2 3) without 4
    c.addEmptyNode(4n);
    c.node(1n).raw.proposeConfChange({ transition: ConfChangeTransition.Auto, changes: [{ type: ConfChangeType.AddLearnerNode, nodeId: 4n }], context: new Uint8Array(0) });
    c.stabilize();
    c.tickAll(3);
    expect(c.countDelivered(MessageType.MsgSnap)).toBe(0);
    expect(c.node(4n).appliedIndex).toBe(0);
    c.compact(1n); // now includes 4
    c.tickAll(3);
    expect(c.node(4n).confState?.learners).toEqual([4n]);
    expect([...c.node(4n).applied.values()]).toEqual(["x"]);
  });

  it("ignores a snapshot older than its commit index", () => {
    const c = new Cluster([1n, 2n, 3n]);
    c.campaign(1n);
    c.node(1n).raw.propose(enc("x"));
    c.stabilize();
    const snap = c.node(1n).storage.createSnapshot(3, c.node(1n).confState, enc("[]"));
    const f = c.node(2n).raw;
    const committed = f.raft.raftLog.committed;
    f.step({ type: MessageType.MsgSnap, from: 1n, to: 2n, term: f.raft.term, logTerm: 0, index: 0, entries: [], commit: 0, reject: false, rejectHint: 0, context: new Uint8Array(0), snapshot: snap });
    expect(f.raft.raftLog.hasPendingSnapshot()).toBe(false);
    const resp = c.readyMessages(2n).find((m) => m.type === MessageType.MsgAppResp);
    expect(resp?.index).toBe(committed);
  });
});
