/**
 * etcdserverpb.Lease. Grant and revoke go through Raft; keep-alive and time-to-live are answered
 * by the leader's lessor (it owns the expiry clock): the member asks the leader when it is a
 * follower.
 */
import { Status, type MemberHandlers } from "../../grpc/index.js";
import { MAX_LEASE_TTL_SEC } from "../../lease/ttl.js";
import { Errors, toEtcdError } from "../errors.js";
import type { V3Server } from "../v3_server.js";
import { authorized, credentialsOf } from "./authorize.js";
import { guarded, requireLeaderIfAsked } from "./guard.js";
import { header } from "./header.js";
import type { Quota } from "./quota.js";

export function leaseService(s: V3Server, quota: Quota): MemberHandlers<"etcdserverpb.Lease"> {
  return {
    LeaseGrant: (req, ctx) =>
      guarded(async () => {
        requireLeaderIfAsked(s, ctx);
        const over = quota.check(0);
        if (over !== undefined) await over;
        // Checked before proposing: a TTL beyond 2^53 would not survive the trip through the log.
        if (req.TTL > MAX_LEASE_TTL_SEC) throw Errors.leaseTTLTooLarge();
        const { response, revision } = await (await authorized(s, ctx)).leaseGrant({ ID: req.ID, TTL: req.TTL }, ctx.signal);
        return { header: header(s, revision), ...response };
      }),

    LeaseRevoke: (req, ctx) =>
      guarded(async () => {
        requireLeaderIfAsked(s, ctx);
        const { revision } = await (await authorized(s, ctx)).leaseRevoke(req.ID, ctx.signal);
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
            const TTL = await s.leaseRenew(req.ID, ctx.signal);
            call.write({ header: header(s), ID: req.ID, TTL });
          } catch (e) {
            // etcd answers an unknown lease with TTL 0 on the stream, and ends it on other errors.
            if (toEtcdError(e).code === Status.NOT_FOUND) call.write({ header: header(s), ID: req.ID, TTL: 0 });
            else call.fail(e as Error);
          }
        });
      });
      call.onEnd(() => void chain.then(() => call.end()));
    },

    LeaseTimeToLive: (req, ctx) =>
      guarded(async () => {
        requireLeaderIfAsked(s, ctx);
        const { token } = credentialsOf(ctx);
        const t = await (await authorized(s, ctx)).leaseTimeToLive({ ID: req.ID, keys: req.keys, ...(token === undefined ? {} : { token }) }, ctx.signal);
        return { header: header(s), ...t };
      }),

    LeaseLeases: (_req, ctx) =>
      guarded(async () => {
        requireLeaderIfAsked(s, ctx);
        return { header: header(s), leases: s.leaseLeases().map((ID) => ({ ID })) };
      }),
  };
}
