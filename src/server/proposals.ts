/**
 * Proposals in flight (etcd's processInternalRaftRequestOnce and its wait registry): a handler's
 * request gets a cluster-unique id, waits in a bounded registry until the apply loop triggers
 * that id, and fails with etcd's errors when it cannot go on — too many requests (the registry is
 * full, or apply lags commit by more than etcd's maxGapBetweenApplyAndCommitIndex), request too
 * large, no leader / leader changed (raft dropped the batch), request timed out (its deadline
 * passed; "due to leader failure" while there is no leader), or the caller gave up (abort).
 *
 * Requests proposed in one event-loop turn enter raft as one batch at the loop's next turn
 * (flush). While no leader is known the batch is held, not refused: etcd's raft node takes no
 * proposal until it knows a leader (node.run reads propc only then), so a request made before the
 * first election, or during one, waits for a leader up to its request timeout and fails only then
 * ("request timed out, possibly due to previous leader failure"). A fresh member therefore shows
 * etcd_server_proposals_failed_total 0, as etcd's does. This file owns no timer: the server calls
 * `sweep` periodically, with the clock given.
 */
import { ProposalDroppedError } from "../raft/index.js";
import type { ConfChangeV2 } from "../raft/types.js";
import type { ApplyOutcome } from "./apply.js";
import { Errors } from "./errors.js";
import type { IdGenerator } from "./id_gen.js";
import { encodeRaftRequest, encodeRaftRequestWith, type ProposedRequest, type RawRequest, rawRequestMatches } from "./raft_request.js";
import { Wait } from "./wait.js";

/** etcd's maxGapBetweenApplyAndCommitIndex: beyond it new proposals get "too many requests". */
export const MAX_GAP_BETWEEN_APPLY_AND_COMMIT = 5000;
/** Bound on proposals waiting for their entry to apply. */
export const MAX_PENDING_PROPOSALS = 100_000;

/** What the registry reads of the member's raft state. */
export interface ProposalsState {
  committedIndex(): number;
  appliedIndex(): number;
  hasLeader(): boolean;
}

export interface ProposalsOptions {
  ids: IdGenerator;
  /** --max-request-bytes: a larger encoded request is refused before it reaches raft. */
  maxRequestBytes: number;
  /** How long a proposal may wait for its apply (etcd: 5 s + 2 election timeouts). */
  requestTimeoutMs: number;
  /** Monotonic milliseconds. */
  now(): number;
  state: ProposalsState;
  /** The loop should run (a batch is waiting). */
  wake(): void;
  /** etcd_server_proposals_failed_total. */
  failed: { inc(): void };
  /** Bound on waiting proposals (default MAX_PENDING_PROPOSALS). */
  maxPending?: number;
}

/** The raft node's side of a flush. */
export interface BatchProposer {
  /** Throws ProposalDroppedError when raft refuses the whole batch (no leader, transfer). */
  proposeBatch(data: Uint8Array[]): void;
  /** Throws ProposalDroppedError when raft refuses the change (no leader, one pending, invalid). */
  proposeConfChange(cc: ConfChangeV2): void;
}

export class Proposals {
  private readonly wait: Wait<ApplyOutcome>;
  private batch: Array<{ id: number; data: Buffer }> = [];
  private confChanges: Array<{ id: number; cc: ConfChangeV2 }> = [];
  /** `batch` holds proposals kept back for want of a leader (some may have failed meanwhile). */
  private holding = false;
  private stopped = false;

  constructor(private readonly o: ProposalsOptions) {
    this.wait = new Wait<ApplyOutcome>(o.maxPending ?? MAX_PENDING_PROPOSALS);
  }

  /** Proposals waiting for their apply (etcd_server_proposals_pending). */
  get size(): number {
    return this.wait.size;
  }

  /**
   * Proposes `req` and resolves with its outcome once applied on this member (rejects, never
   * throws). Not an async function: a put waits on the wait registry's promise itself, without an
   * async frame around it (each is a promise and a resumption per put on the main thread).
   */
  propose(req: ProposedRequest, signal?: AbortSignal, raw?: RawRequest): Promise<ApplyOutcome> {
    let id: number;
    let done: Promise<ApplyOutcome>;
    try {
      if (this.stopped) throw Errors.stopped();
      const st = this.o.state;
      if (this.wait.isFull() || st.committedIndex() > st.appliedIndex() + MAX_GAP_BETWEEN_APPLY_AND_COMMIT) {
        throw Errors.tooManyRequests();
      }
      id = this.o.ids.next();
      const data = this.entryData(id, req, raw);
      done = this.wait.register(id, this.deadline());
      this.batch.push({ id, data });
    } catch (err) {
      return Promise.reject(err as Error);
    }
    this.o.wake();
    return signal === undefined ? done : this.untilAborted(id, done, signal);
  }

