/**
 * The member's v3 API (etcd's v3_server.go): each request sequenced as etcd sequences it — a
 * linearizable read waits for its ReadIndex round, then reads the local store in slices; a write
 * is proposed through raft and answered once applied here; keep-alives and time-to-live are
 * answered by the leader's lessor. The API handlers see it through V3Server only.
 */
import { authError } from "../auth/errors.js";
import { PasswordQueueFullError, type PasswordHasher } from "../auth/password.js";
import type { AuthStore } from "../auth/store.js";
import type { TokenProvider } from "../auth/token.js";
import type { AuthInfo } from "../auth/types.js";
import { LessorNotPrimaryError } from "../lease/errors.js";
import type { Lessor } from "../lease/lessor.js";
import type { LeaseId } from "../lease/types.js";
import type { HashKvResult, KvStore } from "../mvcc/kvstore.js";
import type { RangeReadResult } from "../mvcc/kvstore_range.js";
import type { RangeEncoding } from "./range_encoding.js";
import type * as mvcc from "../mvcc/types.js";
import type { SnapshotChunk } from "../etcd_format/index.js";
import type { WatchStream } from "../mvcc/watch_stream.js";
import type { WatchableStore } from "../mvcc/watchable_store.js";
import type { AlarmRequest } from "../pb/member-types.js";
import { NONE, type NodeId } from "../raft/types.js";
import type { AlarmMember, AlarmType, Alarms } from "./alarms.js";
import type { ApplyOutcome } from "./apply.js";
import { checkTxnPermission, type AuthenticateResult } from "./apply_auth.js";
import { Status } from "../grpc/index.js";
import { Errors, toEtcdError } from "./errors.js";
import type { LeaderClient } from "./leader_client.js";
import type { Member } from "./member.js";
import type { Membership } from "./membership.js";
import type { RaftLoop } from "./raft_loop.js";
import type { Reconfigure } from "./reconfigure.js";
import { type ProposedRequest, type RawRequest, RawRequestField } from "./raft_request.js";
import type { ReadIndex } from "./read_index.js";
import type { Snapshots } from "./snapshots.js";
import { isTxnReadOnly, isTxnSerializable } from "../mvcc/txn_rules.js";
import type { Applied, AuthChangeRequest, Credentials, MemberStatus, RequestLimits, V3Server } from "./v3_server.js";
import type { ExpensiveRequests } from "./expensive_requests.js";

/** Authenticate retries while the auth revision moves under it (etcd loops; here a bound). */
const AUTHENTICATE_ATTEMPTS_MAX = 16;

/** etcd's throttle between a follower's attempts to renew a lease on the leader. */
export const RENEW_RETRY_MS = 50;

/**
 * No leader could take a forwarded lease request: none, gone, or no longer leading (UNAVAILABLE,
 * but not the request's own timeout), or this member leads and its lessor is not primary yet.
 */
function leaderUnavailable(e: unknown): boolean {
  if (e instanceof LessorNotPrimaryError) return true;
  if (!(e instanceof Error)) return false;
  const err = toEtcdError(e);
  return err.code === Status.UNAVAILABLE && err.message !== Errors.timeout().message;
}

function unwrapOutcome(o: ApplyOutcome): Applied<unknown> & { done?: Promise<void> } {
  if (o.error) throw o.error;
  return { response: o.response, revision: o.revision, done: o.done };
}

function rawOf(field: RawRequest["field"], bytes: Buffer | undefined): RawRequest | undefined {
  return bytes === undefined ? undefined : { field, bytes };
}

export interface V3ApiOptions {
  memberId: NodeId;
  clusterId: NodeId;
  limits: RequestLimits;
  raft: Pick<RaftLoop, "leader" | "isLeader" | "raftTerm" | "committed" | "applied" | "isLearner" | "moveLeader">;
  propose(req: ProposedRequest, signal?: AbortSignal, raw?: RawRequest): Promise<ApplyOutcome>;
  readIndex: Pick<ReadIndex, "notify">;
  kv: KvStore;
  watchable: WatchableStore;
  lessor: Lessor;
  alarms: Alarms;
  membership: Membership;
  auth: AuthStore;
  tokens: TokenProvider;
  passwords: PasswordHasher;
  backend: { sizeBytes(): number; sizeInUseBytes(): number };
  snapshots: Pick<Snapshots, "client">;
  /** etcd's ReqTimeout (5 s + 2 election timeouts): how long a follower's lease request waits for a leader. */
  requestTimeoutMs: number;
  /** Keep-alives and time-to-live of a follower go to the leader's lessor through it. */
  leaderClient: Pick<LeaderClient, "keepAlive" | "timeToLive">;
  /** Runs before a MoveLeader transfer (lease checkpoints, so the next leader keeps what is left). */
  beforeLeaderTransfer?: () => Promise<void>;
  reconfigure: Pick<Reconfigure, "addMember" | "removeMember" | "updateMember" | "promoteMember">;
  /** Maintenance.Defragment (defrag.ts: a leader hands leadership on before it vacuums). */
  defragment(): Promise<void>;
  /** etcd's "took too long" warnings for ranges (expensive_requests.ts). */
  expensive: Pick<ExpensiveRequests, "rangeServed" | "readOnlyTxnServed">;
}

