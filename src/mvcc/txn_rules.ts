/**
 * What a txn is, decided once for everyone who asks: whether etcd serves it without a proposal,
 * whether it may be served without a ReadIndex round, whether it writes, and what it costs
 * against the backend quota.
 *
 * Two different questions are answered here on purpose. `isTxnReadOnly` is etcd's routing rule
 * (etcdserver's isTxnReadonly: every op of both branches is a Range; a nested txn, even one that
 * only reads, and an empty op are not), so the server proposes exactly the txns etcd proposes.
 * `txnHasWrite` is the store's own question (does any op, nested ones included, put or delete),
 * which decides whether a txn may be served from a read view and whether put checks run.
 */

import type { PutRequest, RequestOp, TxnRequest } from './types.js';

function ops(req: TxnRequest): RequestOp[] {
  return [...(req.success ?? []), ...(req.failure ?? [])];
}

/** etcd's isTxnReadonly: every op is a Range (served after a ReadIndex round, never proposed). */
export function isTxnReadOnly(req: TxnRequest): boolean {
  return ops(req).every((op) => op.requestRange != null);
}

/** etcd's isTxnSerializable: every op is a serializable Range (served locally at once). */
export function isTxnSerializable(req: TxnRequest): boolean {
  return ops(req).every((op) => op.requestRange != null && op.requestRange.serializable === true);
}

/** Whether any op puts (nested txns included): such a txn is refused while NOSPACE is raised. */
export function txnHasPut(req: TxnRequest): boolean {
  return ops(req).some((op) => op.requestPut != null || (op.requestTxn != null && txnHasPut(op.requestTxn)));
}

/** Whether any op puts or deletes (nested txns included). */
export function txnHasWrite(req: TxnRequest): boolean {
  return ops(req).some((op) => op.requestPut != null || op.requestDeleteRange != null || (op.requestTxn != null && txnHasWrite(op.requestTxn)));
}

/** Bytes a put adds to the backend, for the quota check. */
export function putCost(req: PutRequest): number {
  return (req.key?.length ?? 0) + (req.value?.length ?? 0);
}

/** Bytes a txn's puts add (both branches, nested txns included), for the quota check. */
export function txnCost(req: TxnRequest): number {
  let cost = 0;
  for (const op of ops(req)) {
    if (op.requestPut) cost += putCost(op.requestPut);
    else if (op.requestTxn) cost += txnCost(op.requestTxn);
  }
  return cost;
}
