import { RaftUsageError, assert } from "./assert.js";
import { Changer, ConfChangeError, restoreConfState, type ConfChangeResult } from "./confchange.js";
import { confChangeFromEntry, encodeConfChangeV2 } from "./confchange_codec.js";
import { NO_LIMIT, RaftLog } from "./log.js";
import { ProgressState } from "./progress.js";
import { VoteResult } from "./quorum.js";
import { PENDING_READS_MAX, ReadOnly, type ReadOnlyOption } from "./read_only.js";
import { ProgressTracker } from "./tracker.js";
import {
  CompactedError,
  ConfChangeTransition,
  EntryType,
  MessageType,
  NONE,
  ProposalDroppedError,
  SnapshotTemporarilyUnavailableError,
  StateType,
  UnavailableError,
  entrySizeBytes,
  describeConfState,
  isEmptySnapshot,
  type ConfChangeV2,
  type ConfState,
  type Entry,
  type HardState,
  type Message,
  type NodeId,
  type ReadState,
  type Snapshot,
  type SoftState,
  type Storage,
} from "./types.js";

/** The configuration of one Raft node (see RawNode for the documented public form). */
export interface RaftConfig {
  id: NodeId;
  /** Ticks without hearing from a leader before a follower campaigns (randomized in [e, 2e)). */
  electionTick: number;
  /** Ticks between a leader's heartbeats. */
  heartbeatTick: number;
  storage: Storage;
  /**
   * Last applied index on restart: committed entries up to it are not handed out again. The
   * configuration raft starts with is storage.initialState().confState (the snapshot's), so
   * `applied` must not skip conf-change entries after the snapshot: either leave it unset (or
   * at the snapshot index) and call applyConfChange for every conf-change entry redelivered
   * (skipping only data already in the backend), or make sure initialState() reflects them.
   */
  applied?: number;
  /** Bytes of entries per MsgApp (default 1 MiB). */
  maxSizePerMsg?: number;
  /** Committed entries per Ready, in bytes (default: maxSizePerMsg × 64). */
  maxCommittedSizePerReady?: number;
  /** MsgApps in flight per follower (default 256). */
  maxInflightMsgs?: number;
  /** Bytes in flight per follower, 0 for no byte limit (default 0). */
  maxInflightBytes?: number;
  /** Bytes of uncommitted payload a leader accepts before dropping proposals (default: no limit). */
  maxUncommittedEntriesSize?: number;
  checkQuorum?: boolean;
  preVote?: boolean;
  readOnlyOption?: ReadOnlyOption;
  disableProposalForwarding?: boolean;
  /** Uniform in [0, 1): the source of election-timeout randomization (seeded in tests). */
  random: () => number;
  logger?: RaftLogger;
}

export interface RaftLogger {
  debug(msg: string): void;
  info(msg: string): void;
  warn(msg: string): void;
}

const SILENT_LOGGER: RaftLogger = { debug() {}, info() {}, warn() {} };

/** Proposed entries a follower holds for forwarding between two Ready cycles. */
export const FORWARD_ENTRIES_MAX = 16384;

/** Marks a MsgVote/MsgPreVote caused by leadership transfer: it may disrupt a current lease. */
export const CAMPAIGN_TRANSFER_CONTEXT: Uint8Array = Uint8Array.from([..."CampaignTransfer"].map((c) => c.charCodeAt(0)));

type CampaignType = "pre-election" | "election" | "transfer";

export function newMessage(m: Partial<Message> & Pick<Message, "type">): Message {
  return {
    to: NONE,
    from: NONE,
    term: 0,
    logTerm: 0,
    index: 0,
    entries: [],
    commit: 0,
    reject: false,
    rejectHint: 0,
    context: EMPTY_BYTES,
    ...m,
  };
}

const EMPTY_BYTES = new Uint8Array(0);

/** A node id as etcd's raft logs print it (%x). */
function hex(id: NodeId): string {
  return id.toString(16);
}

function isVoteMsg(t: MessageType): boolean {
  return t === MessageType.MsgVote || t === MessageType.MsgPreVote;
}

function voteRespType(t: MessageType): MessageType {
  return t === MessageType.MsgVote ? MessageType.MsgVoteResp : MessageType.MsgPreVoteResp;
}

function bytesEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a.byteLength !== b.byteLength) return false;
  for (let i = 0; i < a.byteLength; i++) if (a[i] !== b[i]) return false;
  return true;
}

function payloadSize(ents: Entry[]): number {
  let s = 0;
  for (const e of ents) s += e.data.byteLength;
  return s;
}

/**
 * The Raft state machine (etcd's raft struct). Driven only by step() and tick(); its outputs
 * accumulate in `msgs`, `readStates` and the log until RawNode turns them into a Ready.
 */
export class Raft {
  readonly id: NodeId;
  term = 0;
  vote: NodeId = NONE;
  readStates: ReadState[] = [];
  readonly raftLog: RaftLog;
  readonly maxMsgSizeBytes: number;
  readonly maxUncommittedSizeBytes: number;
  prs: ProgressTracker;
  state: StateType = StateType.Follower;
  isLearner = false;
  msgs: Message[] = [];
  lead: NodeId = NONE;
  /** Target of a leadership transfer in progress, NONE otherwise. */
  leadTransferee: NodeId = NONE;
  /** Only one conf change may be pending (in the log, not yet applied): the index of the latest. */
  pendingConfIndex = 0;
  /** Bytes of payload appended by this leader that are not yet known applied. */
  uncommittedSize = 0;
  readOnly: ReadOnly;
  electionElapsed = 0;
  heartbeatElapsed = 0;
  readonly checkQuorum: boolean;
  readonly preVote: boolean;
  readonly heartbeatTimeout: number;
  readonly electionTimeout: number;
  randomizedElectionTimeout = 0;
  readonly disableProposalForwarding: boolean;
  readonly logger: RaftLogger;
  private readonly random: () => number;
  /** Reads that arrived before this leader committed an entry of its term. */
  pendingReadIndexMessages: Message[] = [];

