/**
 * etcdserverpb.KV: Range, Put, DeleteRange, Txn, Compact with etcd's request checks and the
 * backend quota; the member serves them (writes through Raft, linearizable reads after a
 * ReadIndex round, serializable ones at once).
 */
import type { CallContext, MemberHandlers } from "../../grpc/index.js";
import { spillable } from "../../mvcc/index.js";
import type { PutRequest } from "../../mvcc/types.js";
import { checkPutRequest, checkTxnRequest } from "../../mvcc/txn_check.js";
import { putCost, txnCost, txnHasPut } from "../../mvcc/txn_rules.js";
import { Errors, toEtcdError } from "../errors.js";
import { RangeEncoding } from "../range_encoding.js";
import type { V3Server } from "../v3_server.js";
import { actingMember, asActingMember, authorized } from "./authorize.js";
import { guarded, requireLeaderIfAsked } from "./guard.js";
import { header } from "./header.js";
import type { Quota } from "./quota.js";

function rethrowAsEtcd(e: unknown): never {
  throw toEtcdError(e);
}

/** A put as member `m`, answered with `s`'s header; errors as etcd's statuses. */
function putAs(s: V3Server, m: V3Server, req: PutRequest, ctx: CallContext) {
  return m.put(req, undefined, ctx.requestBytes).then(({ response, revision }) => ({ header: header(s, revision), ...response }), rethrowAsEtcd);
}

export function kvService(s: V3Server, quota: Quota): MemberHandlers<"etcdserverpb.KV"> {
  return {
    Range: (req, ctx) =>
      guarded(async () => {
        requireLeaderIfAsked(s, ctx);
        if (!req.key || req.key.length === 0) throw Errors.emptyKey();
        // A range that needs more than one slice is encoded as it is read (range_encoding.ts).
        const encoding = spillable(req) ? new RangeEncoding(req) : undefined;
        const r = await asActingMember(s, ctx, (m) => m.range(req, ctx.signal, encoding));
        if (r.spilled && encoding !== undefined) return encoding.message(header(s, r.revision), r.count);
        return { header: header(s, r.revision), kvs: r.kvs, more: r.more, count: r.count };
      }),

    // Every write's path, so no async frame of its own unless something must be waited for (the
    // quota's alarm, the caller's identity): each is a promise and a resumption per put on the
    // member's main thread (issue 18). Errors map to etcd's statuses as guarded() maps them.
    Put: (req, ctx) => {
      try {
        requireLeaderIfAsked(s, ctx);
        checkPutRequest(req);
        const over = quota.check(putCost(req));
        if (over !== undefined) return guarded(() => over);
        const m = actingMember(s, ctx);
        return m instanceof Promise ? guarded(async () => putAs(s, await m, req, ctx)) : putAs(s, m, req, ctx);
      } catch (e) {
        return Promise.reject(toEtcdError(e));
      }
    },

    DeleteRange: (req, ctx) =>
      guarded(async () => {
        requireLeaderIfAsked(s, ctx);
        if (!req.key || req.key.length === 0) throw Errors.emptyKey();
        const { response, revision } = await asActingMember(s, ctx, (m) => m.deleteRange(req, undefined, ctx.requestBytes));
        return { header: header(s, revision), ...response };
      }),

    Txn: (req, ctx) =>
      guarded(async () => {
        requireLeaderIfAsked(s, ctx);
        checkTxnRequest(req, s.limits.maxTxnOps);
        const over = txnHasPut(req) ? quota.check(txnCost(req)) : undefined;
        if (over !== undefined) await over;
        const { response, revision } = await asActingMember(s, ctx, (m) => m.txn(req, ctx.signal, ctx.requestBytes));
        return { header: header(s, revision), ...response };
      }),

    Compact: (req, ctx) =>
      guarded(async () => {
        requireLeaderIfAsked(s, ctx);
        // A revision past 2^53 cannot be exact here; it is certainly in the future.
        if (!Number.isSafeInteger(req.revision ?? 0)) throw Errors.futureRev();
        const { revision } = await (await authorized(s, ctx)).compact(req, ctx.signal);
        return { header: header(s, revision) };
      }),
  };
}
