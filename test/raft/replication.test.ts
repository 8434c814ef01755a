import { describe, expect, it } from "vitest";
import { Cluster, enc } from "./helpers.js";
import { ProgressState } from "../../src/raft/progress.js";
import { newMessage } from "../../src/raft/raft.js";
import { MessageType, StateType, type Message, type NodeId } from "../../src/raft/types.js";

const apps = (ms: Message[], to?: NodeId) => ms.filter((m) => m.type === MessageType.MsgApp && (to === undefined || m.to === to));

describe("log replication", () => {
  it("log matching: a follower rejects an append whose previous entry does not match", () => {
    const c = new Cluster([1n, 2n, 3n]);
    c.campaign(1n);
    const f = c.node(2n).raw;
    const last = f.raft.raftLog.lastIndex();
    f.step(newMessage({ type: MessageType.MsgApp, from: 1n, to: 2n, term: f.raft.term, index: last + 5, logTerm: f.raft.term }));
    const resp = c.readyMessages(2n).find((m) => m.type === MessageType.MsgAppResp);
    expect(resp?.reject).toBe(true);
    expect(resp?.rejectHint).toBe(last);
  });

  it("a new leader overwrites a follower's uncommitted conflicting suffix", () => {
    const c = new Cluster([1n, 2n, 3n]);
    c.campaign(1n);
    // 1 appends entries that only it has, then loses leadership.
    c.isolate(1n);
    c.node(1n).raw.propose(enc("lost-1"));
    c.node(1n).raw.propose(enc("lost-2"));
    c.stabilize();
    c.campaign(2n);
    c.node(2n).raw.propose(enc("kept"));
    c.stabilize();
    c.heal();
    c.tickAll(3);
    const l1 = c.node(1n).raw.raft.raftLog;
    const l2 = c.node(2n).raw.raft.raftLog;
    expect(l1.lastIndex()).toBe(l2.lastIndex());
    for (let i = 1; i <= l2.lastIndex(); i++) expect(l1.term(i)).toBe(l2.term(i));
    expect([...c.node(1n).applied.values()]).toEqual(["kept"]);
  });

  it("Figure 8: an entry of an earlier term is not committed by counting replicas", () => {
    // The Raft paper's Figure 8 with five servers, no pre-vote, one entry per message.
    const c = new Cluster([1n, 2n, 3n, 4n, 5n], { maxSizePerMsg: 1 });
    c.campaign(1n); // term 2
    const idx = c.node(1n).raw.raft.raftLog.lastIndex() + 1;
    // (a) S1 (term 2) replicates entry idx only to S2, then crashes.
    c.drop = (m) => !((m.from === 1n && m.to === 2n) || (m.from === 2n && m.to === 1n));
    c.node(1n).raw.propose(enc("a"));
    c.stabilize();
    expect(c.node(2n).raw.raft.raftLog.term(idx)).toBe(2);
    c.restart(1n);
    // (b) S5 wins term 3 with S3 and S4, writes its own entry at idx only locally, and crashes.
    c.drop = (m) => m.from === 1n || m.to === 1n || m.to === 2n || m.from === 2n || (m.from === 5n && m.type === MessageType.MsgApp);
    c.campaign(5n);
    expect(c.node(5n).raw.raft.state).toBe(StateType.Leader);
    expect(c.node(5n).raw.raft.term).toBe(3);
    expect(c.node(5n).raw.raft.raftLog.term(idx)).toBe(3);
    c.restart(5n);
    // (c) S1 restarts and wins term 4 with S2, S3, S4. It replicates idx (term 2) to S3 but not
    //     yet its own term-4 no-op at idx+1.
    // S4 and S5 are unreachable; S3 receives idx but never anything after it.
    c.drop = (m) =>
      [4n, 5n].includes(m.from) ||
      [4n, 5n].includes(m.to) ||
      (m.to === 3n && m.type === MessageType.MsgApp && m.entries.some((e) => e.index > idx) && c.node(3n).raw.raft.raftLog.lastIndex() >= idx);
    c.campaign(1n); // term 3: S3 already voted for S5 in term 3
    c.campaign(1n); // term 4 with S2 and S3
    expect(c.node(1n).raw.raft.state).toBe(StateType.Leader);
    expect(c.node(1n).raw.raft.term).toBe(4);
    expect([1n, 2n, 3n].map((id) => c.node(id).raw.raft.raftLog.term(idx))).toEqual([2, 2, 2]);
    // Stored on a majority, but from an earlier term: not committed.
    expect(c.node(1n).raw.raft.raftLog.committed).toBeLessThan(idx);
    // (d) S1 crashes; S5 can win (its last term 3 beats term 2) and overwrites idx everywhere.
    c.restart(1n);
    c.drop = (m) => m.from === 1n || m.to === 1n;
    for (let i = 0; i < 3 && c.node(5n).raw.raft.state !== StateType.Leader; i++) c.campaign(5n);
    expect(c.node(5n).raw.raft.state).toBe(StateType.Leader);
    c.stabilize();
    for (const id of [2n, 3n, 4n, 5n]) expect(c.node(id).raw.raft.raftLog.term(idx)).toBe(3);
    for (const id of [1n, 2n, 3n, 4n, 5n]) expect([...c.node(id).applied.values()]).not.toContain("a");
  });

  it("Figure 8 (e): once an entry of the current term is on a majority, earlier entries commit with it", () => {
    const c = new Cluster([1n, 2n, 3n, 4n, 5n]);
    c.campaign(1n);
    c.drop = (m) => !((m.from === 1n && m.to === 2n) || (m.from === 2n && m.to === 1n));
    c.node(1n).raw.propose(enc("a"));
    c.stabilize();
    expect(c.node(1n).applied.size).toBe(0);
    c.restart(1n);
    c.drop = (m) => m.from === 4n || m.to === 4n || m.from === 5n || m.to === 5n;
    c.campaign(1n); // term 3 with S2 and S3; its no-op reaches both
    expect(c.node(1n).raw.raft.state).toBe(StateType.Leader);
    c.stabilize();
    expect([...c.node(1n).applied.values()]).toEqual(["a"]);
    expect([...c.node(3n).applied.values()]).toEqual(["a"]);
  });

  it("fast backtracking skips a follower's whole divergent term in one round trip", () => {
    const c = new Cluster([1n, 2n, 3n]);
    c.campaign(1n); // term 2
    // The old leader, cut off, appends 100 entries nobody else gets.
    c.isolate(1n);
    for (let i = 0; i < 100; i++) c.node(1n).raw.propose(enc(`stale-${i}`));
    c.stabilize();
    c.campaign(2n); // term 3 with S3
    for (let i = 0; i < 20; i++) c.node(2n).raw.propose(enc(`good-${i}`));
    c.stabilize();
    // A later leader (term 4) starts probing S1 at the end of its longer log.
    c.restart(2n);
    c.campaign(2n);
    expect(c.node(2n).raw.raft.state).toBe(StateType.Leader);
    c.heal();
    const since = c.delivered.length;
    c.tickAll(3);
    const rejections = c.delivered.slice(since).filter((m) => m.type === MessageType.MsgAppResp && m.from === 1n && m.reject);
    // Without the (index, term) hint this would take one probe per divergent entry (≥ 20).
    expect(rejections.length).toBeGreaterThan(0);
    expect(rejections.length).toBeLessThanOrEqual(2);
    const l1 = c.node(1n).raw.raft.raftLog;
    expect(l1.lastIndex()).toBe(c.node(2n).raw.raft.raftLog.lastIndex());
    expect([...c.node(1n).applied.values()]).toEqual(Array.from({ length: 20 }, (_, i) => `good-${i}`));
  });

  it("fast backtracking also works when the follower has entries of a higher term", () => {
    const c = new Cluster([1n, 2n, 3n]);
    c.campaign(1n); // term 2
    c.isolate(1n);
    c.campaign(2n); // term 3, cut off right after its no-op reaches 3
    c.isolate(2n);
    for (let i = 0; i < 50; i++) c.node(2n).raw.propose(enc(`stale-${i}`));
    c.stabilize();
    c.heal();
    c.drop = (m) => m.from === 2n || m.to === 2n;
    c.campaign(3n); // term 4 with S1
    for (let i = 0; i < 60; i++) c.node(3n).raw.propose(enc(`good-${i}`));
    c.stabilize();
    c.restart(3n);
    c.campaign(3n); // term 5: probes S2 from the end of its log
    expect(c.node(3n).raw.raft.state).toBe(StateType.Leader);
    c.heal();
    const since = c.delivered.length;
    c.tickAll(3);
    const rejections = c.delivered.slice(since).filter((m) => m.type === MessageType.MsgAppResp && m.from === 2n && m.reject);
    expect(rejections.length).toBeGreaterThan(0);
    expect(rejections.length).toBeLessThanOrEqual(2);
    expect([...c.node(2n).applied.values()].filter((v) => v.startsWith("stale"))).toEqual([]);
    expect(c.node(2n).applied.size).toBe(60);
  });
});