  // Batching: work deferred to flush() (called when the application takes a Ready), so that
  // everything that happened between two Ready cycles leaves in as few messages as possible.
  /** Leader: new entries were appended since the last broadcast. */
  private pendingBcastAppend = false;
  /** Leader: a read was registered and needs a heartbeat round. */
  private pendingReadHeartbeat = false;
  /** Follower: proposals to forward to the leader as one MsgProp. */
  private pendingForward: Entry[] = [];

  constructor(c: RaftConfig) {
    validateConfig(c);
    this.id = c.id;
    this.logger = c.logger ?? SILENT_LOGGER;
    this.random = c.random;
    const maxSizePerMsg = c.maxSizePerMsg ?? 1024 * 1024;
    this.raftLog = new RaftLog(c.storage, c.maxCommittedSizePerReady ?? maxSizePerMsg * 64);
    this.maxMsgSizeBytes = maxSizePerMsg;
    this.maxUncommittedSizeBytes = c.maxUncommittedEntriesSize && c.maxUncommittedEntriesSize > 0 ? c.maxUncommittedEntriesSize : NO_LIMIT;
    this.prs = new ProgressTracker(c.maxInflightMsgs ?? 256, c.maxInflightBytes ?? 0);
    this.electionTimeout = c.electionTick;
    this.heartbeatTimeout = c.heartbeatTick;
    this.checkQuorum = c.checkQuorum ?? false;
    this.preVote = c.preVote ?? false;
    this.readOnly = new ReadOnly(c.readOnlyOption ?? "safe");
    this.disableProposalForwarding = c.disableProposalForwarding ?? false;

    const { hardState, confState } = c.storage.initialState();
    const restored = restoreConfState(this.newTracker(), this.raftLog.lastIndex(), confState);
    this.switchToConfig(restored);
    if (hardState.term !== 0 || hardState.vote !== NONE || hardState.commit !== 0) this.loadState(hardState);
    if (c.applied !== undefined && c.applied > 0) this.raftLog.appliedTo(c.applied);
    this.becomeFollower(this.term, NONE);
    this.logger.info(
      `newRaft ${hex(this.id)} [peers: [${this.prs.voterNodes().map(hex).join(",")}], term: ${this.term}, commit: ${this.raftLog.committed}, applied: ${this.raftLog.applied}, lastindex: ${this.raftLog.lastIndex()}, lastterm: ${this.raftLog.lastTerm()}]`,
    );
  }

  private newTracker(): ProgressTracker {
    return new ProgressTracker(this.prs.maxInflight, this.prs.maxInflightBytes);
  }

  softState(): SoftState {
    return { lead: this.lead, raftState: this.state };
  }

  hardState(): HardState {
    return { term: this.term, vote: this.vote, commit: this.raftLog.committed };
  }

  private loadState(hs: HardState): void {
    assert(
      hs.commit >= this.raftLog.committed && hs.commit <= this.raftLog.lastIndex(),
      () => `${hex(this.id)} state.commit ${hs.commit} is out of range [${this.raftLog.committed}, ${this.raftLog.lastIndex()}]`,
    );
    this.raftLog.committed = hs.commit;
    this.term = hs.term;
    this.vote = hs.vote;
  }

  // ---------------------------------------------------------------- sending

  private send(m: Message): void {
    if (m.from === NONE) m.from = this.id;
    if (isVoteMsg(m.type) || m.type === MessageType.MsgVoteResp || m.type === MessageType.MsgPreVoteResp) {
      assert(m.term !== 0, () => `term should be set when sending ${MessageType[m.type]}`);
    } else {
      assert(m.term === 0, () => `term should not be set when sending ${MessageType[m.type]} (was ${m.term})`);
      // Proposals and read requests are forwarded as if local: the leader does not check their term.
      if (m.type !== MessageType.MsgProp && m.type !== MessageType.MsgReadIndex) m.term = this.term;
    }
    this.msgs.push(m);
  }

  /** Send entries (or a snapshot) to `to`, even if there is nothing new (acts as a probe). */
  sendAppend(to: NodeId): void {
    if (this.maybeSendAppend(to, true)) {
      // Flow control allows more: keep streaming size-limited MsgApps while not paused.
      while (this.maybeSendAppend(to, false));
    }
  }

  private maybeSendAppend(to: NodeId, sendIfEmpty: boolean): boolean {
    const pr = this.prs.progress.get(to);
    if (pr === undefined || pr.isPaused()) return false;
    let prevTerm: number;
    let ents: Entry[];
    try {
      prevTerm = this.raftLog.term(pr.next - 1);
      ents = this.raftLog.entries(pr.next, this.maxMsgSizeBytes);
    } catch (e) {
      if (!(e instanceof CompactedError || e instanceof UnavailableError)) throw e;
      // The follower needs entries we no longer have: send a snapshot instead.
      return this.maybeSendSnapshot(to);
    }
    if (ents.length === 0 && !sendIfEmpty) return false;
    const prevIndex = pr.next - 1;
    if (ents.length > 0) {
      const last = ents[ents.length - 1].index;
      switch (pr.state) {
        case ProgressState.Replicate: {
          let bytes = 0;
          for (const e of ents) bytes += entrySizeBytes(e);
          pr.optimisticUpdate(last);
          pr.inflights.add(last, bytes);
          break;
        }
        case ProgressState.Probe:
          pr.probeSent = true;
          break;
        default:
          assert(false, () => `${hex(this.id)} is sending append in unhandled state ${pr.state}`);
      }
    }
    this.send(newMessage({ type: MessageType.MsgApp, to, index: prevIndex, logTerm: prevTerm, entries: ents, commit: this.raftLog.committed }));
    return true;
  }

