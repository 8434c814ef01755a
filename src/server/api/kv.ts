/**
 * etcdserverpb.KV: Range, Put, DeleteRange, Txn, Compact with etcd's request checks. Writes go
 * through Raft; linearizable reads (and read-only txns) wait for a ReadIndex round, serializable
 * ones are served from the local store at once.
 */
import type { MemberHandlers } from "../../grpc/index.js";
import { checkPutRequest, checkTxnRequest } from "../../mvcc/txn_check.js";
import { isTxnReadOnly, isTxnSerializable, putCost, txnCost, txnHasPut } from "../../mvcc/txn_rules.js";
import type { EtcdServer } from "../etcdserver.js";
import { Errors } from "../errors.js";
import { guarded, requireLeaderIfAsked } from "./guard.js";
import { header } from "./header.js";
import type { Quota } from "./quota.js";

export function kvService(s: EtcdServer, quota: Quota): MemberHandlers<"etcdserverpb.KV"> {
  return {
    Range: (req, ctx) =>
      guarded(async () => {
        requireLeaderIfAsked(s, ctx);
        if (!req.key || req.key.length === 0) throw Errors.emptyKey();
        if (!req.serializable) await s.linearizableReadNotify();
        // Sliced over event-loop turns at one revision: a huge range does not stall other clients.
        const r = await s.kv.rangeAsync(req, ctx.signal);
        return { header: header(s, r.revision), kvs: r.kvs, more: r.more, count: r.count };
      }),

    Put: (req, ctx) =>
      guarded(async () => {
        requireLeaderIfAsked(s, ctx);
        checkPutRequest(req);
        await quota.check(putCost(req));
        const { response, revision } = await s.proposeAndApply<object>({ put: req });
        return { header: header(s, revision), ...response };
      }),

    DeleteRange: (req, ctx) =>
      guarded(async () => {
        requireLeaderIfAsked(s, ctx);
        if (!req.key || req.key.length === 0) throw Errors.emptyKey();
        const { response, revision } = await s.proposeAndApply<object>({ deleteRange: req });
        return { header: header(s, revision), ...response };
      }),

    Txn: (req, ctx) =>
      guarded(async () => {
        requireLeaderIfAsked(s, ctx);
        checkTxnRequest(req, s.config.maxTxnOps);
        if (isTxnReadOnly(req)) {
          // etcd serves read-only txns without a proposal: one ReadIndex round, then locally.
          if (!isTxnSerializable(req)) await s.linearizableReadNotify();
          // Sliced like Range: large ranges inside the txn do not stall other clients.
          const r = await s.kv.txnReadOnlyAsync(req, ctx.signal);
          return { header: header(s, r.revision), succeeded: r.succeeded, responses: r.responses };
        }
        if (txnHasPut(req)) await quota.check(txnCost(req));
        const { response, revision } = await s.proposeAndApply<object>({ txn: req });
        return { header: header(s, revision), ...response };
      }),

    Compact: (req, ctx) =>
      guarded(async () => {
        requireLeaderIfAsked(s, ctx);
        // A revision past 2^53 cannot be exact here; it is certainly in the future.
        if (!Number.isSafeInteger(req.revision ?? 0)) throw Errors.futureRev();
        const { revision, done } = await s.proposeAndApply<object>({ compaction: req }, ctx.signal);
        if (req.physical && done) await done;
        return { header: header(s, revision) };
      }),
  };
}