  /** The entry's bytes: the client's own request bytes when given, refused past --max-request-bytes. */
  private entryData(id: number, req: ProposedRequest, raw: RawRequest | undefined): Buffer {
    if (raw !== undefined && !rawRequestMatches(req, raw)) throw new Error(`raw request bytes for field ${raw.field} do not go with the request proposed`);
    let data = raw === undefined ? encodeRaftRequest({ ID: id, ...req }) : encodeRaftRequestWith(id, raw, req.header ?? undefined);
    // The limit is etcd's on the marshalled request, which has no unknown fields a client's own
    // bytes may carry: a raw request over it is measured again as the codec encodes it.
    if (data.length > this.o.maxRequestBytes && raw !== undefined) data = encodeRaftRequest({ ID: id, ...req });
    if (data.length > this.o.maxRequestBytes) throw Errors.requestTooLarge();
    return data;
  }

  private async untilAborted(id: number, done: Promise<ApplyOutcome>, signal: AbortSignal): Promise<ApplyOutcome> {
    const onAbort = () => this.fail(id, Errors.timeout());
    signal.addEventListener("abort", onAbort, { once: true });
    try {
      return await done;
    } finally {
      signal.removeEventListener("abort", onAbort);
    }
  }

  /**
   * Proposes the membership change `make(id)` builds (its context carries the wait id `id`) and
   * resolves with its outcome once applied on this member (etcd's configure).
   */
  async proposeConfChange(make: (id: number) => ConfChangeV2): Promise<ApplyOutcome> {
    if (this.stopped) throw Errors.stopped();
    if (this.wait.isFull()) throw Errors.tooManyRequests();
    const id = this.o.ids.next();
    const done = this.wait.register(id, this.deadline());
    this.confChanges.push({ id, cc: make(id) });
    this.o.wake();
    return done;
  }

  /** Proposals held because no leader is known yet (they go to raft once one is). */
  get held(): number {
    return this.batch.length;
  }

  /**
   * Hands the proposals waiting so far to raft as one batch. Without a leader they stay held (see
   * the file comment); a batch raft refuses for want of a leader is held again; one refused for
   * any other reason (a leadership transfer) fails as etcd's does ("leader changed").
   */
  flush(raft: BatchProposer): void {
    // Like other proposals, membership changes wait for a leader (and are dropped once timed out).
    const confChanges = this.o.state.hasLeader() ? this.confChanges.splice(0) : [];
    for (const { id, cc } of confChanges) {
      if (!this.wait.has(id)) continue;
      try {
        raft.proposeConfChange(cc);
      } catch (err) {
        if (!(err instanceof ProposalDroppedError)) throw err;
        this.fail(id, confChangeDropped(err));
      }
    }
    if (this.batch.length === 0) return;
    let batch = this.batch;
    this.batch = [];
    if (this.holding) {
      // Proposals that timed out or were aborted while held are gone from the registry: drop them.
      batch = batch.filter((p) => this.wait.has(p.id));
      this.holding = false;
      if (batch.length === 0) return;
    }
    if (!this.o.state.hasLeader()) {
      this.hold(batch);
      return;
    }
    try {
      raft.proposeBatch(batch.map((p) => p.data));
    } catch (err) {
      if (!(err instanceof ProposalDroppedError)) throw err;
      if (err.reason === "no leader") {
        this.hold(batch);
        return;
      }
      for (const p of batch) this.fail(p.id, Errors.leaderChanged());
    }
  }

  private hold(batch: Array<{ id: number; data: Buffer }>): void {
    this.batch = batch;
    this.holding = true;
  }

  /** The entry of request `id` was applied: its handler (if still waiting) gets the outcome. */
  applied(id: number, outcome: ApplyOutcome): void {
    this.wait.trigger(id, outcome);
  }

  /**
   * A proposal made now is due at this time. Every proposal has the same timeout, so deadlines
   * come in order and the registry keeps them with its waiters: one sweep, not one timer each.
   */
  private deadline(): number {
    return this.o.now() + this.o.requestTimeoutMs;
  }

  /** Fails the proposals whose request timeout passed (etcd's "request timed out"). */
  sweep(): void {
    const error = this.o.state.hasLeader() ? Errors.timeout : Errors.timeoutDueToLeaderFail;
    const n = this.wait.expire(this.o.now(), error);
    for (let i = 0; i < n; i++) this.o.failed.inc();
  }

  /** The member stops: every waiting proposal fails, new ones are refused. */
  stop(): void {
    this.stopped = true;
    this.batch = [];
    this.confChanges = [];
    this.wait.failAll(Errors.stopped);
  }

  private fail(id: number, err: Error): void {
    if (this.wait.fail(id, err)) this.o.failed.inc();
  }
}

/**
 * etcd's leader turns a conf change it cannot take now (one pending, or invalid) into an empty
 * entry and its caller times out: the same answer here, given at once.
 */
function confChangeDropped(err: ProposalDroppedError): Error {
  if (err.reason === "no leader") return Errors.noLeader();
  if (err.reason === "conf change pending" || err.reason === "invalid conf change") return Errors.timeout();
  return Errors.leaderChanged();
}