  private maybeSendSnapshot(to: NodeId): boolean {
    const pr = this.prs.progress.get(to);
    assert(pr !== undefined, "progress must exist");
    if (!pr.recentActive) {
      this.logger.debug(`ignore sending snapshot to ${hex(to)} since it is not recently active`);
      return false;
    }
    let snapshot: Snapshot;
    try {
      snapshot = this.raftLog.snapshot();
    } catch (e) {
      if (e instanceof SnapshotTemporarilyUnavailableError) {
        this.logger.debug(`${hex(this.id)} failed to send snapshot to ${hex(to)} because snapshot is temporarily unavailable`);
        return false;
      }
      throw e;
    }
    assert(!isEmptySnapshot(snapshot), "need non-empty snapshot");
    const cs = snapshot.metadata.confState;
    if (![cs.voters, cs.learners, cs.votersOutgoing, cs.learnersNext].some((ids) => ids.includes(to))) {
      // The recipient would ignore it (it is not a member as of that snapshot): wait until the
      // application takes a newer snapshot rather than loop sending this one.
      this.logger.debug(`${hex(this.id)} not sending snapshot ${snapshot.metadata.index} to ${hex(to)}: it predates ${hex(to)}'s membership`);
      return false;
    }
    pr.becomeSnapshot(snapshot.metadata.index);
    this.logger.debug(`${hex(this.id)} paused sending replication messages to ${hex(to)}, sending snapshot ${snapshot.metadata.index}`);
    this.send(newMessage({ type: MessageType.MsgSnap, to, snapshot }));
    return true;
  }

  private sendHeartbeat(to: NodeId, ctx: Uint8Array): void {
    // Never tell a follower to commit beyond what it is known to have: it may not have it yet.
    const pr = this.prs.progress.get(to);
    const commit = Math.min(pr?.match ?? 0, this.raftLog.committed);
    this.send(newMessage({ type: MessageType.MsgHeartbeat, to, commit, context: ctx }));
  }

  bcastAppend(): void {
    this.prs.visit((id) => {
      if (id !== this.id) this.sendAppend(id);
    });
  }

  private bcastHeartbeat(): void {
    this.bcastHeartbeatWithCtx(this.readOnly.lastPendingRequestCtx() ?? EMPTY_BYTES);
  }

  private bcastHeartbeatWithCtx(ctx: Uint8Array): void {
    this.prs.visit((id) => {
      if (id !== this.id) this.sendHeartbeat(id, ctx);
    });
  }

  /** Send the work deferred since the last Ready: one append round and one heartbeat round at most. */
  flush(): void {
    if (this.pendingForward.length > 0) {
      const ents = this.pendingForward;
      this.pendingForward = [];
      this.forwardProposals(ents);
    }
    if (this.state === StateType.Leader) {
      if (this.pendingBcastAppend) this.bcastAppend();
      if (this.pendingReadHeartbeat) this.bcastHeartbeatWithCtx(this.readOnly.lastPendingRequestCtx() ?? EMPTY_BYTES);
    }
    this.pendingBcastAppend = false;
    this.pendingReadHeartbeat = false;
  }

  hasPendingFlush(): boolean {
    return this.pendingForward.length > 0 || (this.state === StateType.Leader && (this.pendingBcastAppend || this.pendingReadHeartbeat));
  }

  private forwardProposals(ents: Entry[]): void {
    if (this.state === StateType.Leader) {
      // We became leader while holding them: propose locally.
      try {
        this.stepLeader(newMessage({ type: MessageType.MsgProp, from: this.id, entries: ents }));
      } catch (e) {
        if (!(e instanceof ProposalDroppedError)) throw e;
        this.logger.debug(`${hex(this.id)} dropped ${ents.length} queued proposals: ${e.reason}`);
      }
      return;
    }
    if (this.lead === NONE || this.disableProposalForwarding) {
      this.logger.debug(`${hex(this.id)} no leader at term ${this.term}; dropping ${ents.length} queued proposals`);
      return;
    }
    // One MsgProp per maxMsgSize worth of entries (at least one entry each).
    let start = 0;
    while (start < ents.length) {
      let end = start + 1;
      let size = entrySizeBytes(ents[start]);
      while (end < ents.length && size + entrySizeBytes(ents[end]) <= this.maxMsgSizeBytes) size += entrySizeBytes(ents[end++]);
      this.send(newMessage({ type: MessageType.MsgProp, to: this.lead, entries: ents.slice(start, end) }));
      start = end;
    }
  }

  // ---------------------------------------------------------------- state transitions

  private reset(term: number): void {
    if (this.term !== term) {
      assert(term > this.term, () => `term must never go back: ${this.term} -> ${term}`);
      this.term = term;
      this.vote = NONE;
    }
    this.lead = NONE;
    this.electionElapsed = 0;
    this.heartbeatElapsed = 0;
    this.resetRandomizedElectionTimeout();
    this.abortLeaderTransfer();
    this.prs.resetVotes();
    const lastIndex = this.raftLog.lastIndex();
    for (const [id, pr] of this.prs.progress) {
      pr.match = id === this.id ? lastIndex : 0;
      pr.next = lastIndex + 1;
      pr.state = ProgressState.Probe;
      pr.pendingSnapshot = 0;
      pr.probeSent = false;
      pr.recentActive = false;
      pr.inflights.reset();
    }
    this.pendingConfIndex = 0;
    this.uncommittedSize = 0;
    this.readOnly = new ReadOnly(this.readOnly.option);
    this.pendingReadIndexMessages = [];
    this.pendingBcastAppend = false;
    this.pendingReadHeartbeat = false;
  }

  becomeFollower(term: number, lead: NodeId): void {
    this.reset(term);
    this.lead = lead;
    this.state = StateType.Follower;
    this.logger.debug(`${hex(this.id)} became follower at term ${this.term}`);
  }

  becomeCandidate(): void {
    assert(this.state !== StateType.Leader, "invalid transition [leader -> candidate]");
    this.reset(this.term + 1);
    this.vote = this.id;
    this.state = StateType.Candidate;
    this.logger.debug(`${hex(this.id)} became candidate at term ${this.term}`);
  }

  becomePreCandidate(): void {
    assert(this.state !== StateType.Leader, "invalid transition [leader -> pre-candidate]");
    // Pre-vote does not touch term or vote: a partitioned node cannot inflate terms.
    this.prs.resetVotes();
    this.lead = NONE;
    this.state = StateType.PreCandidate;
    this.logger.debug(`${hex(this.id)} became pre-candidate at term ${this.term}`);
  }

