/**
 * The client API codecs the warm-up round-trips (warmup.ts) and sends to its scratch cluster
 * (warmup_member.ts): the process's own (loadMemberCodecs is compiled once per process), so what
 * the warm-up compiles is what the member serves with.
 */
import type { MessageCodec } from "../pb/codec.js";
import type {
  LeaseKeepAliveRequest,
  LeaseKeepAliveRequestInit,
  LeaseKeepAliveResponse,
  LeaseKeepAliveResponseInit,
  PutRequest,
  PutRequestInit,
  PutResponse,
  PutResponseInit,
  RangeRequest,
  RangeRequestInit,
  RangeResponse,
  RangeResponseInit,
  TxnRequest,
  TxnRequestInit,
  TxnResponse,
  TxnResponseInit,
  WatchRequest,
  WatchRequestInit,
  WatchResponse,
  WatchResponseInit,
} from "../pb/member-types.js";
import { loadMemberCodecs } from "../pb/protos.js";

export interface WarmupCodecs {
  putReq: MessageCodec<PutRequest, PutRequestInit>;
  putResp: MessageCodec<PutResponse, PutResponseInit>;
  rangeReq: MessageCodec<RangeRequest, RangeRequestInit>;
  rangeResp: MessageCodec<RangeResponse, RangeResponseInit>;
  txnReq: MessageCodec<TxnRequest, TxnRequestInit>;
  txnResp: MessageCodec<TxnResponse, TxnResponseInit>;
  keepAliveReq: MessageCodec<LeaseKeepAliveRequest, LeaseKeepAliveRequestInit>;
  keepAliveResp: MessageCodec<LeaseKeepAliveResponse, LeaseKeepAliveResponseInit>;
  watchReq: MessageCodec<WatchRequest, WatchRequestInit>;
  watchResp: MessageCodec<WatchResponse, WatchResponseInit>;
}

export function warmupCodecs(): WarmupCodecs {
  const c = loadMemberCodecs();
  return {
    putReq: c.message("etcdserverpb.PutRequest"),
    putResp: c.message("etcdserverpb.PutResponse"),
    rangeReq: c.message("etcdserverpb.RangeRequest"),
    rangeResp: c.message("etcdserverpb.RangeResponse"),
    txnReq: c.message("etcdserverpb.TxnRequest"),
    txnResp: c.message("etcdserverpb.TxnResponse"),
    keepAliveReq: c.message("etcdserverpb.LeaseKeepAliveRequest"),
    keepAliveResp: c.message("etcdserverpb.LeaseKeepAliveResponse"),
    watchReq: c.message("etcdserverpb.WatchRequest"),
    watchResp: c.message("etcdserverpb.WatchResponse"),
  };
}
