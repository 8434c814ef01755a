/**
 * RawNode: the thin shell an application drives (etcd's raft.RawNode).
 *
 * ## The Ready loop
 * Inputs go in through tick(), step(), propose()/proposeBatch(), proposeConfChange(), readIndex(),
 * transferLeader() and the report*() calls. Whenever hasReady() is true the application takes
 * `rd = ready()` and must, in this order:
 *
 * 1. **Persist** `rd.hardState` (if present), `rd.entries` (append; the first entry may overwrite
 *    a suffix of the stored log: truncate from there) and `rd.snapshot` (if present: it replaces
 *    the stored log up to its index). When `rd.mustSync` is true the write must be durable
 *    (fsync) before step 2; when false (only the commit index changed) it may be lazy.
 * 2. **Send** `rd.messages`. Until step 1 is durable no message of this Ready may leave — with
 *    one exception, below. A message to an unreachable peer may be dropped (call
 *    reportUnreachable); MsgSnap delivery must be reported with reportSnapshot.
 * 3. **Apply** `rd.snapshot` to the state machine (if present), then `rd.committedEntries` in
 *    order. For a ConfChange/ConfChangeV2 entry call applyConfChange() with the decoded change
 *    (see confChangeFromEntry) before applying the next entry. `rd.readStates` are served once
 *    the applied index reaches their index. Committed entries may also appear in `rd.entries`
 *    of the same Ready: step 1 comes first, so they are durable when applied.
 * 4. **advance(rd)**. Only then may ready() be called again (it throws otherwise).
 *
 * ## The leader may send before its own fsync
 * When `rd.canSendBeforePersist` is true (this node is leader, the Ready carries no snapshot and
 * no change of term or vote) the application may send `rd.messages` before or while step 1 runs
 * (etcd does: the leader's disk write overlaps the followers' — Raft thesis §10.2.1). It is safe:
 * - The leader counts its own unflushed entries in its match index, so it may decide a commit
 *   with only (quorum − 1) followers durable. But that commit can only become visible — in
 *   committedEntries, in a HardState, or in the commit field of any message — through a later
 *   Ready, and a later Ready exists only after advance(rd), i.e. after this Ready was durable on
 *   the leader too. So whenever any node learns an index is committed, a real quorum has it.
 * - If the leader crashes before the write completes, its restarted log lacks entries that
 *   followers may hold. That is the ordinary situation of a follower holding uncommitted
 *   entries: the leader's term and vote were already durable (otherwise canSendBeforePersist is
 *   false), it can never lead that term again, so no other entry can appear with the same index
 *   and term, and the next leader resolves the suffix as usual.
 * Followers and candidates must always persist first: their votes and acknowledgements are
 * promises about what is on their disk.
 */
import { RaftUsageError } from "./assert.js";
import { encodeConfChangeV2 } from "./confchange_codec.js";
import { Raft, newMessage, type RaftConfig as RaftCoreConfig } from "./raft.js";
import type { ProgressState } from "./progress.js";
import {
  ConfChangeTransition,
  ConfChangeType,
  EMPTY_HARD_STATE,
  EntryType,
  MessageType,
  NONE,
  ProposalDroppedError,
  StateType,
  type ConfChangeV2,
  type ConfState,
  type Entry,
  type HardState,
  type Message,
  type NodeId,
  type ReadState,
  type Snapshot,
  type SoftState,
} from "./types.js";

/**
 * Configuration of one node. Defaults follow etcd's: maxSizePerMsg 1 MiB, maxInflightMsgs 256,
 * no byte limits, checkQuorum and preVote off (etcetera's server turns both on), "safe" reads.
 */
export type RaftConfig = RaftCoreConfig;