  becomeLeader(): void {
    assert(this.state !== StateType.Follower, "invalid transition [follower -> leader]");
    this.reset(this.term);
    this.lead = this.id;
    this.state = StateType.Leader;
    const self = this.prs.progress.get(this.id);
    assert(self !== undefined, "leader must be in the configuration");
    self.becomeReplicate();
    self.recentActive = true;
    // Conservatively assume the log may hold an unapplied conf change.
    this.pendingConfIndex = this.raftLog.lastIndex();
    // The no-op of the new term: committing it commits every earlier entry (Figure 8).
    const accepted = this.appendEntry([{ term: 0, index: 0, type: EntryType.Normal, data: EMPTY_BYTES }]);
    assert(accepted, "empty entry was dropped");
    // The no-op does not count against the uncommitted-size limit.
    this.uncommittedSize = 0;
    this.logger.info(`${hex(this.id)} became leader at term ${this.term}`);
  }

  private resetRandomizedElectionTimeout(): void {
    this.randomizedElectionTimeout = this.electionTimeout + Math.floor(this.random() * this.electionTimeout);
  }

  private pastElectionTimeout(): boolean {
    return this.electionElapsed >= this.randomizedElectionTimeout;
  }

  /** A node may campaign if it is a voter and is not waiting to apply a snapshot. */
  promotable(): boolean {
    const pr = this.prs.progress.get(this.id);
    return pr !== undefined && !pr.isLearner && !this.raftLog.hasPendingSnapshot();
  }

  abortLeaderTransfer(): void {
    this.leadTransferee = NONE;
  }

  // ---------------------------------------------------------------- ticks

  tick(): void {
    if (this.state === StateType.Leader) this.tickHeartbeat();
    else this.tickElection();
  }

  private tickElection(): void {
    this.electionElapsed++;
    if (this.promotable() && this.pastElectionTimeout()) {
      this.electionElapsed = 0;
      this.step(newMessage({ type: MessageType.MsgHup, from: this.id }));
    }
  }

  private tickHeartbeat(): void {
    this.heartbeatElapsed++;
    this.electionElapsed++;
    if (this.electionElapsed >= this.electionTimeout) {
      this.electionElapsed = 0;
      if (this.checkQuorum) this.step(newMessage({ type: MessageType.MsgCheckQuorum, from: this.id }));
      // A transfer that did not finish within an election timeout is abandoned.
      if (this.state === StateType.Leader && this.leadTransferee !== NONE) {
        this.logger.info(`${hex(this.id)} abort leadership transfer to ${hex(this.leadTransferee)}: not caught up within an election timeout`);
        this.abortLeaderTransfer();
      }
    }
    if (this.state !== StateType.Leader) return;
    if (this.heartbeatElapsed >= this.heartbeatTimeout) {
      this.heartbeatElapsed = 0;
      this.step(newMessage({ type: MessageType.MsgBeat, from: this.id }));
    }
  }

  // ---------------------------------------------------------------- elections

  private hup(t: CampaignType): void {
    if (this.state === StateType.Leader) {
      this.logger.debug(`${hex(this.id)} ignoring MsgHup because already leader`);
      return;
    }
    if (!this.promotable()) {
      this.logger.warn(`${hex(this.id)} is unpromotable and can not campaign`);
      return;
    }
    // A committed but unapplied conf change may change who may vote: apply it first.
    if (this.raftLog.committed > this.raftLog.applied && this.hasUnappliedConfChange()) {
      this.logger.warn(`${hex(this.id)} cannot campaign at term ${this.term} since there are still pending configuration changes to apply`);
      return;
    }
    this.logger.info(`${hex(this.id)} is starting a new election at term ${this.term}`);
    this.campaign(t);
  }

  private hasUnappliedConfChange(): boolean {
    let lo = this.raftLog.applied + 1;
    const hi = this.raftLog.committed + 1;
    // Page through the committed-but-unapplied range to keep each read bounded.
    while (lo < hi) {
      const ents = this.raftLog.slice(lo, hi, this.maxMsgSizeBytes);
      for (const e of ents) if (e.type !== EntryType.Normal) return true;
      lo += ents.length;
    }
    return false;
  }

  campaign(t: CampaignType): void {
    assert(this.promotable(), () => `${hex(this.id)} is unpromotable; campaign() should have been called`);
    let term: number;
    let voteMsg: MessageType;
    if (t === "pre-election") {
      this.becomePreCandidate();
      voteMsg = MessageType.MsgPreVote;
      // Ask with the term we would have: others compare it with theirs without adopting it.
      term = this.term + 1;
    } else {
      this.becomeCandidate();
      voteMsg = MessageType.MsgVote;
      term = this.term;
    }
    if (this.poll(this.id, voteRespType(voteMsg), true) === VoteResult.Won) {
      // Single-voter configuration: we won by voting for ourselves.
      if (t === "pre-election") this.campaign("election");
      else this.becomeLeader();
      return;
    }
    for (const id of this.prs.voterNodes()) {
      if (id === this.id) continue;
      this.send(
        newMessage({
          type: voteMsg,
          to: id,
          term,
          index: this.raftLog.lastIndex(),
          logTerm: this.raftLog.lastTerm(),
          context: t === "transfer" ? CAMPAIGN_TRANSFER_CONTEXT : EMPTY_BYTES,
        }),
      );
    }
  }

  private poll(id: NodeId, t: MessageType, granted: boolean): VoteResult {
    this.logger.debug(`${hex(this.id)} received ${MessageType[t]} ${granted ? "" : "rejection "}from ${hex(id)} at term ${this.term}`);
    this.prs.recordVote(id, granted);
    return this.prs.tallyVotes().result;
  }

  // ---------------------------------------------------------------- step

