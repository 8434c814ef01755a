/**
 * What the API handlers (src/server/api) may ask of the member (etcd's v3_server.go: RaftKV,
 * Lessor, and the getters v3rpc's maintenance and cluster servers take). The member sequences
 * each request itself — a linearizable read waits for its ReadIndex round and then reads; a
 * write is proposed and answered once applied — so a handler only checks the request, asks,
 * and adds the response header.
 */
import type { AuthInfo } from "../auth/types.js";
import type { AlarmRequest } from "../pb/member-types.js";
import type { HashKvResult } from "../mvcc/kvstore.js";
import type { RangeReadResult } from "../mvcc/kvstore_range.js";
import type { RangeEncoding } from "./range_encoding.js";
import type {
  CompactionRequest,
  DeleteRangeRequest,
  DeleteRangeResponse,
  PutRequest,
  PutResponse,
  RangeRequest,
  TxnRequest,
  TxnResponse,
} from "../mvcc/types.js";
import type { SnapshotChunk } from "../etcd_format/index.js";
import type { WatchStream } from "../mvcc/watch_stream.js";
import type { NodeId } from "../raft/types.js";
import type { AlarmMember, AlarmType } from "./alarms.js";
import type { Member } from "./member.js";
import type { ProposedRequest } from "./raft_request.js";
import type { LeaseId } from "../lease/types.js";

/** An applied request's response and the store revision after it (the response header's). */
export interface Applied<T> {
  response: T;
  revision: number;
}

/** The limits the handlers check requests against (etcd's flags of the same names). */
export interface RequestLimits {
  /** --max-txn-ops. */
  maxTxnOps: number;
  /** --max-request-bytes. */
  maxRequestBytes: number;
  /** --quota-backend-bytes as applied; null when the quota is disabled. */
  quotaBackendBytes: number | null;
  /** --election-timeout in ms (how long a watch stream tolerates having no leader). */
  electionMs: number;
}

/** Maintenance.Status's view of the member. */
export interface MemberStatus {
  dbSizeBytes: number;
  /** The part of dbSizeBytes holding data (etcd's dbSizeInUse: without free pages). */
  dbSizeInUseBytes: number;
  leader: NodeId;
  raftIndex: number;
  raftTerm: number;
  raftAppliedIndex: number;
  alarms: AlarmMember[];
  isLearner: boolean;
}

/** What a request presents to say who it comes from. */
export interface Credentials {
  /** Metadata `token` (or `authorization`, the gateway's). */
  token?: string;
  /** The verified client certificate's common name (with --client-cert-auth). */
  certCommonName?: string;
}

/** The Auth service's requests other than Authenticate, as they enter the log. */
export type AuthChangeRequest = Pick<
  ProposedRequest,
  | "authEnable"
  | "authDisable"
  | "authUserAdd"
  | "authUserDelete"
  | "authUserGet"
  | "authUserChangePassword"
  | "authUserGrantRole"
  | "authUserRevokeRole"
  | "authUserList"
  | "authRoleList"
  | "authRoleAdd"
  | "authRoleDelete"
  | "authRoleGet"
  | "authRoleGrantPermission"
  | "authRoleRevokePermission"
>;

export interface V3Server {
  readonly memberId: NodeId;
  readonly clusterId: NodeId;
  readonly limits: RequestLimits;
  /** The current raft term and store revision, for response headers. */
  raftTerm(): number;
  currentRevision(): number;
  /** The leader as this member knows it (NONE: no leader). */
  leader(): NodeId;

  // ---- KV (etcd's RaftKV)
  /**
   * A range: linearizable unless `serializable`, read in slices at one revision. A `spill` takes
   * the kvs of a range that needs more than one slice (the answer is then `spilled`, its kvs empty).
   */
  range(req: RangeRequest, signal?: AbortSignal, spill?: RangeEncoding): Promise<RangeReadResult>;
  /**
   * Writes take the request's own protobuf bytes when the caller has them (`encoded`: a client's
   * call, decoded into `req` and not changed since), so the raft entry carries them as they came
   * instead of encoding `req` again.
   */
  put(req: PutRequest, signal?: AbortSignal, encoded?: Buffer): Promise<Applied<PutResponse>>;
  deleteRange(req: DeleteRangeRequest, signal?: AbortSignal, encoded?: Buffer): Promise<Applied<DeleteRangeResponse>>;
  /** A txn: a read-only one is served like a range (no proposal), any other goes through raft. */
  txn(req: TxnRequest, signal?: AbortSignal, encoded?: Buffer): Promise<Applied<TxnResponse>>;
  /** Resolves once the compaction is applied, and with `physical` once old revisions are gone. */
  compact(req: CompactionRequest, signal?: AbortSignal): Promise<{ revision: number }>;