/** What the application must do between two advance() calls; see the module comment. */
export interface Ready {
  /** Present only when changed: the leader and this node's role. Not persisted. */
  softState?: SoftState;
  /** Present only when changed: must be persisted before messages are sent. */
  hardState?: HardState;
  /** Linearizable reads confirmed since the last Ready. */
  readStates: ReadState[];
  /** Entries to append to stable storage (may overwrite a suffix) BEFORE sending messages. */
  entries: Entry[];
  /** A snapshot to persist and apply (only ever on followers). */
  snapshot?: Snapshot;
  /** Entries to apply, in order, after entries/snapshot are persisted. */
  committedEntries: Entry[];
  /** Messages to send after persisting (see canSendBeforePersist for the leader's exception). */
  messages: Message[];
  /** The persisted write must be durable (fsync) before messages are sent. */
  mustSync: boolean;
  /** The messages may be sent before the write of this Ready completes (see the module comment). */
  canSendBeforePersist: boolean;
}

export interface ProgressStatus {
  match: number;
  next: number;
  state: ProgressState;
  isLearner: boolean;
  recentActive: boolean;
  paused: boolean;
  inflight: number;
  pendingSnapshot: number;
}

export interface Status {
  id: NodeId;
  hardState: HardState;
  softState: SoftState;
  applied: number;
  leadTransferee: NodeId;
  config: ConfState;
  /** Replication progress of every member; only on the leader. */
  progress?: Map<NodeId, ProgressStatus>;
}

const LOCAL_TYPES = new Set([
  MessageType.MsgHup,
  MessageType.MsgBeat,
  MessageType.MsgUnreachable,
  MessageType.MsgSnapStatus,
  MessageType.MsgCheckQuorum,
]);

const RESPONSE_TYPES = new Set([
  MessageType.MsgAppResp,
  MessageType.MsgVoteResp,
  MessageType.MsgHeartbeatResp,
  MessageType.MsgUnreachable,
  MessageType.MsgPreVoteResp,
]);

export class RawNode {
  /** The state machine itself; exposed for tests and status, not for driving. */
  readonly raft: Raft;
  private prevSoftSt: SoftState;
  private prevHardSt: HardState;
  private outstanding = false;

  constructor(config: RaftConfig) {
    this.raft = new Raft(config);
    this.prevSoftSt = this.raft.softState();
    this.prevHardSt = this.raft.hardState();
  }

  /**
   * Start a brand-new cluster member: the initial voters become committed ConfChangeV2 entries
   * 1..n at term 1 (as etcd's Bootstrap does with ConfChange entries). They come out in the first
   * Ready as entries to persist and as committed entries to apply (applyConfChange on them is a
   * no-op re-add). Storage must be empty. A member joining an existing cluster does not
   * bootstrap: it starts empty and learns the configuration from its leader. `contexts` gives an
   * entry's ConfChange context by peer (etcd puts each member's record there).
   */
  bootstrap(peers: NodeId[], contexts?: ReadonlyMap<NodeId, Uint8Array>): void {
    if (peers.length === 0) throw new RaftUsageError("must provide at least one peer to Bootstrap");
    if (this.raft.raftLog.lastIndex() !== 0) throw new RaftUsageError("can't bootstrap a nonempty Storage");
    // Nothing is persisted yet: the first Ready must carry the HardState.
    this.prevHardSt = { ...EMPTY_HARD_STATE };
    this.raft.becomeFollower(1, NONE);
    const ents: Entry[] = peers.map((id, i) => ({
      term: 1,
      index: i + 1,
      type: EntryType.ConfChangeV2,
      data: encodeConfChangeV2({ ...addNode(id), context: contexts?.get(id) ?? new Uint8Array(0) }),
    }));
    this.raft.raftLog.append(ents);
    // Committed but not applied: the application observes them in committedEntries.
    this.raft.raftLog.committed = ents.length;
    for (const id of peers) this.raft.applyConfChange(addNode(id));
  }

  tick(): void {
    this.raft.tick();
  }

  /** Become (pre-)candidate now, without waiting for the election timeout. */
  campaign(): void {
    this.raft.step(newMessage({ type: MessageType.MsgHup, from: this.raft.id }));
  }

