/**
 * The messages mvcc takes and gives, in the types generated from proto/ (src/pb/member-types.ts,
 * protobufjs camelCase names, as the member's codecs decode them), so a decoded request passes
 * straight in and the compiler checks every field name against the protos.
 *
 * Requests are the generated `FooInit` shape: proto3 semantics, every field may be absent and
 * then means its default (0, empty bytes, false, first enum value). Readers must use the helpers
 * at the bottom of this file rather than trusting presence. bytes are Uint8Array (Buffers in
 * practice); every int64 is a JS number.
 *
 * Results are what the store guarantees, which is more than proto3 says (an event always has its
 * kv, a txn response op has exactly the one result of its request): they are declared here from
 * the generated field types and are assignable to the generated response types the API returns.
 */

import type * as pb from '../pb/member-types.js';

export {
  Compare_CompareResult as CompareResult,
  Compare_CompareTarget as CompareTarget,
  Event_EventType as EventType,
  RangeRequest_SortOrder as SortOrder,
  RangeRequest_SortTarget as SortTarget,
  WatchCreateRequest_FilterType as WatchFilterType,
} from '../pb/member-types.js';

/** mvccpb.KeyValue, as the store yields it (every field set). */
export type KeyValue = pb.KeyValue;

export type RangeRequest = pb.RangeRequestInit;
export type PutRequest = pb.PutRequestInit;
export type DeleteRangeRequest = pb.DeleteRangeRequestInit;
/** etcdserverpb.RequestOp: exactly one field is set (oneof request). */
export type RequestOp = pb.RequestOpInit;
/** etcdserverpb.Compare; the oneof target_union is version|createRevision|modRevision|value|lease. */
export type Compare = pb.CompareInit;
export type TxnRequest = pb.TxnRequestInit;
export type CompactionRequest = pb.CompactionRequestInit;

/** mvccpb.Event, as the store yields it: the kv is always set. */
export interface Event {
  type: pb.Event['type'];
  kv: KeyValue;
  prevKv?: KeyValue;
}

/** RangeResponse's body (the server adds the header). */
export type RangeResponse = Pick<pb.RangeResponse, 'kvs' | 'more' | 'count'>;

/** PutResponse's body: prevKv only when asked for and the key existed. */
export type PutResponse = Partial<Pick<pb.PutResponse, 'prevKv'>>;

/** DeleteRangeResponse's body. */
export type DeleteRangeResponse = Pick<pb.DeleteRangeResponse, 'deleted' | 'prevKvs'>;

/**
 * The header etcd's applier puts in each response nested in a txn (etcdserver/apply.go): only the
 * revision the op saw (the txn's starting revision, or the next one once the txn has changed
 * something); a nested TxnResponse's header is empty. The member fills only the outer header.
 */
export interface NestedHeader {
  header: { revision?: number };
}

/** etcdserverpb.ResponseOp: exactly one field is set (oneof response), the result of its RequestOp. */
export interface ResponseOp {
  responseRange?: RangeResponse & NestedHeader;
  responsePut?: PutResponse & NestedHeader;
  responseDeleteRange?: DeleteRangeResponse & NestedHeader;
  responseTxn?: TxnResponse & NestedHeader;
}

/** TxnResponse's body. */
export interface TxnResponse {
  succeeded: boolean;
  responses: ResponseOp[];
}

/** What one Raft entry asks the kv store to do (exactly one field set). */
export interface KvOp {
  range?: RangeRequest;
  put?: PutRequest;
  deleteRange?: DeleteRangeRequest;
  txn?: TxnRequest;
  compaction?: CompactionRequest;
}

const EMPTY = new Uint8Array(0);

/** proto3 default for bytes. */
export function bytesOf(b: Uint8Array | null | undefined): Uint8Array {
  return b ?? EMPTY;
}

/**
 * A lease id (mvccpb.KeyValue.lease, PutRequest.lease): etcd's int64, exact in one representation
 * per value, as the codecs decode it: a number while it is a safe integer, a bigint beyond (see
 * src/lease/types.ts, which declares the same type). 0 is "no lease".
 */
export type LeaseId = number | bigint;

/** The SQL that reads an INTEGER lease column as LeaseId's representation: the number, or decimal text beyond 2^53 (leaseFromColumn). */
export function leaseColumnSql(column: string): string {
  return `CASE WHEN ${column} BETWEEN -9007199254740991 AND 9007199254740991 THEN ${column} ELSE CAST(${column} AS TEXT) END`;
}

/** A lease column read through leaseColumnSql, as a LeaseId. */
export function leaseFromColumn(v: number | string): LeaseId {
  return typeof v === 'number' ? v : BigInt(v);
}

/**
 * proto3 default for a lease id field, in LeaseId's one representation (a bigint that fits in a
 * safe integer, from a caller that did not decode through the codecs, becomes the number).
 */
export function leaseOf(n: number | bigint | null | undefined): LeaseId {
  return exactInt64Of(n, 'a lease id');
}

/**
 * A watch id (etcdserverpb.WatchCreateRequest/WatchCancelRequest/WatchResponse.watch_id, etcd's
 * mvcc.WatchID): an int64, exact in the same one representation as LeaseId, so a client-chosen id
 * above 2^53 keys the stream's watchers and comes back in its responses unchanged. 0 asks the
 * stream to choose (etcd's AutoWatchID); every other value, -1 and the other negatives too, is the
 * client's to choose, as in etcd 3.4. On the wire etcd also answers a refused create and a progress
 * request with watch id -1 (the server's API edge writes those); inside mvcc no id is reserved.
 */
export type WatchId = number | bigint;

/** proto3 default for a watch id field, in WatchId's one representation (as leaseOf). */
export function watchIdOf(n: number | bigint | null | undefined): WatchId {
  return exactInt64Of(n, 'a watch id');
}

/** An int64 in ProtoReader.int64Exact's representation: the number while safe, the bigint beyond. */
function exactInt64Of(n: number | bigint | null | undefined, what: string): number | bigint {
  if (n === undefined || n === null) return 0;
  if (typeof n === 'number') {
    if (!Number.isSafeInteger(n)) throw new TypeError(`mvcc: ${what} must be a safe integer or a bigint, got ${n}`);
    return n;
  }
  if (n < -(2n ** 63n) || n >= 2n ** 63n) throw new TypeError(`mvcc: ${what} must be an int64, got ${n}`);
  return n >= -9007199254740991n && n <= 9007199254740991n ? Number(n) : n;
}

/** Long-like int64 as protobufjs yields when long.js is present. */
interface LongLike {
  toNumber(): number;
}

/** proto3 default for int64 (also accepts protobufjs Long objects). */
export function numOf(n: number | LongLike | null | undefined): number {
  if (n === undefined || n === null) return 0;
  if (typeof n === 'number') return n;
  if (typeof n === 'object' && typeof n.toNumber === 'function') return n.toNumber();
  throw new TypeError('mvcc: int64 fields must be numbers');
}