  /** Process one message. Throws ProposalDroppedError for a proposal that cannot be accepted. */
  step(m: Message): void {
    if (m.term === 0) {
      // Local message (tick-driven, proposal, read request): no term checks.
    } else if (m.term > this.term) {
      if (isVoteMsg(m.type)) {
        const force = bytesEqual(m.context, CAMPAIGN_TRANSFER_CONTEXT);
        const inLease = this.checkQuorum && this.lead !== NONE && this.electionElapsed < this.electionTimeout;
        if (!force && inLease) {
          // We heard from a leader within the minimum election timeout: this candidate would
          // disrupt a working cluster (it is probably partitioned or removed). Ignore it.
          this.logger.info(`${hex(this.id)} [term: ${this.term}] ignored ${MessageType[m.type]} from ${hex(m.from)} at term ${m.term}: lease is not expired`);
          return;
        }
      }
      if (m.type === MessageType.MsgPreVote) {
        // Never change our term in response to a PreVote.
      } else if (m.type === MessageType.MsgPreVoteResp && !m.reject) {
        // The granted pre-vote carries our future term; we advance when a quorum grants it.
      } else {
        this.logger.debug(`${hex(this.id)} [term: ${this.term}] received a ${MessageType[m.type]} message with higher term from ${hex(m.from)} [term: ${m.term}]`);
        const fromLeader = m.type === MessageType.MsgApp || m.type === MessageType.MsgHeartbeat || m.type === MessageType.MsgSnap;
        this.becomeFollower(m.term, fromLeader ? m.from : NONE);
      }
    } else if (m.term < this.term) {
      if ((this.checkQuorum || this.preVote) && (m.type === MessageType.MsgHeartbeat || m.type === MessageType.MsgApp)) {
        // A stale leader (e.g. after a partition healed) would otherwise never learn our term,
        // and with check-quorum/pre-vote we would never disrupt it by campaigning: answer so it
        // steps down.
        this.send(newMessage({ type: MessageType.MsgAppResp, to: m.from }));
      } else if (m.type === MessageType.MsgPreVote) {
        this.send(newMessage({ type: MessageType.MsgPreVoteResp, to: m.from, term: this.term, reject: true }));
      }
      return;
    }

    switch (m.type) {
      case MessageType.MsgHup:
        this.hup(this.preVote ? "pre-election" : "election");
        return;
      case MessageType.MsgVote:
      case MessageType.MsgPreVote: {
        const canVote =
          this.vote === m.from ||
          (this.vote === NONE && this.lead === NONE) ||
          (m.type === MessageType.MsgPreVote && m.term > this.term);
        if (canVote && this.raftLog.isUpToDate(m.index, m.logTerm)) {
          this.logger.debug(`${hex(this.id)} cast ${MessageType[m.type]} for ${hex(m.from)} at term ${m.term}`);
          // The response carries the request's term: a pre-vote is granted in the future term.
          this.send(newMessage({ type: voteRespType(m.type), to: m.from, term: m.term }));
          if (m.type === MessageType.MsgVote) {
            this.electionElapsed = 0;
            this.vote = m.from;
          }
        } else {
          this.send(newMessage({ type: voteRespType(m.type), to: m.from, term: this.term, reject: true }));
        }
        return;
      }
      default:
        switch (this.state) {
          case StateType.Leader:
            this.stepLeader(m);
            return;
          case StateType.Candidate:
          case StateType.PreCandidate:
            this.stepCandidate(m);
            return;
          case StateType.Follower:
            this.stepFollower(m);
            return;
        }
    }
  }

  private stepLeader(m: Message): void {
    switch (m.type) {
      case MessageType.MsgBeat:
        this.bcastHeartbeat();
        return;
      case MessageType.MsgCheckQuorum: {
        const self = this.prs.progress.get(this.id);
        if (self !== undefined) self.recentActive = true;
        if (!this.prs.quorumActive()) {
          this.logger.warn(`${hex(this.id)} stepped down to follower since quorum is not active`);
          this.becomeFollower(this.term, NONE);
        }
        // Every follower must prove itself active again within the next election timeout.
        this.prs.visit((id, pr) => {
          if (id !== this.id) pr.recentActive = false;
        });
        return;
      }
      case MessageType.MsgProp:
        this.leaderPropose(m);
        return;
      case MessageType.MsgReadIndex:
        this.leaderReadIndex(m);
        return;
    }

    const pr = this.prs.progress.get(m.from);
    if (pr === undefined) {
      this.logger.debug(`${hex(this.id)} no progress available for ${hex(m.from)}`);
      return;
    }
    switch (m.type) {
      case MessageType.MsgAppResp:
        pr.recentActive = true;
        if (m.reject) {
          this.logger.debug(`${hex(this.id)} received MsgAppResp(rejected, hint: (index ${m.rejectHint}, term ${m.logTerm})) from ${hex(m.from)} for index ${m.index}`);
          // Fast backtracking: skip the follower's whole conflicting term at once.
          const nextProbeIdx = m.logTerm > 0 ? this.raftLog.findConflictByTerm(m.rejectHint, m.logTerm) : m.rejectHint;
          if (pr.maybeDecrTo(m.index, nextProbeIdx)) {
            if (pr.state === ProgressState.Replicate) pr.becomeProbe();
            this.sendAppend(m.from);
          }
        } else {
          const oldPaused = pr.isPaused();
          if (pr.maybeUpdate(m.index)) {
            if (pr.state === ProgressState.Probe) pr.becomeReplicate();
            else if (pr.state === ProgressState.Snapshot && pr.match >= pr.pendingSnapshot) {
              this.logger.debug(`${hex(this.id)} recovered from needing snapshot, resumed sending replication messages to ${hex(m.from)}`);
              pr.becomeProbe();
              pr.becomeReplicate();
            } else if (pr.state === ProgressState.Replicate) pr.inflights.freeLE(m.index);

            if (this.maybeCommit()) {
              this.releasePendingReadIndexMessages();
              this.bcastAppend();
            } else if (oldPaused) {
              this.sendAppend(m.from);
            } else {
              while (this.maybeSendAppend(m.from, false));
            }
            if (m.from === this.leadTransferee && pr.match === this.raftLog.lastIndex()) {
              this.logger.info(`${hex(this.id)} sent MsgTimeoutNow to ${hex(m.from)} after received MsgAppResp`);
              this.sendTimeoutNow(m.from);
            }
          }
        }
        return;
      case MessageType.MsgHeartbeatResp: {
        pr.recentActive = true;
        pr.probeSent = false;
        // Free one slot so a full window cannot stall replication forever after a loss.
        if (pr.state === ProgressState.Replicate && pr.inflights.full()) pr.inflights.freeFirstOne();
        if (pr.match < this.raftLog.lastIndex()) this.sendAppend(m.from);
        if (this.readOnly.option !== "safe" || m.context.byteLength === 0) return;
        const acks = this.readOnly.recvAck(m.from, m.context);
        if (acks === undefined || this.prs.config.voters.voteResult(acks) !== VoteResult.Won) return;
        for (const rs of this.readOnly.advance(m.context)) this.respondToReadIndex(rs.req, rs.index);
        return;
      }
      case MessageType.MsgSnapStatus:
        if (pr.state !== ProgressState.Snapshot) return;
        if (m.reject) pr.pendingSnapshot = 0;
        pr.becomeProbe();
        // Wait for the follower's MsgAppResp (or the next heartbeat) before the next MsgApp.
        pr.probeSent = true;
        this.logger.debug(`${hex(this.id)} snapshot ${m.reject ? "failed" : "succeeded"}, resumed sending replication messages to ${hex(m.from)}`);
        return;
      case MessageType.MsgUnreachable:
        // An optimistic MsgApp was most likely lost: go back to probing.
        if (pr.state === ProgressState.Replicate) pr.becomeProbe();
        return;
      case MessageType.MsgTransferLeader: {
        if (pr.isLearner) {
          this.logger.debug(`${hex(this.id)} is learner. Ignored transferring leadership`);
          return;
        }
        const transferee = m.from;
        if (this.leadTransferee !== NONE) {
          if (this.leadTransferee === transferee) return;
          this.abortLeaderTransfer();
        }
        if (transferee === this.id) return;
        // The transfer must finish within one election timeout.
        this.electionElapsed = 0;
        this.leadTransferee = transferee;
        this.logger.info(`${hex(this.id)} [term ${this.term}] starts to transfer leadership to ${hex(transferee)}`);
        if (pr.match === this.raftLog.lastIndex()) this.sendTimeoutNow(transferee);
        else this.sendAppend(transferee);
        return;
      }
    }
  }