  /** Propose one entry. Throws ProposalDroppedError ("no leader", "transfer in progress", ...). */
  propose(data: Uint8Array): void {
    this.proposeEntries([{ term: 0, index: 0, type: EntryType.Normal, data }]);
  }

  /** Propose several entries in one append (one MsgProp when forwarded). */
  proposeBatch(data: Uint8Array[]): void {
    if (data.length === 0) return;
    this.proposeEntries(data.map((d) => ({ term: 0, index: 0, type: EntryType.Normal, data: d })));
  }

  /**
   * Propose a membership change. On the leader a change that cannot be accepted now is refused
   * at once (ProposalDroppedError "conf change pending" / "invalid conf change"); a change
   * forwarded by a follower and refused by the leader becomes an empty normal entry, as in etcd.
   */
  proposeConfChange(cc: ConfChangeV2): void {
    const e: Entry = { term: 0, index: 0, type: EntryType.ConfChangeV2, data: encodeConfChangeV2(cc) };
    if (this.raft.state === StateType.Leader) {
      const refused = this.raft.refuseConfChange(e);
      if (refused !== undefined) {
        throw new ProposalDroppedError(refused.startsWith("possible unapplied") ? "conf change pending" : "invalid conf change");
      }
    }
    this.proposeEntries([e]);
  }

  private proposeEntries(entries: Entry[]): void {
    this.raft.step(newMessage({ type: MessageType.MsgProp, from: this.raft.id, entries }));
  }

  /** Apply a committed conf change entry's change; returns the configuration now in force. */
  applyConfChange(cc: ConfChangeV2): ConfState {
    return this.raft.applyConfChange(cc);
  }

  /**
   * Deliver a message from a peer. Local message types are ignored, as are responses from peers
   * that are not in the configuration; a forwarded proposal the leader cannot take is dropped
   * (the proposer times out).
   */
  step(m: Message): void {
    if (LOCAL_TYPES.has(m.type)) {
      this.raft.logger.warn(`${this.raft.id} ignoring local message type ${MessageType[m.type]} from the network`);
      return;
    }
    if (RESPONSE_TYPES.has(m.type) && !this.raft.prs.progress.has(m.from)) return;
    try {
      this.raft.step(m);
    } catch (e) {
      if (!(e instanceof ProposalDroppedError)) throw e;
      this.raft.logger.debug(`${this.raft.id} dropped forwarded proposal from ${m.from}: ${e.reason}`);
    }
  }

  /**
   * Request a linearizable read. `requestCtx` must be unique among pending reads; the result
   * arrives as a ReadState in a later Ready. Throws ProposalDroppedError("no leader") when no
   * leader is known (the read could only time out). Reads may still be lost with messages.
   */
  readIndex(requestCtx: Uint8Array): void {
    if (this.raft.lead === NONE) throw new ProposalDroppedError("no leader");
    this.raft.step(
      newMessage({ type: MessageType.MsgReadIndex, from: this.raft.id, entries: [{ term: 0, index: 0, type: EntryType.Normal, data: requestCtx }] }),
    );
  }

  /**
   * Ask the leader to hand leadership to `transferee`. The leader stops accepting proposals,
   * brings the transferee up to date and sends it MsgTimeoutNow; if that does not happen within
   * an election timeout the transfer is abandoned (status().leadTransferee returns to NONE).
   */
  transferLeader(transferee: NodeId): void {
    this.raft.step(newMessage({ type: MessageType.MsgTransferLeader, from: transferee }));
  }

  reportUnreachable(id: NodeId): void {
    this.raft.step(newMessage({ type: MessageType.MsgUnreachable, from: id }));
  }

  reportSnapshot(id: NodeId, failed: boolean): void {
    this.raft.step(newMessage({ type: MessageType.MsgSnapStatus, from: id, reject: failed }));
  }

