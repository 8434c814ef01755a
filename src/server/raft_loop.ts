/**
 * The member's Raft loop (etcd's raftNode + applyAll): drives the RawNode. Each turn hands the
 * proposals of the turn to raft as one batch, then for every Ready:
 *   persist (one fdatasync) ∥ apply the entries already durable → send → install a snapshot →
 *   apply the rest → answer ReadIndex rounds → advance.
 * Messages go out before the write when raft allows it (the leader; or a Ready promising nothing
 * durable). Every --snapshot-count applied entries it takes a snapshot, off the loop (as etcd
 * saves its snapshot in a goroutine): the backend's commit is made at once, at the applied index,
 * while its fsyncs, the snapshot file, the WAL marker and the release of old segments run beside
 * the next Readies, at most one snapshot at a time. Before, the loop awaited all of it (six
 * fsyncs), so every --snapshot-count entries the member stopped sending, persisting and applying
 * for as long as the disk took (up to 755 ms measured under load, longer than an election timeout
 * of 500 ms: the leader's heartbeats went out late and it lost leadership). A failure in the loop,
 * or in a snapshot it started, is fatal: the member cannot continue on a state it did not persist
 * or apply.
 *
 * The loop keeps the member's view of raft (leader, term, commit and applied index, configuration)
 * for everyone else to read.
 */
import { RaftInvariantError, type RawNode, type Ready } from "../raft/index.js";
import { MessageType, NONE, StateType, type ConfChangeV2, type ConfState, type Entry, type Message, type NodeId, type SoftState } from "../raft/types.js";
import type { ApplyOutcome } from "./apply.js";
import { Errors } from "./errors.js";
import type { Logger } from "./logger.js";
import { formatId } from "./member.js";
import type { Proposals } from "./proposals.js";
import type { RaftStorage } from "./raft_storage.js";
import type { ReadIndex } from "./read_index.js";
import type { Snapshots } from "./snapshots.js";
import type { SnapshotBody } from "./transport/snapshot_body.js";
import type { SnapshotBase } from "./snapshot_delta_format.js";
import type { WaitTime } from "./wait_time.js";

/** Entries applied per turn before yielding to the event loop. */
const APPLY_BATCH_MAX = 1024;

export interface RaftLoopOptions {
  memberId: NodeId;
  raw: RawNode;
  /** Persists each Ready; `memory` is what raft reads (its last index: what is durable). */
  storage: { persist: RaftStorage["persist"]; memory: { lastIndex(): number } };
  /** Sends plain messages to peers (MsgSnap goes through `snapshots` first). */
  send(msgs: Message[]): void;
  /** Sends a merged MsgSnap whose data is read from `body` as it goes out. */
  sendSnapshot(m: Message, body: SnapshotBody): void;
  /** Asks the follower what its backend holds, so only what changed is sent (issue 19); undefined: the full image. */
  snapshotBase?(to: NodeId): Promise<SnapshotBase | undefined>;
  /** Applies one committed entry; returns the request id and outcome when a handler may wait. */
  apply(e: Entry): { id: number; outcome: ApplyOutcome } | undefined;
  proposals: Proposals;
  readIndex: ReadIndex;
  applyWait: WaitTime;
  snapshots: Pick<Snapshots, "take" | "stage" | "install" | "image" | "discardReceivedUpTo">;
  /** --snapshot-count. */
  snapshotCount: number;
  /** How long a leadership transfer may take. */
  transferTimeoutMs: number;
  /** Where raft starts: the snapshot it recovered (index 0 without one) and its configuration. */
  snapshotIndex: number;
  confState: ConfState;
  /** The member became leader (true) or stopped being leader (false). */
  onLeadership(isLeader: boolean): void;
  /** The leader changed (to a new leader or to none). */
  onLeaderChange(lead: NodeId): void;
  /** A received snapshot was installed (the membership may have changed). */
  onSnapshotInstalled(): void;
  /** The loop failed; the member must stop. */
  onFatal(err: Error): void;
  logger: Logger;
  raftLogger: Logger;
}

