/**
 * The Ready loop driving a real single-voter RawNode over in-memory storage, with the real
 * proposal registry, ReadIndex rounds and applier on temp stores, and fakes for the transport and
 * the snapshots: the bootstrap configuration is applied and the lone voter campaigns at once; a
 * proposal is answered once applied; a linearizable read is released after its round; a snapshot
 * is taken past --snapshot-count, saved off the loop (proposals are answered while it is saved, one
 * at a time, a received snapshot waits for it, stop waits for it, its failure is fatal); a storage
 * failure, or a peer message that breaks a raft invariant, is fatal and stops the loop.
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

/** A snapshot save the test finishes by hand (Snapshots.take stands in for the disk). */
interface HeldTake {
  index: number;
  finish(): void;
  fail(err: Error): void;
}

function setup(o: { snapshotCount?: number; failPersist?: () => boolean; holdTakes?: boolean } = {}) {
  const stores = memberStores();
  const memory = new MemoryStorage();
  const raw = new RawNode({ id: ID, electionTick: 10, heartbeatTick: 1, storage: memory, random: () => 0.5 });
  raw.bootstrap([ID]);
  const t = { sent: [] as Message[], taken: [] as number[], held: [] as HeldTake[], staged: [] as number[], leadership: [] as boolean[], fatal: [] as Error[], persists: 0 };
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
    take: (index: number) => {
      t.taken.push(index);
      if (o.holdTakes !== true) return Promise.resolve();
      return new Promise<void>((finish, fail) => t.held.push({ index, finish, fail }));
    },
    stage: async (s: Snapshot) => {
      t.staged.push(s.metadata.index);
      return s;
    },
    discardReceivedUpTo: async () => undefined,
    install: async (index: number) => index,
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

  it("a snapshot being saved does not hold the loop: entries apply meanwhile, one save at a time, the next once it is done", async () => {
    const { t, loop, proposals, kv } = setup({ snapshotCount: 3, holdTakes: true });
    loop.schedule();
    await until(() => loop.isLeader(), "leadership");
    for (let i = 0; i < 4; i++) await proposals.propose({ put: { key: Buffer.from(`k${i}`), value: Buffer.from("v") } });
    await until(() => t.held.length === 1, "a snapshot save started");
    const first = t.held[0]!;
    // Its disk work is not done, yet proposals are answered (before, the loop awaited it: they waited).
    for (let i = 0; i < 10; i++) {
      const put = proposals.propose({ put: { key: Buffer.from(`during${i}`), value: Buffer.from("v") } });
      const r = await Promise.race([put, new Promise<"held">((res) => setTimeout(() => res("held"), 2000))]);
      expect(r, "a proposal answered while the snapshot is being saved").not.toBe("held");
    }
    expect(loop.applied()).toBeGreaterThan(first.index + 3);
    expect(kv.consistentIndex()).toBe(loop.applied());
    expect(t.taken, "no second save while one is in flight").toEqual([first.index]);
    first.finish();
    await until(() => t.taken.length === 2, "the next snapshot, once the first is saved");
    expect(t.taken[1]).toBe(loop.applied());
    // stop() waits for the save in flight.
    let stopped = false;
    const stopping = loop.stop().then(() => (stopped = true));
    await new Promise((r) => setTimeout(r, 20));
    expect(stopped, "stop waits for the snapshot being saved").toBe(false);
    t.held[1]!.finish();
    await stopping;
    expect(t.fatal).toEqual([]);
  });

  it("a received snapshot is staged only once the local snapshot being saved is done", async () => {
    const { t, loop, proposals } = setup({ snapshotCount: 3, holdTakes: true });
    loop.schedule();
    await until(() => loop.isLeader(), "leadership");
    for (let i = 0; i < 4; i++) await proposals.propose({ put: { key: Buffer.from(`k${i}`), value: Buffer.from("v") } });
    await until(() => t.held.length === 1, "a snapshot save started");
    // A leader of a later term sends a snapshot far ahead.
    const confState = { voters: [ID, 2n], learners: [], votersOutgoing: [], learnersNext: [], autoLeave: false };
    loop.step(newMessage({ type: MessageType.MsgSnap, from: 2n, to: ID, term: 50, snapshot: { metadata: { index: 1000, term: 50, confState }, data: new Uint8Array([1]) } }));
    await new Promise((r) => setTimeout(r, 30));
    expect(t.staged, "nothing staged while the local save runs").toEqual([]);
    t.held[0]!.finish();
    await until(() => t.staged.length === 1, "the received snapshot staged");
    expect(t.staged).toEqual([1000]);
    await until(() => loop.applied() === 1000, "the received snapshot installed");
    await loop.stop();
    expect(t.fatal).toEqual([]);
  });

  it("a snapshot that fails to save is fatal, reported once", async () => {
    const { t, loop, proposals } = setup({ snapshotCount: 3, holdTakes: true });
    loop.schedule();
    await until(() => loop.isLeader(), "leadership");
    for (let i = 0; i < 4; i++) await proposals.propose({ put: { key: Buffer.from(`k${i}`), value: Buffer.from("v") } });
    await until(() => t.held.length === 1, "a snapshot save started");
    t.held[0]!.fail(new Error("injected snapshot fsync failure"));
    await until(() => t.fatal.length > 0, "the fatal report");
    expect(t.fatal.map((e) => e.message)).toEqual(["injected snapshot fsync failure"]);
    const persists = t.persists;
    loop.schedule();
    await new Promise((r) => setTimeout(r, 20));
    expect(t.persists).toBe(persists);
    proposals.stop();
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
