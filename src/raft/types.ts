/**
 * The Raft core's vocabulary, shaped after etcd's raftpb: entries, hard state, snapshots,
 * configuration state and messages. Everything outside `src/raft` (the WAL, the peer transport,
 * the server) speaks in these types, so they change only with care.
 *
 * Node ids are etcd's member ids: any non-zero uint64, held exactly as a bigint. A bigint rather
 * than a 16-hex string or a number: it is exact over all 64 bits, a primitive (so `===`, Map and
 * Set keys compare by value), typed apart from number (the compiler catches an id mixed with an
 * index), and it encodes to a varint without parsing. Raft only compares ids and uses them as
 * keys, never does arithmetic on them, so the hot paths pay no bigint arithmetic.
 * Indexes and terms are safe integers: 2^53 entries is beyond any log's lifetime.
 */

export type NodeId = bigint;

/** 0 means "no node": no leader known, no vote cast. */
export const NONE: NodeId = 0n;

/** Sort order of node ids (numeric, as etcd sorts its uint64 ids). */
export function compareNodeIds(a: NodeId, b: NodeId): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

export enum EntryType {
  Normal = 0,
  ConfChange = 1,
  ConfChangeV2 = 2,
}

export interface Entry {
  term: number;
  index: number;
  type: EntryType;
  /** Opaque to raft. An empty normal entry is the leader's no-op of a new term. */
  data: Uint8Array;
}

/** What must be on stable storage before any message of the same Ready is sent. */
export interface HardState {
  term: number;
  vote: NodeId;
  commit: number;
}

export const EMPTY_HARD_STATE: Readonly<HardState> = Object.freeze({ term: 0, vote: NONE, commit: 0 });

/** The membership in force. In a joint configuration `votersOutgoing` is non-empty. */
export interface ConfState {
  voters: NodeId[];
  learners: NodeId[];
  /** Voters of the outgoing configuration while in joint consensus (empty otherwise). */
  votersOutgoing: NodeId[];
  /** Learners that become learners only when the joint configuration is left (were voters). */
  learnersNext: NodeId[];
  /** Leave the joint configuration automatically once it is committed. */
  autoLeave: boolean;
}

/** etcd's raftpb.ConfState.String(), ids in hex as etcd's raft logs print them. */
export function describeConfState(cs: ConfState): string {
  const ids = (l: readonly NodeId[]) => `[${l.map((id) => id.toString(16)).join(" ")}]`;
  return `Voters:${ids(cs.voters)} VotersOutgoing:${ids(cs.votersOutgoing)} Learners:${ids(cs.learners)} LearnersNext:${ids(cs.learnersNext)} AutoLeave:${cs.autoLeave}`;
}

export interface SnapshotMetadata {
  confState: ConfState;
  index: number;
  term: number;
}

export interface Snapshot {
  /** The application's state machine image (or a pointer to it); opaque to raft. */
  data: Uint8Array;
  metadata: SnapshotMetadata;
}

export enum ConfChangeType {
  AddNode = 0,
  RemoveNode = 1,
  UpdateNode = 2,
  AddLearnerNode = 3,
}

/** A single membership change (etcd's ConfChange / ConfChangeSingle). */
export interface ConfChangeSingle {
  type: ConfChangeType;
  nodeId: NodeId;
}

export enum ConfChangeTransition {
  /** Joint consensus when more than one change, simple otherwise; leave joint automatically. */
  Auto = 0,
  /** Joint consensus, left automatically. */
  JointImplicit = 1,
  /** Joint consensus, left only by an explicit empty ConfChangeV2. */
  JointExplicit = 2,
}

/** etcd's ConfChangeV2: several changes applied together. An empty `changes` leaves a joint config. */
export interface ConfChangeV2 {
  transition: ConfChangeTransition;
  changes: ConfChangeSingle[];
  /** Opaque application context carried with the change (etcd puts the Member record here). */
  context: Uint8Array;
}

export enum MessageType {
  MsgHup = 0,
  MsgBeat = 1,
  MsgProp = 2,
  MsgApp = 3,
  MsgAppResp = 4,
  MsgVote = 5,
  MsgVoteResp = 6,
  MsgSnap = 7,
  MsgHeartbeat = 8,
  MsgHeartbeatResp = 9,
  MsgUnreachable = 10,
  MsgSnapStatus = 11,
  MsgCheckQuorum = 12,
  MsgTransferLeader = 13,
  MsgTimeoutNow = 14,
  MsgReadIndex = 15,
  MsgReadIndexResp = 16,
  MsgPreVote = 17,
  MsgPreVoteResp = 18,
}

