import { describe, expect, it } from "vitest";
import { Cluster, enc } from "./helpers.js";
import { ProgressState } from "../../src/raft/progress.js";
import { newMessage } from "../../src/raft/raft.js";
import { MessageType, StateType, type Message } from "../../src/raft/types.js";

const apps = (ms: Message[], to?: number) => ms.filter((m) => m.type === MessageType.MsgApp && (to === undefined || m.to === to));

describe("log replication", () => {
  it("log matching: a follower rejects an append whose previous entry does not match", () => {
    const c = new Cluster([1, 2, 3]);
    c.campaign(1);
    const f = c.node(2).raw;
    const last = f.raft.raftLog.lastIndex();
    f.step(newMessage({ type: MessageType.MsgApp, from: 1, to: 2, term: f.raft.term, index: last + 5, logTerm: f.raft.term }));
    const resp = c.readyMessages(2).find((m) => m.type === MessageType.MsgAppResp);
    expect(resp?.reject).toBe(true);
    expect(resp?.rejectHint).toBe(last);
  });

  it("a new leader overwrites a follower's uncommitted conflicting suffix", () => {
    const c = new Cluster([1, 2, 3]);
    c.campaign(1);
    // 1 appends entries that only it has, then loses leadership.
    c.isolate(1);
    c.node(1).raw.propose(enc("lost-1"));
    c.node(1).raw.propose(enc("lost-2"));
    c.stabilize();
    c.campaign(2);
    c.node(2).raw.propose(enc("kept"));
    c.stabilize();
    c.heal();
    c.tickAll(3);
    const l1 = c.node(1).raw.raft.raftLog;
    const l2 = c.node(2).raw.raft.raftLog;
    expect(l1.lastIndex()).toBe(l2.lastIndex());
    for (let i = 1; i <= l2.lastIndex(); i++) expect(l1.term(i)).toBe(l2.term(i));
    expect([...c.node(1).applied.values()]).toEqual(["kept"]);
  });

  it("Figure 8: an entry of an earlier term is not committed by counting replicas", () => {
    // The Raft paper's Figure 8 with five servers, no pre-vote, one entry per message.
    const c = new Cluster([1, 2, 3, 4, 5], { maxSizePerMsg: 1 });
    c.campaign(1); // term 2
    const idx = c.node(1).raw.raft.raftLog.lastIndex() + 1;
    // (a) S1 (term 2) replicates entry idx only to S2, then crashes.
    c.drop = (m) => !((m.from === 1 && m.to === 2) || (m.from === 2 && m.to === 1));
    c.node(1).raw.propose(enc("a"));
    c.stabilize();
    expect(c.node(2).raw.raft.raftLog.term(idx)).toBe(2);
    c.restart(1);
    // (b) S5 wins term 3 with S3 and S4, writes its own entry at idx only locally, and crashes.
    c.drop = (m) => m.from === 1 || m.to === 1 || m.to === 2 || m.from === 2 || (m.from === 5 && m.type === MessageType.MsgApp);
    c.campaign(5);
    expect(c.node(5).raw.raft.state).toBe(StateType.Leader);
    expect(c.node(5).raw.raft.term).toBe(3);
    expect(c.node(5).raw.raft.raftLog.term(idx)).toBe(3);
    c.restart(5);
    // (c) S1 restarts and wins term 4 with S2, S3, S4. It replicates idx (term 2) to S3 but not
    //     yet its own term-4 no-op at idx+1.
    // S4 and S5 are unreachable; S3 receives idx but never anything after it.
    c.drop = (m) =>
      [4, 5].includes(m.from) ||
      [4, 5].includes(m.to) ||
      (m.to === 3 && m.type === MessageType.MsgApp && m.entries.some((e) => e.index > idx) && c.node(3).raw.raft.raftLog.lastIndex() >= idx);
    c.campaign(1); // term 3: S3 already voted for S5 in term 3
    c.campaign(1); // term 4 with S2 and S3
    expect(c.node(1).raw.raft.state).toBe(StateType.Leader);
    expect(c.node(1).raw.raft.term).toBe(4);
    expect([1, 2, 3].map((id) => c.node(id).raw.raft.raftLog.term(idx))).toEqual([2, 2, 2]);
    // Stored on a majority, but from an earlier term: not committed.
    expect(c.node(1).raw.raft.raftLog.committed).toBeLessThan(idx);
    // (d) S1 crashes; S5 can win (its last term 3 beats term 2) and overwrites idx everywhere.
    c.restart(1);
    c.drop = (m) => m.from === 1 || m.to === 1;
    for (let i = 0; i < 3 && c.node(5).raw.raft.state !== StateType.Leader; i++) c.campaign(5);
    expect(c.node(5).raw.raft.state).toBe(StateType.Leader);
    c.stabilize();
    for (const id of [2, 3, 4, 5]) expect(c.node(id).raw.raft.raftLog.term(idx)).toBe(3);
    for (const id of [1, 2, 3, 4, 5]) expect([...c.node(id).applied.values()]).not.toContain("a");
  });

  it("Figure 8 (e): once an entry of the current term is on a majority, earlier entries commit with it", () => {
    const c = new Cluster([1, 2, 3, 4, 5]);
    c.campaign(1);
    c.drop = (m) => !((m.from === 1 && m.to === 2) || (m.from === 2 && m.to === 1));
    c.node(1).raw.propose(enc("a"));
    c.stabilize();
    expect(c.node(1).applied.size).toBe(0);
    c.restart(1);
    c.drop = (m) => m.from === 4 || m.to === 4 || m.from === 5 || m.to === 5;
    c.campaign(1); // term 3 with S2 and S3; its no-op reaches both
    expect(c.node(1).raw.raft.state).toBe(StateType.Leader);
    c.stabilize();
    expect([...c.node(1).applied.values()]).toEqual(["a"]);
    expect([...c.node(3).applied.values()]).toEqual(["a"]);
  });

  it("fast backtracking skips a follower's whole divergent term in one round trip", () => {
    const c = new Cluster([1, 2, 3]);
    c.campaign(1); // term 2
    // The old leader, cut off, appends 100 entries nobody else gets.
    c.isolate(1);
    for (let i = 0; i < 100; i++) c.node(1).raw.propose(enc(`stale-${i}`));
    c.stabilize();
    c.campaign(2); // term 3 with S3
    for (let i = 0; i < 20; i++) c.node(2).raw.propose(enc(`good-${i}`));
    c.stabilize();
    // A later leader (term 4) starts probing S1 at the end of its longer log.
    c.restart(2);
    c.campaign(2);
    expect(c.node(2).raw.raft.state).toBe(StateType.Leader);
    c.heal();
    const since = c.delivered.length;
    c.tickAll(3);
    const rejections = c.delivered.slice(since).filter((m) => m.type === MessageType.MsgAppResp && m.from === 1 && m.reject);
    // Without the (index, term) hint this would take one probe per divergent entry (≥ 20).
    expect(rejections.length).toBeGreaterThan(0);
    expect(rejections.length).toBeLessThanOrEqual(2);
    const l1 = c.node(1).raw.raft.raftLog;
    expect(l1.lastIndex()).toBe(c.node(2).raw.raft.raftLog.lastIndex());
    expect([...c.node(1).applied.values()]).toEqual(Array.from({ length: 20 }, (_, i) => `good-${i}`));
  });

  it("fast backtracking also works when the follower has entries of a higher term", () => {
    const c = new Cluster([1, 2, 3]);
    c.campaign(1); // term 2
    c.isolate(1);
    c.campaign(2); // term 3, cut off right after its no-op reaches 3
    c.isolate(2);
    for (let i = 0; i < 50; i++) c.node(2).raw.propose(enc(`stale-${i}`));
    c.stabilize();
    c.heal();
    c.drop = (m) => m.from === 2 || m.to === 2;
    c.campaign(3); // term 4 with S1
    for (let i = 0; i < 60; i++) c.node(3).raw.propose(enc(`good-${i}`));
    c.stabilize();
    c.restart(3);
    c.campaign(3); // term 5: probes S2 from the end of its log
    expect(c.node(3).raw.raft.state).toBe(StateType.Leader);
    c.heal();
    const since = c.delivered.length;
    c.tickAll(3);
    const rejections = c.delivered.slice(since).filter((m) => m.type === MessageType.MsgAppResp && m.from === 2 && m.reject);
    expect(rejections.length).toBeGreaterThan(0);
    expect(rejections.length).toBeLessThanOrEqual(2);
    expect([...c.node(2).applied.values()].filter((v) => v.startsWith("stale"))).toEqual([]);
    expect(c.node(2).applied.size).toBe(60);
  });
});