export class RaftLoop {
  private leaderId: NodeId = NONE;
  private raftState: StateType = StateType.Follower;
  private term = 0;
  private committedIndex = 0;
  private appliedIndex: number;
  private snapshotIndex: number;
  private confState: ConfState;
  private readyScheduled = false;
  private running = false;
  private again = false;
  private stopped = false;
  private failed = false;
  private campaignedAlone = false;
  /**
   * A member was added since the last snapshot: raft sends a member that needs one only a
   * snapshot whose configuration holds it (raft.ts maybeSendSnapshot), so the next is taken
   * at once rather than after --snapshot-count more entries (which an idle cluster never writes:
   * a learner added after the last snapshot of a compacted log waited forever).
   */
  private memberAddedSinceSnapshot = false;
  /** The snapshot being saved, off the loop: at most one at a time. */
  private saving: Promise<void> | undefined;
  private readonly leaderWatchers = new Set<() => void>();

  constructor(private readonly o: RaftLoopOptions) {
    this.appliedIndex = Math.max(o.snapshotIndex, 0);
    this.snapshotIndex = o.snapshotIndex;
    this.confState = o.confState;
    o.applyWait.trigger(this.appliedIndex);
  }

  // ------------------------------------------------------------------ the member's view of raft

  leader(): NodeId {
    return this.leaderId;
  }
  isLeader(): boolean {
    return this.raftState === StateType.Leader;
  }
  raftTerm(): number {
    return this.term;
  }
  committed(): number {
    return this.committedIndex;
  }
  applied(): number {
    return this.appliedIndex;
  }
  isLearner(): boolean {
    return this.confState.learners.includes(this.o.memberId);
  }

  // ------------------------------------------------------------------ input

  /**
   * A message from a peer; one raft refuses is logged and dropped. A broken invariant is fatal, as
   * etcd's raft panics: raft may have changed its state half-way, and a member that only logged it
   * (e.g. a commit index past its own log after a lost WAL: "tocommit(x) is out of range") would
   * refuse every heartbeat for good while looking alive.
   */
  step(m: Message): void {
    if (this.stopped) return;
    try {
      this.o.raw.step(m);
    } catch (err) {
      if (err instanceof RaftInvariantError) return this.fail(err, { type: MessageType[m.type], from: formatId(m.from) });
      this.o.raftLogger.warn({ err: String(err), type: MessageType[m.type], from: formatId(m.from) }, "dropped a peer message raft refused");
    }
    this.schedule();
  }

  /** raft's ApplyConfChange; the applier runs it for every conf-change entry, replayed ones included. */
  applyConfChange(cc: ConfChangeV2): ConfState {
    const before = this.confState;
    this.confState = this.o.raw.applyConfChange(cc);
    const known = new Set([...before.voters, ...before.learners, ...before.votersOutgoing, ...before.learnersNext]);
    if ([...this.confState.voters, ...this.confState.learners].some((id) => !known.has(id))) this.memberAddedSinceSnapshot = true;
    return this.confState;
  }

  /** Runs the loop at the next turn (once, however often asked within a turn). */
  schedule(): void {
    if (this.stopped) return;
    // A run waiting on its Ready's write takes the new work when that is done (its `again`): a
    // turn of its own would only find it running and set the same flag. Under load a Ready's
    // write spans ~250 puts arriving over as many event-loop turns, and each turn's scheduling
    // was an Immediate and a closure (issue 18: ~1.5 per put, 190 B of the leader's 7.6 KB).
    if (this.running) {
      this.again = true;
      return;
    }
    if (this.readyScheduled) return;
    this.readyScheduled = true;
    setImmediate(this.runScheduled);
  }

  private readonly runScheduled = (): void => {
    this.readyScheduled = false;
    void this.run();
  };

  /** Stops after the turn in progress and the snapshot being saved (resolves when both are over). */
  async stop(): Promise<void> {
    this.stopped = true;
    while (this.running) await new Promise((r) => setTimeout(r, 5));
    await this.saving;
  }

  /** etcd's MoveLeader: only the leader transfers, to a voter, within the transfer timeout. */
  async moveLeader(transferee: NodeId): Promise<void> {
    if (!this.isLeader()) throw Errors.notLeader();
    // Moving leadership to the current leader is done already (etcd answers OK).
    if (transferee === this.o.memberId) return;
    if (!this.confState.voters.includes(transferee)) throw Errors.badLeaderTransferee();
    this.o.raw.transferLeader(transferee);
    this.schedule();
    const deadline = Date.now() + this.o.transferTimeoutMs;
    while (this.leaderId !== transferee) {
      const left = deadline - Date.now();
      if (left <= 0) throw Errors.timeoutLeaderTransfer();
      await this.waitLeaderChange(left);
    }
    this.o.logger.info({ from: formatId(this.o.memberId), to: formatId(transferee) }, "leadership transferred");
  }