  private leaderPropose(m: Message): void {
    assert(m.entries.length > 0, () => `${hex(this.id)} stepped empty MsgProp`);
    if (!this.prs.progress.has(this.id)) throw new ProposalDroppedError("not a member");
    if (this.leadTransferee !== NONE) throw new ProposalDroppedError("transfer in progress");
    const ents = m.entries.map((e) => ({ ...e }));
    for (let i = 0; i < ents.length; i++) {
      const e = ents[i];
      if (e.type === EntryType.Normal) continue;
      const refused = this.refuseConfChange(e);
      if (refused !== undefined) {
        this.logger.info(`${hex(this.id)} ignoring conf change at index ${this.raftLog.lastIndex() + i + 1}: ${refused}`);
        // Keep the slot (the batch stays contiguous) but make it a no-op.
        ents[i] = { term: 0, index: 0, type: EntryType.Normal, data: EMPTY_BYTES };
      } else {
        this.pendingConfIndex = this.raftLog.lastIndex() + i + 1;
      }
    }
    if (!this.appendEntry(ents)) throw new ProposalDroppedError("too many uncommitted entries");
    this.pendingBcastAppend = true;
  }

  /** Why a proposed conf change entry cannot go into the log now (undefined if it can). */
  refuseConfChange(e: Entry): string | undefined {
    if (this.pendingConfIndex > this.raftLog.applied) {
      return `possible unapplied conf change at index ${this.pendingConfIndex} (applied to ${this.raftLog.applied})`;
    }
    let cc: ConfChangeV2;
    try {
      cc = confChangeFromEntry(e);
    } catch (err) {
      return `undecodable conf change: ${String(err)}`;
    }
    const alreadyJoint = this.prs.config.voters.isJoint();
    const wantsLeaveJoint = cc.changes.length === 0;
    if (alreadyJoint && !wantsLeaveJoint) return "must transition out of joint config first";
    if (!alreadyJoint && wantsLeaveJoint) return "not in joint state; refusing empty conf change";
    // No conf change is pending, so the configuration this one will be applied to is the
    // current one: check it now rather than fail on every node at apply time.
    try {
      new Changer(this.prs, this.raftLog.lastIndex()).applyV2(cc);
    } catch (err) {
      if (err instanceof ConfChangeError) return err.message;
      throw err;
    }
    return undefined;
  }

  private leaderReadIndex(m: Message): void {
    if (this.prs.isSingleton()) {
      this.respondToReadIndex(m, this.raftLog.committed);
      return;
    }
    // A new leader does not know the latest commit index until it commits an entry of its own
    // term: postpone the read until then.
    if (!this.committedEntryInCurrentTerm()) {
      if (this.pendingReadIndexMessages.length < PENDING_READS_MAX) this.pendingReadIndexMessages.push(m);
      else this.logger.warn(`${hex(this.id)} dropped read index request: too many pending`);
      return;
    }
    this.registerReadIndex(m);
  }

  private registerReadIndex(m: Message): void {
    if (this.readOnly.option === "safe") {
      if (!this.readOnly.addRequest(this.raftLog.committed, m)) {
        this.logger.warn(`${hex(this.id)} dropped read index request: too many pending`);
        return;
      }
      this.readOnly.recvAck(this.id, m.entries[0].data);
      // One heartbeat round (at the next flush) confirms every read registered until then.
      this.pendingReadHeartbeat = true;
    } else {
      this.respondToReadIndex(m, this.raftLog.committed);
    }
  }

  private committedEntryInCurrentTerm(): boolean {
    return this.raftLog.zeroTermOnErrCompacted(this.raftLog.committed) === this.term;
  }

  private releasePendingReadIndexMessages(): void {
    if (this.pendingReadIndexMessages.length === 0 || !this.committedEntryInCurrentTerm()) return;
    const msgs = this.pendingReadIndexMessages;
    this.pendingReadIndexMessages = [];
    for (const m of msgs) this.registerReadIndex(m);
  }

  private respondToReadIndex(req: Message, readIndex: number): void {
    if (req.from === NONE || req.from === this.id) {
      this.readStates.push({ index: readIndex, requestCtx: req.entries[0].data });
      return;
    }
    this.send(newMessage({ type: MessageType.MsgReadIndexResp, to: req.from, index: readIndex, entries: req.entries }));
  }

