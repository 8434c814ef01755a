/**
 * The Ready loop driving a real single-voter RawNode over in-memory storage, with the real
 * proposal registry, ReadIndex rounds and applier on temp stores, and fakes for the transport and
 * the snapshots: the bootstrap configuration is applied and the lone voter campaigns at once; a
 * proposal is answered once applied; a linearizable read is released after its round; a snapshot
 * is taken past --snapshot-count; a storage failure, or a peer message that breaks a raft
 * invariant, is fatal and stops the loop.
 */
import { memorySnapshotBody } from "../../src/server/transport/snapshot_body.js";
import { describe, expect, it } from "vitest";
import { MemoryStorage, RawNode } from "../../src/raft/index.js";
import { newMessage } from "../../src/raft/raft.js";
import { ConfChangeTransition, ConfChangeType, MessageType, type Entry, type HardState, type Message, type Snapshot } from "../../src/raft/types.js";
import { Applier } from "../../src/server/apply.js";
import { IdGenerator } from "../../src/server/id_gen.js";
import { silentLogger } from "../../src/server/logger.js";
import type { Member } from "../../src/server/member.js";
import { Proposals } from "../../src/server/proposals.js";
import { RaftLoop, type RaftLoopOptions } from "../../src/server/raft_loop.js";
import { ReadIndex } from "../../src/server/read_index.js";
import { WaitTime } from "../../src/server/wait_time.js";
import { memberStores } from "./stores.js";

const ID = 1n;
const ME: Member = { id: ID, name: "n1", peerUrls: ["http://127.0.0.1:1"], clientUrls: [], isLearner: false };

function setup(o: { snapshotCount?: number; failPersist?: () => boolean } = {}) {
  const stores = memberStores();
  const memory = new MemoryStorage();
  const raw = new RawNode({ id: ID, electionTick: 10, heartbeatTick: 1, storage: memory, random: () => 0.5 });
  raw.bootstrap([ID]);
  const t = { sent: [] as Message[], taken: [] as number[], leadership: [] as boolean[], fatal: [] as Error[], persists: 0 };
  const storage: RaftLoopOptions["storage"] = {
    memory,
    async persist(hs: HardState | undefined, entries: Entry[], snap: Snapshot | undefined): Promise<void> {
      t.persists++;
      if (o.failPersist?.()) throw new Error("injected fsync failure");
      if (snap !== undefined) memory.applySnapshot(snap);
      if (hs !== undefined) memory.setHardState(hs);
      if (entries.length > 0) memory.append(entries);
    },
  };
  const snapshots: RaftLoopOptions["snapshots"] = {
    take: async (index: number) => void t.taken.push(index),
    stage: async (s: Snapshot) => s,
    discardReceivedUpTo: async () => undefined,
    install: async () => 0,
    image: async (m: Message) => ({ message: m, body: memorySnapshotBody(new Uint8Array(0)) }),
  };
  const applyWait = new WaitTime();
  const wake = () => loop.schedule();
  const proposals = new Proposals({
    ids: new IdGenerator(ID, 0),
    maxRequestBytes: 1 << 20,
    requestTimeoutMs: 5000,
    now: () => performance.now(),
    state: { committedIndex: () => loop.committed(), appliedIndex: () => loop.applied(), hasLeader: () => loop.leader() !== 0n },
    wake,
    failed: { inc: () => {} },
  });
  const readIndex = new ReadIndex({
    memberId: ID,
    requestTimeoutMs: 5000,
    readIndex: (ctx) => raw.readIndex(ctx),
    wake,
    waitApplied: (i) => applyWait.wait(i),
    failed: { inc: () => {} },
  });
  const applier = new Applier({
    ...stores,
    logger: silentLogger(),
    initialMembers: new Map([[ID, ME]]),
    applyConfChange: (cc) => loop.applyConfChange(cc),
    onMembershipChange: () => {},
  });
  const loop: RaftLoop = new RaftLoop({
    memberId: ID,
    raw,
    storage,
    send: (msgs) => t.sent.push(...msgs),
    sendSnapshot: (m) => t.sent.push(m),
    apply: (e) => applier.apply(e),
    proposals,
    readIndex,
    applyWait,
    snapshots,
    snapshotCount: o.snapshotCount ?? 10_000,
    transferTimeoutMs: 1000,
    snapshotIndex: 0,
    confState: { voters: [], learners: [], votersOutgoing: [], learnersNext: [], autoLeave: false },
    onLeadership: (isLeader) => t.leadership.push(isLeader),
    onLeaderChange: () => {},
    onSnapshotInstalled: () => {},
    onFatal: (err) => t.fatal.push(err),
    logger: silentLogger(),
    raftLogger: silentLogger(),
  });
  return { ...stores, t, loop, proposals, readIndex, applyWait };
}

async function until(cond: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 500 && !cond(); i++) await new Promise((r) => setTimeout(r, 2));
  if (!cond()) throw new Error(`timed out waiting for ${what}`);
}

