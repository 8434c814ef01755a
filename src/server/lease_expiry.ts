/**
 * Lease expiry on the leader (etcd's revokeExpiredLeases loop in server.go): every
 * EXPIRY_POLL_INTERVAL_MS the primary lessor hands out the leases whose time ran out, and each is
 * revoked through raft, so every member deletes its keys at the same revision. A failed revoke is
 * only logged: the lessor hands the lease out again after its retry interval.
 */
import { EXPIRY_POLL_INTERVAL_MS } from "../lease/lessor.js";
import type { LeaseId } from "../lease/types.js";
import type { ApplyOutcome } from "./apply.js";
import type { Logger } from "./logger.js";
import type { ProposedRequest } from "./raft_request.js";

export interface LeaseExpiryOptions {
  isLeader(): boolean;
  /** The primary lessor's expired leases (ids to revoke). */
  expiredLeases(): Iterable<LeaseId>;
  propose(req: ProposedRequest): Promise<ApplyOutcome>;
  logger: Logger;
  /** etcd_debugging_server_lease_expired_total: counted once a revoke of an expired lease applied. */
  expired?: { inc(): void };
}

export class LeaseExpiry {
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly o: LeaseExpiryOptions) {}

  start(): void {
    this.timer = setInterval(() => this.revokeExpired(), EXPIRY_POLL_INTERVAL_MS);
  }

  stop(): void {
    clearInterval(this.timer);
  }

  /** One poll: proposes a revoke for every expired lease (leader only). */
  revokeExpired(): void {
    if (!this.o.isLeader()) return;
    for (const id of this.o.expiredLeases()) {
      this.o.propose({ leaseRevoke: { ID: id } }).then(
        (outcome) => {
          if (outcome.error === undefined) this.o.expired?.inc();
        },
        (err: unknown) => {
          this.o.logger.debug({ leaseId: id.toString(16), err: String(err) }, "failed to revoke expired lease");
        },
      );
    }
  }
}