  private sendTimeoutNow(to: NodeId): void {
    this.send(newMessage({ type: MessageType.MsgTimeoutNow, to }));
  }

  private stepCandidate(m: Message): void {
    const myVoteResp = this.state === StateType.PreCandidate ? MessageType.MsgPreVoteResp : MessageType.MsgVoteResp;
    switch (m.type) {
      case MessageType.MsgProp:
        throw new ProposalDroppedError("no leader");
      case MessageType.MsgApp:
        this.becomeFollower(m.term, m.from);
        this.handleAppendEntries(m);
        return;
      case MessageType.MsgHeartbeat:
        this.becomeFollower(m.term, m.from);
        this.handleHeartbeat(m);
        return;
      case MessageType.MsgSnap:
        this.becomeFollower(m.term, m.from);
        this.handleSnapshot(m);
        return;
      case myVoteResp: {
        const res = this.poll(m.from, m.type, !m.reject);
        if (res === VoteResult.Won) {
          if (this.state === StateType.PreCandidate) this.campaign("election");
          else {
            this.becomeLeader();
            this.bcastAppend();
          }
        } else if (res === VoteResult.Lost) {
          // A rejected pre-vote carries the rejecter's (current) term.
          this.becomeFollower(this.term, NONE);
        }
        return;
      }
      case MessageType.MsgTimeoutNow:
        this.logger.debug(`${hex(this.id)} [term ${this.term} state ${StateType[this.state]}] ignored MsgTimeoutNow from ${hex(m.from)}`);
        return;
    }
  }

  private stepFollower(m: Message): void {
    switch (m.type) {
      case MessageType.MsgProp:
        if (this.lead === NONE) throw new ProposalDroppedError("no leader");
        if (this.disableProposalForwarding) throw new ProposalDroppedError("no leader");
        if (this.pendingForward.length + m.entries.length > FORWARD_ENTRIES_MAX) throw new ProposalDroppedError("too many uncommitted entries");
        for (const e of m.entries) this.pendingForward.push(e);
        return;
      case MessageType.MsgApp:
        this.electionElapsed = 0;
        this.lead = m.from;
        this.handleAppendEntries(m);
        return;
      case MessageType.MsgHeartbeat:
        this.electionElapsed = 0;
        this.lead = m.from;
        this.handleHeartbeat(m);
        return;
      case MessageType.MsgSnap:
        this.electionElapsed = 0;
        this.lead = m.from;
        this.handleSnapshot(m);
        return;
      case MessageType.MsgTransferLeader:
        if (this.lead === NONE) {
          this.logger.info(`${hex(this.id)} no leader at term ${this.term}; dropping leader transfer msg`);
          return;
        }
        this.send(newMessage({ ...m, to: this.lead, term: 0 }));
        return;
      case MessageType.MsgTimeoutNow:
        if (this.promotable()) {
          this.logger.info(`${hex(this.id)} [term ${this.term}] received MsgTimeoutNow from ${hex(m.from)} and starts an election to get leadership`);
          // Skip pre-vote: the leader asked for this, and the vote carries the transfer marker.
          this.campaign("transfer");
        }
        return;
      case MessageType.MsgReadIndex:
        if (this.lead === NONE) {
          this.logger.info(`${hex(this.id)} no leader at term ${this.term}; dropping index reading msg`);
          return;
        }
        this.send(newMessage({ ...m, to: this.lead, term: 0 }));
        return;
      case MessageType.MsgReadIndexResp:
        if (m.entries.length !== 1) {
          this.logger.warn(`${hex(this.id)} invalid format of MsgReadIndexResp from ${hex(m.from)}, entries count: ${m.entries.length}`);
          return;
        }
        this.readStates.push({ index: m.index, requestCtx: m.entries[0].data });
        return;
    }
  }

  private handleAppendEntries(m: Message): void {
    if (m.index < this.raftLog.committed) {
      this.send(newMessage({ type: MessageType.MsgAppResp, to: m.from, index: this.raftLog.committed }));
      return;
    }
    const lastNew = this.raftLog.maybeAppend(m.index, m.logTerm, m.commit, m.entries);
    if (lastNew !== undefined) {
      this.send(newMessage({ type: MessageType.MsgAppResp, to: m.from, index: lastNew }));
      return;
    }
    // Reject with a hint: the largest index ≤ m.index whose term is ≤ m.logTerm, so the leader
    // can skip a whole conflicting term in one round trip.
    let hintIndex = Math.min(m.index, this.raftLog.lastIndex());
    hintIndex = this.raftLog.findConflictByTerm(hintIndex, m.logTerm);
    let hintTerm = 0;
    try {
      hintTerm = this.raftLog.term(hintIndex);
    } catch (e) {
      if (!(e instanceof CompactedError || e instanceof UnavailableError)) throw e;
    }
    this.logger.debug(`${hex(this.id)} rejected MsgApp [logterm: ${m.logTerm}, index: ${m.index}] from ${hex(m.from)}`);
    this.send(newMessage({ type: MessageType.MsgAppResp, to: m.from, index: m.index, reject: true, rejectHint: hintIndex, logTerm: hintTerm }));
  }

  private handleHeartbeat(m: Message): void {
    this.raftLog.commitTo(m.commit);
    this.send(newMessage({ type: MessageType.MsgHeartbeatResp, to: m.from, context: m.context }));
  }

  private handleSnapshot(m: Message): void {
    const s = m.snapshot;
    if (s === undefined) return;
    if (this.restore(s)) {
      this.logger.info(`${hex(this.id)} [commit: ${this.raftLog.committed}] restored snapshot [index: ${s.metadata.index}, term: ${s.metadata.term}]`);
      this.send(newMessage({ type: MessageType.MsgAppResp, to: m.from, index: this.raftLog.lastIndex() }));
    } else {
      this.logger.info(`${hex(this.id)} [commit: ${this.raftLog.committed}] ignored snapshot [index: ${s.metadata.index}, term: ${s.metadata.term}]`);
      this.send(newMessage({ type: MessageType.MsgAppResp, to: m.from, index: this.raftLog.committed }));
    }
  }

