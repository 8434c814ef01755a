/**
 * Linearizable reads (etcd's linearizableReadLoop): every read waiting when a round starts shares
 * one ReadIndex quorum round; the round's request context identifies raft's answer (ReadState);
 * its waiters are released once this member has applied up to the read index. While a round is
 * out, new reads gather for the next one, which starts as soon as this one is answered.
 *
 * A round is asked again every READ_INDEX_RETRY_MS (etcd's readIndexRetryTime: raft drops a
 * ReadIndex without a leader or before the leader committed in its term) and fails with "request
 * timed out" after the request timeout.
 */
import type { NodeId } from "../raft/types.js";
import { ProposalDroppedError } from "../raft/index.js";
import type { ReadState } from "../raft/types.js";
import { Errors } from "./errors.js";

/** Bound on linearizable reads waiting for the next ReadIndex round. */
export const MAX_PENDING_READS = 100_000;
/** etcd's readIndexRetryTime. */
export const READ_INDEX_RETRY_MS = 500;

export interface ReadIndexOptions {
  /** Prefixes every round's context, so rounds of different members never match. */
  memberId: NodeId;
  requestTimeoutMs: number;
  /** raft's ReadIndex; throws ProposalDroppedError when raft cannot take it now (no leader). */
  readIndex(ctx: Uint8Array): void;
  /** The loop should run (raft has something to send). */
  wake(): void;
  /** Resolves once this member has applied up to `index`. */
  waitApplied(index: number): Promise<void>;
  /** etcd_server_read_indexes_failed_total. */
  failed: { inc(): void };
  /** etcd_server_slow_read_indexes_total: a round not answered within READ_INDEX_RETRY_MS, asked again. */
  slow?: { inc(): void };
  /** Bound on waiting reads (default MAX_PENDING_READS). */
  maxPending?: number;
}

interface Waiter {
  resolve(): void;
  reject(e: Error): void;
}

interface Round {
  ctxKey: string;
  waiters: Waiter[];
  retry: NodeJS.Timeout;
  deadline: NodeJS.Timeout;
}

export class ReadIndex {
  private pending: Waiter[] = [];
  private round: Round | undefined;
  private seq = 0;
  private stopped = false;

  constructor(private readonly o: ReadIndexOptions) {}

  /** Resolves when this member has applied everything committed before the call. */
  notify(): Promise<void> {
    if (this.stopped) return Promise.reject(Errors.stopped());
    if (this.pending.length >= (this.o.maxPending ?? MAX_PENDING_READS)) return Promise.reject(Errors.tooManyRequests());
    return new Promise((resolve, reject) => {
      this.pending.push({ resolve, reject });
      if (this.round === undefined) this.start();
    });
  }

  /** Raft's answers of one Ready: the one for the round in flight releases it (after its apply). */
  onReadStates(states: readonly ReadState[]): void {
    const round = this.round;
    if (round === undefined) return;
    for (const rs of states) {
      if (Buffer.from(rs.requestCtx).toString("hex") !== round.ctxKey) continue;
      void this.o.waitApplied(rs.index).then(() => this.finish(round, undefined));
      // The round is answered: the next batch may start its quorum round now.
      clearInterval(round.retry);
      this.round = undefined;
      this.start();
      return;
    }
  }

  /** The member stops: the round in flight and every waiting read fail. */
  stop(): void {
    this.stopped = true;
    if (this.round) this.finish(this.round, Errors.stopped());
    for (const w of this.pending.splice(0)) w.reject(Errors.stopped());
  }

  private start(): void {
    if (this.pending.length === 0 || this.round !== undefined || this.stopped) return;
    const waiters = this.pending;
    this.pending = [];
    const ctx = Buffer.alloc(8);
    ctx.writeUInt32BE(this.seq++ >>> 0, 4);
    ctx.writeUInt32BE(Number(this.o.memberId & 0xffffffffn), 0);
    const round: Round = {
      ctxKey: ctx.toString("hex"),
      waiters,
      retry: setInterval(() => {
        this.o.slow?.inc();
        this.request(ctx);
      }, READ_INDEX_RETRY_MS),
      deadline: setTimeout(() => this.finish(round, Errors.timeout()), this.o.requestTimeoutMs),
    };
    this.round = round;
    this.request(ctx);
  }

  private request(ctx: Buffer): void {
    try {
      this.o.readIndex(ctx);
    } catch (err) {
      // No leader yet: the retry timer asks again, the round's deadline bounds the wait.
      if (!(err instanceof ProposalDroppedError)) throw err;
      return;
    }
    this.o.wake();
  }

  private finish(round: Round, err: Error | undefined): void {
    clearInterval(round.retry);
    clearTimeout(round.deadline);
    if (this.round === round) {
      this.round = undefined;
      this.start();
    }
    const ws = round.waiters.splice(0);
    if (err) this.o.failed.inc();
    for (const w of ws) {
      if (err) w.reject(err);
      else w.resolve();
    }
  }
}