describe("raft loop", () => {
  it("applies the bootstrap configuration, and the lone voter campaigns at once and leads", async () => {
    const { t, loop, membership } = setup();
    loop.schedule();
    await until(() => loop.isLeader(), "leadership");
    expect(loop.leader()).toBe(ID);
    expect(t.leadership).toEqual([true]);
    expect(membership.list().map((m) => m.id)).toEqual([ID]);
    expect(loop.applied()).toBeGreaterThanOrEqual(2); // the conf change and the new leader's empty entry
    expect(loop.committed()).toBe(loop.applied());
    expect(t.sent).toEqual([]);
    await loop.stop();
  });

  it("answers a proposal once its entry is applied, and a linearizable read after its round", async () => {
    const { loop, proposals, readIndex, kv } = setup();
    loop.schedule();
    await until(() => loop.isLeader(), "leadership");
    const put = await proposals.propose({ put: { key: Buffer.from("k"), value: Buffer.from("v") } });
    expect(put.error).toBeUndefined();
    expect(put.revision).toBe(2);
    expect(kv.consistentIndex()).toBe(loop.applied());
    await readIndex.notify();
    expect(kv.range({ key: Buffer.from("k") }).count).toBe(1);
    await loop.stop();
  });

  it("takes a snapshot once more than --snapshot-count entries were applied since the last", async () => {
    const { t, loop, proposals } = setup({ snapshotCount: 3 });
    loop.schedule();
    await until(() => loop.isLeader(), "leadership");
    for (let i = 0; i < 4; i++) await proposals.propose({ put: { key: Buffer.from(`k${i}`), value: Buffer.from("v") } });
    await until(() => t.taken.length > 0, "a snapshot");
    expect(t.taken[0]).toBeGreaterThan(3);
    expect(t.taken[0]).toBeLessThanOrEqual(loop.applied());
    await loop.stop();
  });

  it("takes a snapshot at once when a member was added since the last (raft sends none that predates its membership)", async () => {
    const { t, loop, proposals } = setup({ snapshotCount: 3 });
    loop.schedule();
    await until(() => loop.isLeader(), "leadership");
    for (let i = 0; i < 4; i++) await proposals.propose({ put: { key: Buffer.from(`k${i}`), value: Buffer.from("v") } });
    await until(() => t.taken.length > 0, "a snapshot");
    const before = t.taken.length;
    const last = t.taken[before - 1]!;
    await proposals.propose({ put: { key: Buffer.from("one-more"), value: Buffer.from("v") } });
    expect(loop.applied() - last).toBeLessThanOrEqual(3);
    expect(t.taken.length).toBe(before); // fewer than --snapshot-count entries since: no snapshot yet
    loop.applyConfChange({ transition: ConfChangeTransition.Auto, changes: [{ type: ConfChangeType.AddLearnerNode, nodeId: 2n }], context: new Uint8Array(0) });
    loop.schedule();
    await until(() => t.taken.length > before, "a snapshot holding the new member");
    expect(t.taken[before]!).toBe(loop.applied());
    expect(t.taken[before]! - last).toBeLessThanOrEqual(3);
    await loop.stop();
  });

  it("a storage failure is fatal: reported once, and the loop runs no more", async () => {
    let fail = false;
    const { t, loop, proposals } = setup({ failPersist: () => fail });
    loop.schedule();
    await until(() => loop.isLeader(), "leadership");
    fail = true;
    const lost = proposals.propose({ put: { key: Buffer.from("k"), value: Buffer.from("v") } });
    await until(() => t.fatal.length > 0, "the fatal report");
    expect(t.fatal[0]!.message).toBe("injected fsync failure");
    const persists = t.persists;
    loop.schedule();
    await new Promise((r) => setTimeout(r, 20));
    expect(t.persists).toBe(persists);
    expect(t.fatal.length).toBe(1);
    proposals.stop();
    await expect(lost).rejects.toThrow("etcdserver: server stopped");
  });

  it("a peer message that breaks a raft invariant is fatal (etcd's raft panics), not dropped", async () => {
    const { t, loop, proposals } = setup();
    loop.schedule();
    await until(() => loop.isLeader(), "leadership");
    const last = loop.applied();
    // A leader of a later term says entries up to 1000 are committed: this member's log ends far
    // before, so its log was lost or truncated (etcd: "Was the raft log corrupted, truncated, or lost?").
    loop.step(newMessage({ type: MessageType.MsgHeartbeat, from: 2n, to: ID, term: 99, commit: last + 1000 }));
    expect(t.fatal).toHaveLength(1);
    expect(t.fatal[0]!.message).toMatch(new RegExp(`tocommit\\(${last + 1000}\\) is out of range`));
    const persists = t.persists;
    loop.step(newMessage({ type: MessageType.MsgHeartbeat, from: 2n, to: ID, term: 99, commit: 0 }));
    loop.schedule();
    await new Promise((r) => setTimeout(r, 20));
    expect(t.persists).toBe(persists);
    expect(t.fatal).toHaveLength(1);
    proposals.stop();
  });
});