  hasReady(): boolean {
    const r = this.raft;
    if (!softStateEqual(r.softState(), this.prevSoftSt)) return true;
    const hs = r.hardState();
    if (!isEmptyHardState(hs) && !hardStateEqual(hs, this.prevHardSt)) return true;
    if (r.raftLog.hasPendingSnapshot()) return true;
    if (r.msgs.length > 0 || r.raftLog.unstable.entries.length > 0 || r.raftLog.hasNextEnts()) return true;
    if (r.readStates.length > 0) return true;
    return r.hasPendingFlush();
  }

  ready(): Ready {
    if (this.outstanding) throw new RaftUsageError("ready() called before advance() of the previous Ready");
    const r = this.raft;
    r.flush();
    const softState = r.softState();
    const hardState = r.hardState();
    const rd: Ready = {
      readStates: r.readStates,
      entries: r.raftLog.unstableEntries(),
      committedEntries: r.raftLog.nextEnts(),
      messages: r.msgs,
      mustSync: false,
      canSendBeforePersist: false,
    };
    if (!softStateEqual(softState, this.prevSoftSt)) {
      rd.softState = softState;
      this.prevSoftSt = softState;
    }
    const hsChanged = !hardStateEqual(hardState, this.prevHardSt);
    if (hsChanged) rd.hardState = hardState;
    if (r.raftLog.unstable.snapshot !== undefined) rd.snapshot = r.raftLog.unstable.snapshot;
    rd.mustSync = hardState.term !== this.prevHardSt.term || hardState.vote !== this.prevHardSt.vote || rd.entries.length > 0;
    rd.canSendBeforePersist =
      softState.raftState === StateType.Leader &&
      rd.snapshot === undefined &&
      hardState.term === this.prevHardSt.term &&
      hardState.vote === this.prevHardSt.vote;
    r.msgs = [];
    r.readStates = [];
    this.outstanding = true;
    return rd;
  }

  /** The application has persisted, sent and applied `rd` (see the module comment). */
  advance(rd: Ready): void {
    if (!this.outstanding) throw new RaftUsageError("advance() without an outstanding Ready");
    this.outstanding = false;
    const r = this.raft;
    if (rd.hardState !== undefined) this.prevHardSt = rd.hardState;
    r.reduceUncommittedSize(rd.committedEntries);
    const n = rd.committedEntries.length;
    const applied = n > 0 ? rd.committedEntries[n - 1].index : rd.snapshot !== undefined ? rd.snapshot.metadata.index : 0;
    if (applied > 0) r.appliedTo(applied);
    if (rd.entries.length > 0) {
      const last = rd.entries[rd.entries.length - 1];
      r.raftLog.stableTo(last.index, last.term);
    }
    if (rd.snapshot !== undefined) r.raftLog.stableSnapTo(rd.snapshot.metadata.index);
  }

  status(): Status {
    const r = this.raft;
    const s: Status = {
      id: r.id,
      hardState: r.hardState(),
      softState: r.softState(),
      applied: r.raftLog.applied,
      leadTransferee: r.leadTransferee,
      config: r.prs.confState(),
    };
    if (r.state === StateType.Leader) {
      s.progress = new Map();
      r.prs.visit((id, pr) => {
        s.progress?.set(id, {
          match: pr.match,
          next: pr.next,
          state: pr.state,
          isLearner: pr.isLearner,
          recentActive: pr.recentActive,
          paused: pr.isPaused(),
          inflight: pr.inflights.size(),
          pendingSnapshot: pr.pendingSnapshot,
        });
      });
    }
    return s;
  }
}

function addNode(id: NodeId): ConfChangeV2 {
  return { transition: ConfChangeTransition.Auto, changes: [{ type: ConfChangeType.AddNode, nodeId: id }], context: new Uint8Array(0) };
}

function softStateEqual(a: SoftState, b: SoftState): boolean {
  return a.lead === b.lead && a.raftState === b.raftState;
}

function hardStateEqual(a: HardState, b: HardState): boolean {
  return a.term === b.term && a.vote === b.vote && a.commit === b.commit;
}

function isEmptyHardState(hs: HardState): boolean {
  return hs.term === 0 && hs.vote === NONE && hs.commit === 0;
}