export class V3Api implements V3Server {
  readonly memberId: NodeId;
  readonly clusterId: NodeId;
  readonly limits: RequestLimits;

  /**
   * `ai`: the identity this view acts for (withAuth); reads are checked against it here, writes
   * carry it in their entry's header to the permission check at apply.
   */
  constructor(
    private readonly o: V3ApiOptions,
    private readonly ai?: AuthInfo,
  ) {
    this.memberId = o.memberId;
    this.clusterId = o.clusterId;
    this.limits = o.limits;
  }

  withAuth(ai: AuthInfo | undefined): V3Server {
    return new V3Api(this.o, ai);
  }

  /**
   * etcd's AuthInfoFromCtx: a token (metadata `token`, or `authorization` from the gateway) must
   * stand for an identity, else "invalid auth token" (even with auth disabled, as etcd); without
   * one, the verified client certificate's common name when the member checks client certificates.
   */
  async identify(c: Credentials, signal?: AbortSignal): Promise<AuthInfo | undefined> {
    if (c.token !== undefined) {
      const ai = await this.o.tokens.info(c.token, this.o.auth.revision(), signal);
      if (ai === undefined) throw authError("invalidAuthToken");
      return ai;
    }
    if (c.certCommonName !== undefined && c.certCommonName !== "") return { username: c.certCommonName, revision: this.o.auth.revision() };
    return undefined;
  }

  authEnabled(): boolean {
    return this.o.auth.isEnabled();
  }

  authStatus(): { enabled: boolean; authRevision: number } {
    return { enabled: this.o.auth.isEnabled(), authRevision: this.o.auth.revision() };
  }

  requireAdmin(): void {
    this.o.auth.isAdminPermitted(this.ai);
  }

  isRangePermitted(key: Uint8Array | undefined, rangeEnd: Uint8Array | undefined): void {
    this.o.auth.isRangePermitted(this.ai, key, rangeEnd);
  }

  /** etcd's doSerialize tail: an identity older than the store after the read is stale. */
  private checkAuthRevisionAfterRead(): void {
    if (this.ai !== undefined && this.ai.revision !== 0 && this.ai.revision !== this.o.auth.revision()) throw authError("authOldRevision");
  }

  hashPassword(password: string): Promise<string> {
    return this.o.passwords.hash(password).then((h) => h.toString(), passwordError);
  }

  /**
   * etcd's Authenticate: the password is checked here (bcrypt off the event loop), then an entry
   * without it is proposed; if the auth revision moved between the check and the apply, again.
   */
  async authenticate(name: string, password: string, signal?: AbortSignal): Promise<Applied<{ token: string }>> {
    await this.o.readIndex.notify();
    const { auth, tokens } = this.o;
    for (let attempt = 0; ; attempt++) {
      const checked = await this.checkPassword(name, password);
      const { response, revision } = await this.proposeAndApply<AuthenticateResult>({ authenticate: { name, simpleToken: tokens.genTokenPrefix() } }, signal);
      if (checked === auth.revision() || attempt + 1 >= AUTHENTICATE_ATTEMPTS_MAX) {
        const token = response.token ?? (await tokens.sign(response.username, response.revision));
        return { response: { token }, revision };
      }
    }
  }

  private async checkPassword(name: string, password: string): Promise<number> {
    const { auth } = this.o;
    if (!auth.isEnabled()) throw authError("authNotEnabled");
    const u = auth.user(name);
    if (u === undefined || u.noPassword) throw authError("authFailed");
    const revision = auth.revision();
    const ok = await this.o.passwords.compare(password, u.password).catch(passwordError);
    if (!ok) throw authError("authFailed");
    return revision;
  }