/** One Raft message. Field meanings follow etcd's raftpb.Message. */
export interface Message {
  type: MessageType;
  to: NodeId;
  from: NodeId;
  term: number;
  /** Term of the entry at `index` (MsgApp), or of the candidate's last entry (votes). */
  logTerm: number;
  index: number;
  entries: Entry[];
  commit: number;
  snapshot?: Snapshot;
  reject: boolean;
  rejectHint: number;
  /** Opaque context: ReadIndex request ids, campaign-transfer marker. */
  context: Uint8Array;
}

/** A linearizable read confirmed by a quorum: serve `requestCtx` once applied ≥ `index`. */
export interface ReadState {
  index: number;
  requestCtx: Uint8Array;
}

export enum StateType {
  Follower = 0,
  Candidate = 1,
  Leader = 2,
  PreCandidate = 3,
}

/** Volatile state that the application may want to observe (leader, role). */
export interface SoftState {
  lead: NodeId;
  raftState: StateType;
}

/**
 * The persisted log as the Raft core reads it. The WAL-backed implementation (src/wal) and the
 * in-memory one (src/raft/storage.ts) both implement it. Reads are synchronous: the recent tail is
 * held in memory, so only lagging followers cause reads from disk.
 */
export interface Storage {
  initialState(): { hardState: HardState; confState: ConfState };
  /** Entries in [lo, hi), at most `maxSizeBytes` of data (always at least one entry). */
  entries(lo: number, hi: number, maxSizeBytes: number): Entry[];
  /** Term of entry i; i may be firstIndex()-1 (the snapshot's term). */
  term(i: number): number;
  lastIndex(): number;
  /** Index of the first entry still available (snapshot index + 1). */
  firstIndex(): number;
  snapshot(): Snapshot;
}

/** Storage errors raft understands; thrown by Storage methods. */
export class CompactedError extends Error {
  constructor() {
    super("requested index is unavailable due to compaction");
    this.name = "CompactedError";
  }
}

export class UnavailableError extends Error {
  constructor() {
    super("requested entry at index is unavailable");
    this.name = "UnavailableError";
  }
}

export class SnapshotTemporarilyUnavailableError extends Error {
  constructor() {
    super("snapshot is temporarily unavailable");
    this.name = "SnapshotTemporarilyUnavailableError";
  }
}

export class SnapOutOfDateError extends Error {
  constructor() {
    super("requested index is older than the existing snapshot");
    this.name = "SnapOutOfDateError";
  }
}

/** Thrown when a proposal cannot be accepted: no leader known, or a leader transfer is in progress. */
export class ProposalDroppedError extends Error {
  constructor(
    readonly reason: "no leader" | "transfer in progress" | "not a member" | "conf change pending" | "too many uncommitted entries" | "invalid conf change",
  ) {
    super(`raft proposal dropped: ${reason}`);
    this.name = "ProposalDroppedError";
  }
}

export function emptyConfState(): ConfState {
  return { voters: [], learners: [], votersOutgoing: [], learnersNext: [], autoLeave: false };
}

export function isEmptySnapshot(s: Snapshot | undefined): boolean {
  return s === undefined || s.metadata.index === 0;
}

/**
 * The size an entry counts for in every byte limit (MsgApp size, inflight bytes, Storage.entries'
 * maxSizeBytes): its payload plus a fixed 16 bytes for term, index and type, so that even empty
 * entries (no-ops) are bounded per message.
 */
export function entrySizeBytes(e: Entry): number {
  return e.data.byteLength + 16;
}

/** The longest prefix of `ents` within `maxSizeBytes` (by entrySizeBytes), but always at least one entry. */
export function limitSize(ents: Entry[], maxSizeBytes: number): Entry[] {
  if (ents.length === 0) return ents;
  let size = entrySizeBytes(ents[0]);
  let limit = 1;
  for (; limit < ents.length; limit++) {
    size += entrySizeBytes(ents[limit]);
    if (size > maxSizeBytes) break;
  }
  return limit === ents.length ? ents : ents.slice(0, limit);
}
