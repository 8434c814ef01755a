/**
 * Request validation that etcd performs in its gRPC layer before proposing
 * (v3rpc/key.go): empty keys, ignore_value/ignore_lease misuse, too many txn
 * operations, and keys written twice in one txn. Exported so the server can
 * reject early; the store runs the same checks at apply (deterministic).
 */

import { ErrDuplicateKey, ErrEmptyKey, ErrKeyNotFound, ErrLeaseProvided, ErrValueProvided, MvccError } from './errors.js';
import { bytesOf, leaseOf, type KvOp, type PutRequest, type RequestOp, type TxnRequest } from './types.js';

export class ErrTooManyOps extends MvccError {
  constructor() {
    super('tooManyOps', 'etcdserver: too many operations in txn request');
  }
}

/** etcd's default --max-txn-ops. */
export const DEFAULT_MAX_TXN_OPS = 128;

export function checkPutRequest(r: PutRequest): void {
  if (bytesOf(r.key).length === 0) throw new ErrEmptyKey();
  if (r.ignoreValue && bytesOf(r.value).length !== 0) throw new ErrValueProvided();
  if (r.ignoreLease && leaseOf(r.lease) !== 0) throw new ErrLeaseProvided();
}

function checkRequestOp(u: RequestOp, maxTxnOps: number): void {
  if (u.requestRange) {
    if (bytesOf(u.requestRange.key).length === 0) throw new ErrEmptyKey();
  } else if (u.requestPut) {
    checkPutRequest(u.requestPut);
  } else if (u.requestDeleteRange) {
    if (bytesOf(u.requestDeleteRange.key).length === 0) throw new ErrEmptyKey();
  } else if (u.requestTxn) {
    checkTxnOps(u.requestTxn, maxTxnOps);
  } else {
    // An empty op (no request set): etcd's checkRequestOp answers ErrGRPCKeyNotFound.
    throw new ErrKeyNotFound();
  }
}

/**
 * etcd's checkTxnRequest, recursive: op counts (a nested txn may use what its parent's widest
 * branch leaves of --max-txn-ops) and empty keys, through every nested txn, before any
 * duplicate-write check (so an empty key anywhere wins over a duplicate: etcd's order).
 */
function checkTxnOps(r: TxnRequest, maxTxnOps: number): void {
  const cmp = r.compare ?? [];
  const success = r.success ?? [];
  const failure = r.failure ?? [];
  const opc = Math.max(cmp.length, success.length, failure.length);
  if (opc > maxTxnOps) throw new ErrTooManyOps();
  for (const c of cmp) if (bytesOf(c.key).length === 0) throw new ErrEmptyKey();
  for (const u of success) checkRequestOp(u, maxTxnOps - opc);
  for (const u of failure) checkRequestOp(u, maxTxnOps - opc);
}

/** etcd's kvServer.Txn checks: checkTxnRequest over the whole tree, then each branch's duplicate writes. */
export function checkTxnRequest(r: TxnRequest, maxTxnOps: number = DEFAULT_MAX_TXN_OPS): void {
  checkTxnOps(r, maxTxnOps);
  checkIntervals(r.success ?? []);
  checkIntervals(r.failure ?? []);
}

/** Validates any kv op as etcd's gRPC layer would. */
export function checkKvOp(op: KvOp, maxTxnOps: number = DEFAULT_MAX_TXN_OPS): void {
  if (op.range && bytesOf(op.range.key).length === 0) throw new ErrEmptyKey();
  if (op.put) checkPutRequest(op.put);
  if (op.deleteRange && bytesOf(op.deleteRange.key).length === 0) throw new ErrEmptyKey();
  if (op.txn) checkTxnRequest(op.txn, maxTxnOps);
}

/**
 * A delete interval as etcd's adt "string affine" interval: [begin, end) where
 * an empty end means +infinity and a point k is [k, k+"\0").
 */
interface Interval {
  begin: Buffer;
  end: Buffer;
}

function affineCmp(a: Buffer, b: Buffer): number {
  // Empty compares above everything (etcd's StringAffineComparable).
  if (a.length === 0) return b.length === 0 ? 0 : 1;
  if (b.length === 0) return -1;
  return Buffer.compare(a, b);
}

function pointOf(k: Buffer): Interval {
  return { begin: k, end: Buffer.concat([k, Buffer.from([0])]) };
}

function intersects(a: Interval, b: Interval): boolean {
  return affineCmp(a.begin, b.end) < 0 && affineCmp(b.begin, a.end) < 0;
}

function asBuffer(u: Uint8Array | null | undefined): Buffer {
  const b = bytesOf(u);
  return Buffer.isBuffer(b) ? b : Buffer.from(b.buffer, b.byteOffset, b.byteLength);
}

/**
 * etcd checkIntervals: within one branch (and the branches nested in it), no
 * key may be put twice, nor put and deleted. Overlapping deletes are allowed;
 * then/else branches of a nested txn are mutually exclusive.
 */
function checkIntervals(reqs: RequestOp[]): { puts: Set<string>; dels: Interval[] } {
  const dels: Interval[] = [];
  for (const req of reqs) {
    const d = req.requestDeleteRange;
    if (!d) continue;
    const key = asBuffer(d.key);
    const end = asBuffer(d.rangeEnd);
    dels.push(end.length !== 0 ? { begin: key, end } : pointOf(key));
  }
  const hitsDel = (k: string): boolean => {
    const p = pointOf(Buffer.from(k, 'latin1'));
    return dels.some((iv) => intersects(iv, p));
  };
  const puts = new Set<string>();
  for (const req of reqs) {
    const t = req.requestTxn;
    if (!t) continue;
    const then = checkIntervals(t.success ?? []);
    const els = checkIntervals(t.failure ?? []);
    for (const k of then.puts) {
      if (puts.has(k) || hitsDel(k)) throw new ErrDuplicateKey();
      puts.add(k);
    }
    for (const k of els.puts) {
      if (puts.has(k) && !then.puts.has(k)) throw new ErrDuplicateKey();
      if (hitsDel(k)) throw new ErrDuplicateKey();
      puts.add(k);
    }
    dels.push(...then.dels, ...els.dels);
  }
  for (const req of reqs) {
    const p = req.requestPut;
    if (!p) continue;
    const k = asBuffer(p.key).toString('latin1');
    if (puts.has(k) || hitsDel(k)) throw new ErrDuplicateKey();
    puts.add(k);
  }
  return { puts, dels };
}