describe("flow control", () => {
  it("probe until the follower answers, then replicate with a bounded inflight window", () => {
    const c = new Cluster([1, 2, 3], { maxInflightMsgs: 2, maxSizePerMsg: 1 });
    c.campaign(1);
    const l = c.node(1).raw;
    expect(l.status().progress?.get(2)?.state).toBe(ProgressState.Replicate);
    // Follower 2 stops answering: at most 2 MsgApps (one entry each) may be in flight.
    c.drop = (m) => m.to === 2 || m.from === 2;
    for (let i = 0; i < 10; i++) l.propose(enc(`e${i}`));
    const msgs = c.readyMessages(1);
    expect(apps(msgs, 2).length).toBe(2);
    expect(apps(msgs, 3).length).toBe(2);
    expect(apps(msgs, 3).every((m) => m.entries.length === 1)).toBe(true);
    for (const m of msgs) c.deliver(m);
    c.stabilize();
    // 3 acknowledges and drains the rest; 2 stays paused with its window full.
    expect(c.node(3).applied.size).toBe(10);
    expect(l.status().progress?.get(2)?.paused).toBe(true);
    expect(l.status().progress?.get(2)?.inflight).toBe(2);
    // Unreachable: back to probing, one message at a time.
    l.reportUnreachable(2);
    expect(l.status().progress?.get(2)?.state).toBe(ProgressState.Probe);
    c.heal();
    c.tickAll(2);
    expect(l.status().progress?.get(2)?.state).toBe(ProgressState.Replicate);
    expect(c.node(2).applied.size).toBe(10);
  });

  it("the inflight window is also bounded by bytes", () => {
    const c = new Cluster([1, 2, 3], { maxInflightMsgs: 100, maxInflightBytes: 1000, maxSizePerMsg: 300 });
    c.campaign(1);
    c.drop = (m) => m.to === 2;
    const l = c.node(1).raw;
    for (let i = 0; i < 20; i++) l.propose(new Uint8Array(200));
    const sent = apps(c.readyMessages(1), 2);
    const bytes = sent.reduce((s, m) => s + m.entries.reduce((t, e) => t + e.data.byteLength + 16, 0), 0);
    expect(bytes).toBeGreaterThanOrEqual(1000);
    expect(bytes).toBeLessThan(1000 + 300);
    expect(sent.length).toBeLessThan(20);
  });

  it("a message carries at most maxSizePerMsg bytes of entries (but at least one entry)", () => {
    const c = new Cluster([1, 2, 3], { maxSizePerMsg: 500 });
    c.campaign(1);
    const l = c.node(1).raw;
    l.proposeBatch(Array.from({ length: 10 }, () => new Uint8Array(200)));
    l.propose(new Uint8Array(2000));
    const sent = apps(c.readyMessages(1), 2);
    for (const m of sent) {
      const size = m.entries.reduce((t, e) => t + e.data.byteLength + 16, 0);
      expect(m.entries.length === 1 || size <= 500).toBe(true);
    }
    expect(sent.reduce((n, m) => n + m.entries.length, 0)).toBe(11);
  });
});