  // ---- Lease (etcd's Lessor)
  /** Grants a lease; ID 0 lets the member pick one. */
  leaseGrant(req: { ID: LeaseId; TTL: number }, signal?: AbortSignal): Promise<Applied<{ ID: LeaseId; TTL: number; error: string }>>;
  leaseRevoke(id: LeaseId, signal?: AbortSignal): Promise<{ revision: number }>;
  /**
   * A keep-alive: the leader's lessor renews, a follower asks the leader (again every 50 ms while
   * there is none, until the request timeout or `signal` aborts, as etcd). Returns the TTL.
   */
  leaseRenew(id: LeaseId, signal?: AbortSignal): Promise<number>;
  /** Answered by the leader's lessor (asked through the leader when this member is a follower). */
  /** `token`: the caller's, carried when a follower asks the leader (which checks it again). */
  leaseTimeToLive(req: { ID: LeaseId; keys: boolean; token?: string }, signal?: AbortSignal): Promise<{ ID: LeaseId; TTL: number; grantedTTL: number; keys: Uint8Array[] }>;
  leaseLeases(): LeaseId[];

  // ---- Cluster
  memberList(linearizable: boolean): Promise<Member[]>;
  /** Adds a member (voter or learner); resolves with it and the membership after it. */
  memberAdd(peerUrls: readonly string[], isLearner: boolean): Promise<{ member: Member; members: Member[] }>;
  memberRemove(id: NodeId): Promise<Member[]>;
  memberUpdate(id: NodeId, peerUrls: readonly string[]): Promise<Member[]>;
  memberPromote(id: NodeId): Promise<Member[]>;

  // ---- Maintenance
  status(): MemberStatus;
  /** Active alarms of `type` (NONE: all). */
  listAlarms(type?: AlarmType): AlarmMember[];
  hasAlarm(type: AlarmType): boolean;
  /** Raises or clears an alarm through raft (GET is answered by `alarms`). */
  alarm(req: AlarmRequest, signal?: AbortSignal): Promise<Applied<{ alarms: AlarmMember[] }>>;
  /** Bytes the backend uses on disk (the quota's measure). */
  backendSizeBytes(): number;
  hash(): { hash: number; revision: number };
  hashKV(revision: number): HashKvResult;
  defragment(): Promise<void>;
  moveLeader(transferee: NodeId): Promise<void>;
  /**
   * Streams the backend at one consistent point as etcd 3.4's snapshot: the bbolt file in chunks
   * with the bytes still to come, then its SHA-256 (remaining 0).
   */
  snapshot(send: (chunk: SnapshotChunk) => Promise<void>): Promise<void>;

  // ---- Auth
  /** The identity `c` stands for (undefined: none given). Throws AuthError invalidAuthToken. */
  identify(c: Credentials, signal?: AbortSignal): Promise<AuthInfo | undefined>;
  /**
   * This API acting for `ai`: its reads are checked against ai's permissions at once, its writes
   * carry ai to the check at apply.
   */
  withAuth(ai: AuthInfo | undefined): V3Server;
  authEnabled(): boolean;
  authStatus(): { enabled: boolean; authRevision: number };
  /** etcd's IsAdminPermitted for this view's identity; throws AuthError. */
  requireAdmin(): void;
  /** Read permission on (key, rangeEnd) for this view's identity (a watch); throws AuthError. */
  isRangePermitted(key: Uint8Array | undefined, rangeEnd: Uint8Array | undefined): void;
  /** A bcrypt hash with --bcrypt-cost, off the event loop. */
  hashPassword(password: string): Promise<string>;
  authenticate(name: string, password: string, signal?: AbortSignal): Promise<Applied<{ token: string }>>;
  /** Any other Auth request, through raft; the response is the request's body (roles, users, perm). */
  authChange<T>(req: AuthChangeRequest, signal?: AbortSignal): Promise<Applied<T>>;

  // ---- Watch
  watchStream(): WatchStream;
  closeWatchStream(ws: WatchStream): void;
}