describe("flow control", () => {
  it("probe until the follower answers, then replicate with a bounded inflight window", () => {
    const c = new Cluster([1n, 2n, 3n], { maxInflightMsgs: 2, maxSizePerMsg: 1 });
    c.campaign(1n);
    const l = c.node(1n).raw;
    expect(l.status().progress?.get(2n)?.state).toBe(ProgressState.Replicate);
    // Follower 2 stops answering: at most 2 MsgApps (one entry each) may be in flight.
    c.drop = (m) => m.to === 2n || m.from === 2n;
    for (let i = 0; i < 10; i++) l.propose(enc(`e${i}`));
    const msgs = c.readyMessages(1n);
    expect(apps(msgs, 2n).length).toBe(2);
    expect(apps(msgs, 3n).length).toBe(2);
    expect(apps(msgs, 3n).every((m) => m.entries.length === 1)).toBe(true);
    for (const m of msgs) c.deliver(m);
    c.stabilize();
    // 3 acknowledges and drains the rest; 2 stays paused with its window full.
    expect(c.node(3n).applied.size).toBe(10);
    expect(l.status().progress?.get(2n)?.paused).toBe(true);
    expect(l.status().progress?.get(2n)?.inflight).toBe(2);
    // Unreachable: back to probing, one message at a time.
    l.reportUnreachable(2n);
    expect(l.status().progress?.get(2n)?.state).toBe(ProgressState.Probe);
    c.heal();
    c.tickAll(2);
    expect(l.status().progress?.get(2n)?.state).toBe(ProgressState.Replicate);
    expect(c.node(2n).applied.size).toBe(10);
  });

  it("the inflight window is also bounded by bytes", () => {
    const c = new Cluster([1n, 2n, 3n], { maxInflightMsgs: 100, maxInflightBytes: 1000, maxSizePerMsg: 300 });
    c.campaign(1n);
    c.drop = (m) => m.to === 2n;
    const l = c.node(1n).raw;
    for (let i = 0; i < 20; i++) l.propose(new Uint8Array(200));
    const sent = apps(c.readyMessages(1n), 2n);
    const bytes = sent.reduce((s, m) => s + m.entries.reduce((t, e) => t + e.data.byteLength + 16, 0), 0);
    expect(bytes).toBeGreaterThanOrEqual(1000);
    expect(bytes).toBeLessThan(1000 + 300);
    expect(sent.length).toBeLessThan(20);
  });

  it("a message carries at most maxSizePerMsg bytes of entries (but at least one entry)", () => {
    const c = new Cluster([1n, 2n, 3n], { maxSizePerMsg: 500 });
    c.campaign(1n);
    const l = c.node(1n).raw;
    l.proposeBatch(Array.from({ length: 10 }, () => new Uint8Array(200)));
    l.propose(new Uint8Array(2000));
    const sent = apps(c.readyMessages(1n), 2n);
    for (const m of sent) {
      const size = m.entries.reduce((t, e) => t + e.data.byteLength + 16, 0);
      expect(m.entries.length === 1 || size <= 500).toBe(true);
    }
    expect(sent.reduce((n, m) => n + m.entries.length, 0)).toBe(11);
  });
});

