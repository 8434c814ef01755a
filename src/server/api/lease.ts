/**
 * etcdserverpb.Lease. Grant and revoke go through Raft; keep-alive and time-to-live are answered
 * by the leader's lessor (it owns the expiry clock), so a follower forwards them to the leader.
 */
import type { MemberHandlers } from "../../grpc/index.js";
import { LessorNotPrimaryError } from "../../lease/errors.js";
import { MAX_LEASE_TTL_SEC } from "../../lease/ttl.js";
import { NONE } from "../../raft/types.js";
import type { EtcdServer } from "../etcdserver.js";
import { Errors } from "../errors.js";
import type { LeaderClient } from "../leader_client.js";
import { guarded, requireLeaderIfAsked } from "./guard.js";
import { header } from "./header.js";
import type { Quota } from "./quota.js";

export function leaseService(s: EtcdServer, quota: Quota, leaderClient: LeaderClient): MemberHandlers<"etcdserverpb.Lease"> {
  /** The leader's client URL, or the reason there is none. */
  const leaderUrl = (): { leader: number; url: string } => {
    const leader = s.leader();
    if (leader === NONE) throw Errors.noLeader();
    const url = s.membership.get(leader)?.clientUrls[0];
    if (url === undefined) throw Errors.leaderChanged();
    return { leader, url };
  };

  const renew = async (id: number): Promise<number> => {
    if (s.isLeader()) {
      try {
        return s.lessor.keepAlive(id);
      } catch (e) {
        if (!(e instanceof LessorNotPrimaryError)) throw e;
      }
    }
    const { leader, url } = leaderUrl();
    return leaderClient.keepAlive(leader, url, id);
  };

  return {
    LeaseGrant: (req, ctx) =>
      guarded(async () => {
        requireLeaderIfAsked(s, ctx);
        await quota.check(0);
        // Checked before proposing: a TTL beyond 2^53 would not survive the trip through the log.
        if (req.TTL > MAX_LEASE_TTL_SEC) throw Errors.leaseTTLTooLarge();
        // etcd picks the id before proposing, so every member grants the same one.
        const ID = req.ID === 0 ? s.lessor.nextLeaseId() : req.ID;
        const { response, revision } = await s.proposeAndApply<object>({ leaseGrant: { ID, TTL: req.TTL } }, ctx.signal);
        return { header: header(s, revision), ...response };
      }),

    LeaseRevoke: (req, ctx) =>
      guarded(async () => {
        requireLeaderIfAsked(s, ctx);
        const { revision } = await s.proposeAndApply<object>({ leaseRevoke: { ID: req.ID } }, ctx.signal);
        return { header: header(s, revision) };
      }),

    LeaseKeepAlive: (call, ctx) => {
      // Renewals are answered in the order they came (clients match them by ID anyway).
      let chain = Promise.resolve();
      call.onMessage((req) => {
        chain = chain.then(async () => {
          if (call.ended) return;
          try {
            requireLeaderIfAsked(s, ctx);
            const TTL = await renew(req.ID);
            call.write({ header: header(s), ID: req.ID, TTL });
          } catch (e) {
            const err = e as { code?: number };
            // etcd answers an unknown lease with TTL 0 on the stream, and ends it on other errors.
            if (err.code === 5) call.write({ header: header(s), ID: req.ID, TTL: 0 });
            else call.fail(e as Error);
          }
        });
      });
      call.onEnd(() => void chain.then(() => call.end()));
    },

    LeaseTimeToLive: (req, ctx) =>
      guarded(async () => {
        requireLeaderIfAsked(s, ctx);
        if (!s.isLeader()) {
          const { leader, url } = leaderUrl();
          const r = await leaderClient.timeToLive(leader, url, { ID: req.ID, keys: req.keys });
          return { header: header(s), ID: r.ID, TTL: r.TTL, grantedTTL: r.grantedTTL, keys: r.keys };
        }
        const t = s.lessor.timeToLive(req.ID, { keys: req.keys });
        return { header: header(s), ID: t.id, TTL: t.ttlSec, grantedTTL: t.grantedTtlSec, keys: t.keys };
      }),

    LeaseLeases: (_req, ctx) =>
      guarded(async () => {
        requireLeaderIfAsked(s, ctx);
        return { header: header(s), leases: s.lessor.leases().map((ID) => ({ ID })) };
      }),
  };
}