  authChange<T>(req: AuthChangeRequest, signal?: AbortSignal): Promise<Applied<T>> {
    return this.proposeAndApply<T>(req, signal);
  }

  raftTerm(): number {
    return this.o.raft.raftTerm();
  }

  leader(): NodeId {
    return this.o.raft.leader();
  }

  /**
   * Proposes and unwraps: rejects with the applied error, else resolves with the response and
   * revision. Not an async function: one promise per write fewer on the main thread (issue 18).
   */
  private proposeAndApply<T>(req: ProposedRequest, signal?: AbortSignal, raw?: RawRequest): Promise<Applied<T> & { done?: Promise<void> }> {
    const withHeader = this.ai === undefined ? req : { ...req, header: { username: this.ai.username, authRevision: this.ai.revision } };
    return this.o.propose(withHeader, signal, raw).then(unwrapOutcome) as Promise<Applied<T> & { done?: Promise<void> }>;
  }

  currentRevision(): number {
    return this.o.kv.currentRevision();
  }

  range(req: mvcc.RangeRequest, signal?: AbortSignal, spill?: RangeEncoding): Promise<RangeReadResult> {
    return this.timedRead(
      async () => {
        if (!req.serializable) await this.o.readIndex.notify();
        this.o.auth.isRangePermitted(this.ai, req.key, req.rangeEnd);
        // Sliced over event-loop turns at one revision: a huge range does not stall other clients.
        const r = await this.o.kv.rangeAsync(req, signal, spill);
        this.checkAuthRevisionAfterRead();
        return r;
      },
      (tookMs, result, error) => this.o.expensive.rangeServed(tookMs, req, result, error, result?.spilled ? spill : undefined),
    );
  }

  /**
   * Runs a read timed as etcd times it for its "took too long" warning (warnOfExpensiveReadOnly*:
   * the whole request, its ReadIndex wait included) and tells `served` how long it took and how it ended.
   */
  private async timedRead<R>(read: () => Promise<R>, served: (tookMs: number, result: R | undefined, error: unknown) => void): Promise<R> {
    const startMs = performance.now();
    let result: R;
    try {
      result = await read();
    } catch (err) {
      served(performance.now() - startMs, undefined, err);
      throw err;
    }
    served(performance.now() - startMs, result, undefined);
    return result;
  }

  put(req: mvcc.PutRequest, signal?: AbortSignal, encoded?: Buffer): Promise<Applied<mvcc.PutResponse>> {
    return this.proposeAndApply<mvcc.PutResponse>({ put: req }, signal, rawOf(RawRequestField.put, encoded));
  }

  deleteRange(req: mvcc.DeleteRangeRequest, signal?: AbortSignal, encoded?: Buffer): Promise<Applied<mvcc.DeleteRangeResponse>> {
    return this.proposeAndApply<mvcc.DeleteRangeResponse>({ deleteRange: req }, signal, rawOf(RawRequestField.deleteRange, encoded));
  }

  async txn(req: mvcc.TxnRequest, signal?: AbortSignal, encoded?: Buffer): Promise<Applied<mvcc.TxnResponse>> {
    if (!isTxnReadOnly(req)) return this.proposeAndApply<mvcc.TxnResponse>({ txn: req }, signal, rawOf(RawRequestField.txn, encoded));
    // etcd serves read-only txns without a proposal: one ReadIndex round, then locally, in slices like Range.
    return this.timedRead(
      async () => {
        if (!isTxnSerializable(req)) await this.o.readIndex.notify();
        if (this.o.auth.isEnabled()) checkTxnPermission(this.o.auth, req, this.ai);
        const r = await this.o.kv.txnReadOnlyAsync(req, signal);
        this.checkAuthRevisionAfterRead();
        return { response: { succeeded: r.succeeded, responses: r.responses }, revision: r.revision };
      },
      (tookMs, result, error) => this.o.expensive.readOnlyTxnServed(tookMs, req, result, error),
    );
  }

  async compact(req: mvcc.CompactionRequest, signal?: AbortSignal): Promise<{ revision: number }> {
    const { revision, done } = await this.proposeAndApply<object>({ compaction: req }, signal);
    if (req.physical && done) await done;
    return { revision };
  }

