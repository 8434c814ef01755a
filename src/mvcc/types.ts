/**
 * Messages of etcd's etcdserverpb (KV part) and mvccpb, mirrored with protobufjs
 * camelCase field names so the gRPC layer can pass decoded objects straight in.
 *
 * proto3 semantics: every field may be absent and then means its default
 * (0, empty bytes, false, first enum value). Readers must use the helpers at
 * the bottom of this file rather than trusting presence.
 *
 * bytes are Uint8Array (Buffers in practice); every int64 is a JS number.
 */

/** mvccpb.Event.EventType */
export enum EventType {
  PUT = 0,
  DELETE = 1,
}

/** etcdserverpb.RangeRequest.SortOrder */
export enum SortOrder {
  NONE = 0,
  ASCEND = 1,
  DESCEND = 2,
}

/** etcdserverpb.RangeRequest.SortTarget */
export enum SortTarget {
  KEY = 0,
  VERSION = 1,
  CREATE = 2,
  MOD = 3,
  VALUE = 4,
}

/** etcdserverpb.Compare.CompareResult */
export enum CompareResult {
  EQUAL = 0,
  GREATER = 1,
  LESS = 2,
  NOT_EQUAL = 3,
}

/** etcdserverpb.Compare.CompareTarget */
export enum CompareTarget {
  VERSION = 0,
  CREATE = 1,
  MOD = 2,
  VALUE = 3,
  LEASE = 4,
}

/** etcdserverpb.WatchCreateRequest.FilterType */
export enum WatchFilterType {
  NOPUT = 0,
  NODELETE = 1,
}

/** mvccpb.KeyValue */
export interface KeyValue {
  key: Uint8Array;
  createRevision: number;
  modRevision: number;
  version: number;
  value: Uint8Array;
  lease: number;
}

/** mvccpb.Event */
export interface Event {
  type: EventType;
  kv: KeyValue;
  prevKv?: KeyValue;
}

export interface RangeRequest {
  key?: Uint8Array;
  rangeEnd?: Uint8Array;
  limit?: number;
  revision?: number;
  sortOrder?: SortOrder;
  sortTarget?: SortTarget;
  serializable?: boolean;
  keysOnly?: boolean;
  countOnly?: boolean;
  minModRevision?: number;
  maxModRevision?: number;
  minCreateRevision?: number;
  maxCreateRevision?: number;
}

export interface RangeResponse {
  kvs: KeyValue[];
  more: boolean;
  count: number;
}

export interface PutRequest {
  key?: Uint8Array;
  value?: Uint8Array;
  lease?: number;
  prevKv?: boolean;
  ignoreValue?: boolean;
  ignoreLease?: boolean;
}

export interface PutResponse {
  prevKv?: KeyValue;
}

export interface DeleteRangeRequest {
  key?: Uint8Array;
  rangeEnd?: Uint8Array;
  prevKv?: boolean;
}

export interface DeleteRangeResponse {
  deleted: number;
  prevKvs: KeyValue[];
}

/** etcdserverpb.RequestOp: exactly one field is set (oneof request). */
export interface RequestOp {
  requestRange?: RangeRequest | null;
  requestPut?: PutRequest | null;
  requestDeleteRange?: DeleteRangeRequest | null;
  requestTxn?: TxnRequest | null;
}

/** etcdserverpb.ResponseOp: exactly one field is set (oneof response). */
export interface ResponseOp {
  responseRange?: RangeResponse;
  responsePut?: PutResponse;
  responseDeleteRange?: DeleteRangeResponse;
  responseTxn?: TxnResponse;
}

/** etcdserverpb.Compare; the oneof target_union is version|createRevision|modRevision|value|lease. */
export interface Compare {
  result?: CompareResult;
  target?: CompareTarget;
  key?: Uint8Array;
  version?: number;
  createRevision?: number;
  modRevision?: number;
  value?: Uint8Array;
  lease?: number;
  rangeEnd?: Uint8Array;
}

export interface TxnRequest {
  compare?: Compare[];
  success?: RequestOp[];
  failure?: RequestOp[];
}

export interface TxnResponse {
  succeeded: boolean;
  responses: ResponseOp[];
}

export interface CompactionRequest {
  revision?: number;
  physical?: boolean;
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
