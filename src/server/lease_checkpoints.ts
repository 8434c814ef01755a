/**
 * Lease checkpoints on the leader (etcd's lessor checkpointScheduledLeases, with
 * --experimental-enable-lease-checkpoint): every EXPIRY_POLL_INTERVAL_MS the primary lessor hands
 * out the remaining TTLs that are due (each lease is checkpointed once per
 * --experimental-lease-checkpoint-interval) in batches of at most maxLeaseCheckpointBatchSize
 * (1000), and each batch is proposed through raft as one LeaseCheckpoint, so every member knows
 * what is left of each lease and a new leader restarts it from there instead of from its full TTL.
 * A poll proposes at most leaseCheckpointRate/2 batches (etcd's bound), one at a time.
 *
 * Before a leadership transfer the operator asked for (MoveLeader), every lease is checkpointed at
 * once (`checkpointAll`): leases shorter than the interval are never due, yet they too should keep
 * what is left across the transfer.
 */
import { DEFAULT_CHECKPOINT_BATCH_SIZE_MAX, EXPIRY_POLL_INTERVAL_MS } from "../lease/lessor.js";
import type { LeaseCheckpoint } from "../lease/types.js";
import type { ApplyOutcome } from "./apply.js";
import type { Logger } from "./logger.js";
import type { ProposedRequest } from "./raft_request.js";

/** etcd's leaseCheckpointRate: checkpoint batches per second at most. */
const LEASE_CHECKPOINT_RATE = 1000;

export interface LeaseCheckpointsOptions {
  isLeader(): boolean;
  /** The primary lessor's due checkpoints, at most `limit`. */
  dueCheckpoints(limit: number): LeaseCheckpoint[];
  /** Every lease's remaining TTL now (empty unless primary with checkpointing). */
  allCheckpoints(): LeaseCheckpoint[];
  propose(req: ProposedRequest): Promise<ApplyOutcome>;
  logger: Logger;
}

export class LeaseCheckpoints {
  private timer: NodeJS.Timeout | undefined;
  private polling = false;

  constructor(private readonly o: LeaseCheckpointsOptions) {}

  start(): void {
    this.timer = setInterval(() => void this.poll(), EXPIRY_POLL_INTERVAL_MS);
  }

  stop(): void {
    clearInterval(this.timer);
  }

  /** One poll: proposes the due checkpoints, batch after batch (leader only). */
  async poll(): Promise<void> {
    if (this.polling || !this.o.isLeader()) return;
    this.polling = true;
    try {
      for (let i = 0; i < LEASE_CHECKPOINT_RATE / 2; i++) {
        const batch = this.o.dueCheckpoints(DEFAULT_CHECKPOINT_BATCH_SIZE_MAX);
        if (batch.length === 0) break;
        await this.propose(batch);
      }
    } finally {
      this.polling = false;
    }
  }

  /** Checkpoints every lease now, in batches; resolves once all are applied (or failed, logged). */
  async checkpointAll(): Promise<void> {
    const all = this.o.allCheckpoints();
    for (let i = 0; i < all.length; i += DEFAULT_CHECKPOINT_BATCH_SIZE_MAX) {
      await this.propose(all.slice(i, i + DEFAULT_CHECKPOINT_BATCH_SIZE_MAX));
    }
    if (all.length > 0) this.o.logger.info({ leases: all.length }, "checkpointed the remaining TTL of every lease before the leadership transfer");
  }

  private async propose(batch: LeaseCheckpoint[]): Promise<void> {
    try {
      const r = await this.o.propose({ leaseCheckpoint: { checkpoints: batch.map((c) => ({ ID: c.id, remaining_TTL: c.remainingTtlSec })) } });
      if (r.error) throw r.error;
    } catch (err) {
      // Not fatal: a missed checkpoint only means a new leader restarts the lease from an older one.
      this.o.logger.warn({ checkpoints: batch.length, err: String(err) }, "failed to checkpoint leases");
    }
  }
}