describe("batching", () => {
  it("proposals between two Ready cycles leave in one MsgApp per follower", () => {
    const c = new Cluster([1n, 2n, 3n]);
    c.campaign(1n);
    const l = c.node(1n).raw;
    for (let i = 0; i < 50; i++) l.propose(enc(`p${i}`));
    l.proposeBatch([enc("b1"), enc("b2")]);
    const msgs = c.readyMessages(1n);
    expect(apps(msgs, 2n).length).toBe(1);
    expect(apps(msgs, 3n).length).toBe(1);
    expect(apps(msgs, 2n)[0].entries.length).toBe(52);
    for (const m of msgs) c.deliver(m);
    c.stabilize();
    expect(c.node(3n).applied.size).toBe(52);
  });

  it("a follower forwards its queued proposals to the leader as one MsgProp", () => {
    const c = new Cluster([1n, 2n, 3n]);
    c.campaign(1n);
    const f = c.node(2n).raw;
    for (let i = 0; i < 20; i++) f.propose(enc(`f${i}`));
    const props = c.readyMessages(2n).filter((m) => m.type === MessageType.MsgProp);
    expect(props.length).toBe(1);
    expect(props[0].to).toBe(1n);
    expect(props[0].entries.length).toBe(20);
    c.deliver(props[0]);
    c.stabilize();
    expect([...c.node(3n).applied.values()]).toEqual(Array.from({ length: 20 }, (_, i) => `f${i}`));
  });

  it("the leader refuses proposals beyond maxUncommittedEntriesSize", () => {
    const c = new Cluster([1n, 2n, 3n], { maxUncommittedEntriesSize: 1000 });
    c.campaign(1n);
    c.drop = () => true; // nothing commits
    const l = c.node(1n).raw;
    for (let i = 0; i < 5; i++) l.propose(new Uint8Array(200));
    expect(() => l.propose(new Uint8Array(200))).toThrow(/too many uncommitted entries/);
    c.heal();
    c.tickAll(2);
    l.propose(new Uint8Array(200)); // room again once committed and applied
  });
});