  leaseGrant(req: { ID: LeaseId; TTL: number }, signal?: AbortSignal): Promise<Applied<{ ID: LeaseId; TTL: number; error: string }>> {
    // etcd picks the id before proposing, so every member grants the same one.
    const ID = req.ID === 0 ? this.o.lessor.nextLeaseId() : req.ID;
    return this.proposeAndApply({ leaseGrant: { ID, TTL: req.TTL } }, signal);
  }

  async leaseRevoke(id: LeaseId, signal?: AbortSignal): Promise<{ revision: number }> {
    const { revision } = await this.proposeAndApply<object>({ leaseRevoke: { ID: id } }, signal);
    return { revision };
  }

  /**
   * etcd's LeaseRenew: the leader renews in its lessor; any other member forwards the renewal to
   * the leader, and rides out an election while doing so (forwardToLeader).
   */
  leaseRenew(id: LeaseId, signal?: AbortSignal): Promise<number> {
    return this.forwardToLeader(() => this.renewOnce(id), signal);
  }

  /**
   * etcd's loop around a lease request a follower forwards to the leader (LeaseRenew,
   * LeaseTimeToLive): while no leader takes it (none elected, the one known is gone or no longer
   * leads, or its lessor is not primary yet) `attempt` runs again every RENEW_RETRY_MS, until
   * etcd's request timeout; then the answer is "no leader" if none was known at the last attempt,
   * else "request timed out". So a client's lease calls through a follower ride out an election
   * instead of failing at its first moment.
   */
  private async forwardToLeader<T>(attempt: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    const deadline = Date.now() + this.o.requestTimeoutMs;
    for (;;) {
      let noLeader = false;
      try {
        return await attempt();
      } catch (e) {
        if (!leaderUnavailable(e)) throw e;
        noLeader = e instanceof Error && e.message === Errors.noLeader().message;
      }
      if (signal?.aborted === true) throw Errors.canceled();
      if (Date.now() + RENEW_RETRY_MS >= deadline) throw noLeader ? Errors.noLeader() : Errors.timeout();
      await new Promise((resolve) => setTimeout(resolve, RENEW_RETRY_MS));
    }
  }

  private renewOnce(id: LeaseId): Promise<number> {
    // A leader whose lessor is not primary yet throws LessorNotPrimaryError: the caller tries again
    // (etcd's leader forwards to its own peer URL, where the same error comes back).
    if (this.o.raft.isLeader()) return Promise.resolve(this.o.lessor.keepAlive(id));
    const { leader, url } = this.leaderUrl();
    return this.o.leaderClient.keepAlive(leader, url, id);
  }

  /** etcd's LeaseTimeToLive: answered by the leader's lessor, forwarded to it from any other member (forwardToLeader). */
  leaseTimeToLive(req: { ID: LeaseId; keys: boolean; token?: string }, signal?: AbortSignal): Promise<{ ID: LeaseId; TTL: number; grantedTTL: number; keys: Uint8Array[] }> {
    return this.forwardToLeader(() => this.timeToLiveOnce(req), signal);
  }

  private async timeToLiveOnce(req: { ID: LeaseId; keys: boolean; token?: string }): Promise<{ ID: LeaseId; TTL: number; grantedTTL: number; keys: Uint8Array[] }> {
    if (!this.o.raft.isLeader()) {
      const { leader, url } = this.leaderUrl();
      if (req.token !== undefined || this.ai === undefined || !req.keys) {
        // The caller's token goes along: with auth on the leader authorizes the call again, and
        // without it refused every forwarded call ("user name is empty").
        const r = await this.o.leaderClient.timeToLive(leader, url, { ID: req.ID, keys: req.keys }, req.token);
        return { ID: r.ID, TTL: r.TTL, grantedTTL: r.grantedTTL, keys: r.keys };
      }
      return this.leaseTimeToLiveForCertificateUser(leader, url, req.ID);
    }
    const t = this.o.lessor.timeToLive(req.ID, { keys: req.keys });
    // etcd 3.4.26+ (CVE-2023-32082): the attached keys are shown only to a user who may read them all.
    if (req.keys) for (const key of t.keys) this.o.auth.isRangePermitted(this.ai, key, undefined);
    return { ID: t.id, TTL: t.ttlSec, grantedTTL: t.grantedTtlSec, keys: t.keys };
  }