  /** Install a snapshot from the leader; false if it is stale or not for us. */
  private restore(s: Snapshot): boolean {
    if (s.metadata.index <= this.raftLog.committed) return false;
    if (this.state !== StateType.Follower) {
      // Defense in depth: only a follower restores. Move to a new term so we never step a
      // snapshot as (pre)candidate or leader.
      this.logger.warn(`${hex(this.id)} attempted to restore snapshot as leader; should never happen`);
      this.becomeFollower(this.term + 1, NONE);
      return false;
    }
    const cs = s.metadata.confState;
    const found = [cs.voters, cs.learners, cs.votersOutgoing].some((ids) => ids.includes(this.id));
    if (!found) {
      this.logger.warn(`${hex(this.id)} attempted to restore snapshot but it is not in the ConfState; should never happen`);
      return false;
    }
    if (this.raftLog.matchTerm(s.metadata.index, s.metadata.term)) {
      // We already have the entries: a fast-forward of the commit index is enough.
      this.raftLog.commitTo(s.metadata.index);
      return false;
    }
    this.raftLog.restore(s);
    this.prs = this.newTracker();
    const restored = restoreConfState(this.prs, this.raftLog.lastIndex(), cs);
    this.switchToConfig(restored);
    const self = this.prs.progress.get(this.id);
    if (self !== undefined) self.maybeUpdate(self.next - 1);
    return true;
  }

  // ---------------------------------------------------------------- log and commit

  /** Leader: append entries at the end of the log in the current term. */
  appendEntry(es: Entry[]): boolean {
    const li = this.raftLog.lastIndex();
    const ents = es.map((e, i) => ({ ...e, term: this.term, index: li + 1 + i }));
    if (!this.increaseUncommittedSize(ents)) {
      this.logger.warn(`${hex(this.id)} appending new entries to log would exceed uncommitted entry size limit; dropping proposal`);
      return false;
    }
    const newLast = this.raftLog.append(ents);
    // The leader counts its own log as matched at once (its persistence is ordered by the
    // caller before anyone can learn the entries are committed; see RawNode's Ready contract).
    this.prs.progress.get(this.id)?.maybeUpdate(newLast);
    this.maybeCommit();
    return true;
  }

  maybeCommit(): boolean {
    return this.raftLog.maybeCommit(this.prs.committed(), this.term);
  }

  private increaseUncommittedSize(ents: Entry[]): boolean {
    const s = payloadSize(ents);
    if (this.uncommittedSize > 0 && s > 0 && this.uncommittedSize + s > this.maxUncommittedSizeBytes) return false;
    this.uncommittedSize += s;
    return true;
  }

  reduceUncommittedSize(ents: Entry[]): void {
    if (this.uncommittedSize === 0) return;
    this.uncommittedSize = Math.max(0, this.uncommittedSize - payloadSize(ents));
  }

  /** The application has applied up to `applied`; leave a joint config automatically if due. */
  appliedTo(applied: number): void {
    const oldApplied = this.raftLog.applied;
    this.raftLog.appliedTo(applied);
    if (
      this.prs.config.autoLeave &&
      oldApplied <= this.pendingConfIndex &&
      applied >= this.pendingConfIndex &&
      this.state === StateType.Leader
    ) {
      // The joint configuration is in force everywhere it matters: propose leaving it.
      const ent: Entry = {
        term: 0,
        index: 0,
        type: EntryType.ConfChangeV2,
        data: encodeConfChangeV2({ transition: ConfChangeTransition.Auto, changes: [], context: EMPTY_BYTES }),
      };
      const accepted = this.appendEntry([ent]);
      assert(accepted, "refused un-refusable auto-leaving ConfChangeV2");
      this.pendingConfIndex = this.raftLog.lastIndex();
      this.pendingBcastAppend = true;
      this.logger.info(`${hex(this.id)} initiating automatic transition out of joint configuration ${describeConfState(this.prs.confState())}`);
    }
  }

  // ---------------------------------------------------------------- configuration

  applyConfChange(cc: ConfChangeV2): ConfState {
    let result: ConfChangeResult;
    try {
      result = new Changer(this.prs, this.raftLog.lastIndex()).applyV2(cc);
    } catch (e) {
      if (e instanceof ConfChangeError) throw new RaftUsageError(`cannot apply conf change: ${e.message}`);
      throw e;
    }
    return this.switchToConfig(result);
  }

  private switchToConfig(r: ConfChangeResult): ConfState {
    this.prs.config = r.config;
    this.prs.progress = r.progress;
    const cs = this.prs.confState();
    const pr = this.prs.progress.get(this.id);
    this.isLearner = pr !== undefined && pr.isLearner;
    if ((pr === undefined || this.isLearner) && this.state === StateType.Leader) {
      // Removed (or demoted) leader: it keeps serving until the application stops it, but it
      // counts for nothing and accepts no proposals.
      return cs;
    }
    if (this.state !== StateType.Leader || cs.voters.length === 0) return cs;
    if (this.maybeCommit()) {
      this.bcastAppend();
    } else {
      // Probe newly added replicas now rather than at the next heartbeat.
      this.prs.visit((id) => {
        if (id !== this.id) this.maybeSendAppend(id, false);
      });
    }
    if (this.leadTransferee !== NONE && !this.prs.isVoter(this.leadTransferee)) this.abortLeaderTransfer();
    return cs;
  }
}

function validateConfig(c: RaftConfig): void {
  const bad = (msg: string) => {
    throw new RaftUsageError(msg);
  };
  if (typeof c.id !== "bigint" || c.id <= 0n || c.id >= 2n ** 64n) bad("cannot use none as id");
  if (!(c.heartbeatTick > 0)) bad("heartbeat tick must be greater than 0");
  if (!(c.electionTick > c.heartbeatTick)) bad("election tick must be greater than heartbeat tick");
  if (c.maxInflightMsgs !== undefined && !(c.maxInflightMsgs > 0)) bad("max inflight messages must be greater than 0");
  if (c.maxSizePerMsg !== undefined && !(c.maxSizePerMsg > 0)) bad("max size per msg must be greater than 0");
  if (c.readOnlyOption === "lease-based" && !c.checkQuorum) bad("CheckQuorum must be enabled when ReadOnlyOption is ReadOnlyLeaseBased");
}