  /** Resolves on the next leader change (or after `timeoutMs`). */
  private waitLeaderChange(timeoutMs: number): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(t);
        this.leaderWatchers.delete(done);
        resolve();
      };
      const t = setTimeout(done, timeoutMs);
      this.leaderWatchers.add(done);
    });
  }

  // ------------------------------------------------------------------ the loop

  private async run(): Promise<void> {
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = true;
    try {
      do {
        this.again = false;
        this.o.proposals.flush(this.o.raw);
        while (!this.stopped && this.o.raw.hasReady()) await this.handleReady(this.o.raw.ready());
        if (!this.stopped && this.snapshotDue()) this.startSnapshot();
      } while (this.again && !this.stopped);
    } catch (err) {
      this.fail(err as Error, {});
    } finally {
      this.running = false;
    }
  }

  private fail(err: Error, fields: Record<string, string | undefined>): void {
    if (this.failed) return;
    this.failed = true;
    this.o.logger.fatal({ ...fields, err: String(err), stack: err.stack }, "raft loop failed; stopping the member");
    this.stopped = true;
    this.o.onFatal(err);
  }

  private async handleReady(rd: Ready): Promise<void> {
    if (rd.softState) this.onSoftState(rd.softState);
    if (rd.hardState) {
      this.term = rd.hardState.term;
      this.committedIndex = Math.max(this.committedIndex, rd.hardState.commit);
    }
    let snapshot = rd.snapshot;
    // A received snapshot replaces raft's log and the backend: the local one being saved (its
    // backend fsync, its marker at a lower index) completes first.
    if (snapshot !== undefined) await this.saving;
    if (snapshot !== undefined && snapshot.data.length > 0) snapshot = await this.o.snapshots.stage(snapshot);
    // The leader may send before its own write (see rawnode.ts); any node may when the Ready
    // promises nothing durable (no entries, snapshot, term or vote: only the commit index moved).
    const sendEarly = rd.canSendBeforePersist || (!rd.mustSync && rd.entries.length === 0 && snapshot === undefined);
    if (sendEarly) this.send(rd.messages);

    // Entries durable in earlier Readies are applied while this Ready's fsync runs.
    const durableLast = snapshot === undefined ? this.o.storage.memory.lastIndex() : 0;
    const cut = rd.committedEntries.findIndex((e) => e.index > durableLast);
    const early = cut === -1 ? rd.committedEntries : rd.committedEntries.slice(0, cut);
    const late = cut === -1 ? [] : rd.committedEntries.slice(cut);
    const persisting = this.o.storage.persist(rd.hardState, rd.entries, snapshot);
    await this.applyEntries(early);
    await persisting;

    if (!sendEarly) this.send(rd.messages);
    if (snapshot !== undefined) await this.installSnapshot(snapshot.metadata.index, snapshot.metadata.confState);
    await this.applyEntries(late);
    await this.o.snapshots.discardReceivedUpTo(this.committedIndex);
    if (rd.readStates.length > 0) this.o.readIndex.onReadStates(rd.readStates);
    this.o.raw.advance(rd);
    this.campaignIfAlone();
  }

  private send(msgs: Message[]): void {
    if (msgs.length === 0) return;
    const plain: Message[] = [];
    for (const m of msgs) {
      if (m.type === MessageType.MsgSnap) void this.sendSnapshot(m);
      else plain.push(m);
    }
    this.o.send(plain);
  }

  private async sendSnapshot(m: Message): Promise<void> {
    try {
      const base = await this.o.snapshotBase?.(m.to);
      const { message, body } = await this.o.snapshots.image(m, base);
      this.o.sendSnapshot(message, body);
    } catch (err) {
      this.o.logger.warn({ to: formatId(m.to), err: String(err) }, "failed to send snapshot");
      this.o.raw.reportSnapshot(m.to, true);
      this.schedule();
    }
  }

  private async installSnapshot(index: number, confState: ConfState): Promise<void> {
    // Every store (leases, keys, alarms, members) reloads from the image; watchers catch up.
    const consistentIndex = await this.o.snapshots.install(index);
    this.confState = confState;
    // The image may hold entries past the snapshot (it was copied when sent, after the snapshot's
    // index). They are not counted as applied: raft's log may not hold them yet, and a snapshot
    // taken at such an index failed ("snapshot N is out of bound lastindex(M)", the member stopped).
    // They come as committed entries like any other; the applier skips what the backend already
    // holds (its consistent index) and still hands conf changes to raft, as etcd does.
    if (consistentIndex < index) throw new Error(`installed snapshot image holds entries up to ${consistentIndex} only, older than the snapshot's index ${index}`);
    this.appliedIndex = index;
    this.snapshotIndex = index;
    this.o.onSnapshotInstalled();
    this.o.logger.info({ index, appliedIndex: this.appliedIndex }, "applied incoming snapshot");
    this.o.applyWait.trigger(this.appliedIndex);
  }

  private async applyEntries(entries: readonly Entry[]): Promise<void> {
    for (let i = 0; i < entries.length; i++) {
      const e = entries[i]!;
      if (e.index <= this.appliedIndex) continue;
      if (e.index !== this.appliedIndex + 1) {
        throw new Error(`apply: entry ${e.index} is not the next after applied index ${this.appliedIndex}`);
      }
      const r = this.o.apply(e);
      this.appliedIndex = e.index;
      if (r !== undefined) this.o.proposals.applied(r.id, r.outcome);
      if ((i + 1) % APPLY_BATCH_MAX === 0) {
        this.o.applyWait.trigger(this.appliedIndex);
        await new Promise<void>((res) => setImmediate(res));
      }
    }
    if (entries.length > 0) this.o.applyWait.trigger(this.appliedIndex);
  }

  private snapshotDue(): boolean {
    if (this.saving !== undefined) return false;
    const since = this.appliedIndex - this.snapshotIndex;
    // Before the first snapshot the log is whole from index 1: a new member catches up from it.
    return since > this.o.snapshotCount || (this.memberAddedSinceSnapshot && since > 0 && this.snapshotIndex > 0);
  }

  /**
   * Starts saving a snapshot at the applied index without waiting for it. Snapshots.take commits
   * the backend synchronously, here, before any later entry is applied, so the backend holds
   * exactly `index` when its fsyncs begin; the rest (fsyncs, file, marker, release) runs while
   * the loop goes on. The loop checks again when it is done (a member added meanwhile, or
   * --snapshot-count passed again).
   */
  private startSnapshot(): void {
    const index = this.appliedIndex;
    this.memberAddedSinceSnapshot = false;
    this.snapshotIndex = index;
    this.saving = this.o.snapshots.take(index, this.term, this.confState).then(
      () => {
        this.saving = undefined;
        this.schedule();
      },
      (err: unknown) => {
        this.saving = undefined;
        this.fail(err instanceof Error ? err : new Error(String(err)), { snapshotIndex: String(index) });
      },
    );
  }

  /**
   * A member that is the only voter need not wait an election timeout (etcd fast-forwards its
   * election ticks): once its configuration is applied it campaigns at once.
   */
  private campaignIfAlone(): void {
    if (this.campaignedAlone || this.leaderId !== NONE) return;
    const v = this.confState.voters;
    if (v.length === 1 && v[0] === this.o.memberId && this.confState.votersOutgoing.length === 0) {
      this.campaignedAlone = true;
      this.o.raw.campaign();
      this.schedule();
    }
  }

  private onSoftState(ss: SoftState): void {
    const wasLeader = this.raftState === StateType.Leader;
    const leaderChanged = ss.lead !== this.leaderId;
    this.raftState = ss.raftState;
    this.leaderId = ss.lead;
    const isLeader = ss.raftState === StateType.Leader;
    if (leaderChanged) {
      const term = this.o.raw.status().hardState.term;
      if (ss.lead === NONE) this.o.raftLogger.info({ term }, "lost leader");
      else if (isLeader) this.o.raftLogger.info({ term, memberId: formatId(this.o.memberId) }, "elected leader (this member)");
      else this.o.raftLogger.info({ term, leader: formatId(ss.lead) }, "became follower of leader");
      this.o.onLeaderChange(ss.lead);
      for (const w of [...this.leaderWatchers]) w();
    }
    if (isLeader !== wasLeader) this.o.onLeadership(isLeader);
  }
}