describe("batching", () => {
  it("proposals between two Ready cycles leave in one MsgApp per follower", () => {
    const c = new Cluster([1, 2, 3]);
    c.campaign(1);
    const l = c.node(1).raw;
    for (let i = 0; i < 50; i++) l.propose(enc(`p${i}`));
    l.proposeBatch([enc("b1"), enc("b2")]);
    const msgs = c.readyMessages(1);
    expect(apps(msgs, 2).length).toBe(1);
    expect(apps(msgs, 3).length).toBe(1);
    expect(apps(msgs, 2)[0].entries.length).toBe(52);
    for (const m of msgs) c.deliver(m);
    c.stabilize();
    expect(c.node(3).applied.size).toBe(52);
  });

  it("a follower forwards its queued proposals to the leader as one MsgProp", () => {
    const c = new Cluster([1, 2, 3]);
    c.campaign(1);
    const f = c.node(2).raw;
    for (let i = 0; i < 20; i++) f.propose(enc(`f${i}`));
    const props = c.readyMessages(2).filter((m) => m.type === MessageType.MsgProp);
    expect(props.length).toBe(1);
    expect(props[0].to).toBe(1);
    expect(props[0].entries.length).toBe(20);
    c.deliver(props[0]);
    c.stabilize();
    expect([...c.node(3).applied.values()]).toEqual(Array.from({ length: 20 }, (_, i) => `f${i}`));
  });

  it("the leader refuses proposals beyond maxUncommittedEntriesSize", () => {
    const c = new Cluster([1, 2, 3], { maxUncommittedEntriesSize: 1000 });
    c.campaign(1);
    c.drop = () => true; // nothing commits
    const l = c.node(1).raw;
    for (let i = 0; i < 5; i++) l.propose(new Uint8Array(200));
    expect(() => l.propose(new Uint8Array(200))).toThrow(/too many uncommitted entries/);
    c.heal();
    c.tickAll(2);
    l.propose(new Uint8Array(200)); // room again once committed and applied
  });
});