  /**
   * LeaseTimeToLive with keys on a follower for a caller known only by its client certificate's CN
   * (no token): a CN cannot travel on the forwarded call as a token does (etcd forwards this request
   * over the peer port, where no user is checked). The leader gives the TTLs, which need no user;
   * the attached keys are this member's, read once it has applied everything the leader had
   * committed (a ReadIndex round, as a linearizable read), and checked against the caller's read
   * permission here, as the leader checks them for a token's user.
   */
  private async leaseTimeToLiveForCertificateUser(leader: NodeId, url: string, id: LeaseId): Promise<{ ID: LeaseId; TTL: number; grantedTTL: number; keys: Uint8Array[] }> {
    const r = await this.o.leaderClient.timeToLive(leader, url, { ID: id, keys: false });
    if (r.TTL === -1) return { ID: r.ID, TTL: r.TTL, grantedTTL: r.grantedTTL, keys: [] };
    await this.o.readIndex.notify();
    const local = this.o.lessor.timeToLive(id, { keys: true });
    // Revoked between the leader's answer and the ReadIndex: the lease is gone, as the leader would now say.
    if (local.ttlSec === -1) return { ID: id, TTL: -1, grantedTTL: 0, keys: [] };
    for (const key of local.keys) this.o.auth.isRangePermitted(this.ai, key, undefined);
    return { ID: r.ID, TTL: r.TTL, grantedTTL: r.grantedTTL, keys: local.keys };
  }

  leaseLeases(): LeaseId[] {
    return this.o.lessor.leases();
  }

  /** The leader's client URL, or the reason there is none. */
  private leaderUrl(): { leader: NodeId; url: string } {
    const leader = this.o.raft.leader();
    if (leader === NONE) throw Errors.noLeader();
    const url = this.o.membership.get(leader)?.clientUrls[0];
    if (url === undefined) throw Errors.leaderChanged();
    return { leader, url };
  }

  async memberList(linearizable: boolean): Promise<Member[]> {
    if (linearizable) await this.o.readIndex.notify();
    return this.o.membership.list();
  }

  memberAdd(peerUrls: readonly string[], isLearner: boolean): Promise<{ member: Member; members: Member[] }> {
    return this.o.reconfigure.addMember(peerUrls, isLearner);
  }

  memberRemove(id: NodeId): Promise<Member[]> {
    return this.o.reconfigure.removeMember(id);
  }

  memberUpdate(id: NodeId, peerUrls: readonly string[]): Promise<Member[]> {
    return this.o.reconfigure.updateMember(id, peerUrls);
  }

  memberPromote(id: NodeId): Promise<Member[]> {
    return this.o.reconfigure.promoteMember(id);
  }

  status(): MemberStatus {
    return {
      dbSizeBytes: this.o.backend.sizeBytes(),
      dbSizeInUseBytes: this.o.backend.sizeInUseBytes(),
      leader: this.o.raft.leader(),
      raftIndex: this.o.raft.committed(),
      raftTerm: this.o.raft.raftTerm(),
      raftAppliedIndex: this.o.raft.applied(),
      alarms: this.o.alarms.list(),
      isLearner: this.o.raft.isLearner(),
    };
  }

  listAlarms(type?: AlarmType): AlarmMember[] {
    return this.o.alarms.list(type);
  }

  hasAlarm(type: AlarmType): boolean {
    return this.o.alarms.has(type);
  }

  alarm(req: AlarmRequest, signal?: AbortSignal): Promise<Applied<{ alarms: AlarmMember[] }>> {
    return this.proposeAndApply({ alarm: req }, signal);
  }

  backendSizeBytes(): number {
    return this.o.backend.sizeBytes();
  }

  hash(): { hash: number; revision: number } {
    return this.o.kv.hash();
  }

  hashKV(revision: number): HashKvResult {
    return this.o.kv.hashKV(revision);
  }

  defragment(): Promise<void> {
    return this.o.defragment();
  }

  snapshot(send: (chunk: SnapshotChunk) => Promise<void>): Promise<void> {
    return this.o.snapshots.client(send);
  }

  watchStream(): WatchStream {
    return this.o.watchable.watchStream();
  }

  closeWatchStream(ws: WatchStream): void {
    this.o.watchable.closeStream(ws);
  }

  async moveLeader(transferee: NodeId): Promise<void> {
    if (this.o.raft.isLeader() && transferee !== this.memberId) await this.o.beforeLeaderTransfer?.();
    return this.o.raft.moveLeader(transferee);
  }
}

/** A full password queue is etcd's "too many requests"; anything else is passed on. */
function passwordError(e: unknown): never {
  if (e instanceof PasswordQueueFullError) throw Errors.tooManyRequests();
  throw e;
}
