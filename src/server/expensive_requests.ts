/**
 * etcd's "took too long" warnings (etcdserver/util.go warnOfExpensiveRequest and
 * warnOfExpensiveReadOnlyRangeRequest): an applied entry, or a range served, that took longer than
 * --experimental-warning-apply-duration (100 ms) is logged at warn as etcd logs it, and counted
 * in etcd_server_slow_apply_total:
 *
 *   {"level":"warn",...,"msg":"apply request took too long","took":"123.4ms","expected-duration":"100ms",
 *    "prefix":"","request":"header:<ID:... > put:<key:\"foo\" value_size:3 >","response":"size:4"}
 *
 * A range's prefix is "read-only range " and its response "range_response_count:N size:M"; a
 * read-only txn's prefix is the same, its response "responses:<range_response_count:N ...> size:M". The
 * sizes are those of the response as etcd holds it at that point (protobuf bytes): the header holds
 * only the revision, but for the lease requests whose apply fills it whole. A failed request logs
 * its error instead of a response, as zap.Error does.
 */
import { loadMemberCodecs } from "../pb/protos.js";
import type { InternalRaftRequest, ResponseHeaderInit, TxnRequestInit } from "../pb/member-types.js";
import type { ApplyOutcome } from "./apply.js";
import { formatGoDuration } from "../go_duration.js";
import type { Logger } from "./logger.js";
import { decodeRaftRequest } from "./raft_request.js";
import { compactText, loggableTxn, raftRequestText } from "./request_text.js";

export interface ExpensiveRequestsOptions {
  logger: Logger;
  /** --experimental-warning-apply-duration in ms. */
  thresholdMs: number;
  /** etcd_server_slow_apply_total. */
  slowApply: { inc(): void };
  /** The whole response header at a revision (cluster and member id, raft term): a lease apply's. */
  fullHeader(revision: number): ResponseHeaderInit;
}

/** The response type of each raft request kind with a response etcd sizes, and whether its apply fills the whole header. */
const RESPONSE_TYPES: Readonly<Record<string, { type: string; fullHeader: boolean }>> = {
  put: { type: "PutResponse", fullHeader: false },
  deleteRange: { type: "DeleteRangeResponse", fullHeader: false },
  txn: { type: "TxnResponse", fullHeader: false },
  compaction: { type: "CompactionResponse", fullHeader: false },
  leaseGrant: { type: "LeaseGrantResponse", fullHeader: true },
  leaseRevoke: { type: "LeaseRevokeResponse", fullHeader: true },
};

type Obj = Record<string, unknown>;

/** Each sub-response of a txn carries its own header with the revision, as etcd's applyTxn fills it. */
function withTxnHeaders(resp: Obj, header: ResponseHeaderInit): Obj {
  const responses = Array.isArray(resp.responses) ? (resp.responses as Obj[]) : [];
  return {
    ...resp,
    header,
    responses: responses.map((op) => {
      const out: Obj = {};
      for (const [k, v] of Object.entries(op)) {
        if (v === undefined || v === null || typeof v !== "object") continue;
        out[k] = k === "responseTxn" ? withTxnHeaders(v as Obj, header) : { ...(v as Obj), header };
      }
      return out;
    }),
  };
}

export class ExpensiveRequests {
  constructor(private readonly o: ExpensiveRequestsOptions) {}

  /** An entry's apply took `tookMs`: warns if that is too long. */
  applied(tookMs: number, data: Uint8Array, outcome: ApplyOutcome | undefined): void {
    if (tookMs <= this.o.thresholdMs || data.length === 0) return;
    this.warnDescribed(tookMs, "", outcome?.error, () => {
      const req = decodeRaftRequest(data);
      const response = outcome !== undefined && outcome.error === undefined ? this.responseText(req, outcome) : "";
      return { request: raftRequestText(req), response };
    });
  }

  /** A range was served in `tookMs` (its ReadIndex wait included): warns if that is too long. */
  rangeServed(
    tookMs: number,
    req: object,
    result: { kvs: readonly unknown[]; more: boolean; count: number; revision: number } | undefined,
    error: unknown,
    encoded?: { readonly kvCount: number; readonly kvBytes: number; readonly more: boolean },
  ): void {
    if (tookMs <= this.o.thresholdMs) return;
    this.warnDescribed(tookMs, "read-only range ", error, () => {
      let response = "";
      if (encoded !== undefined && result !== undefined) {
        // An answer encoded as it was read (range_encoding.ts): its kvs are bytes already, not encoded again.
        const rest = loadMemberCodecs().message<unknown, Obj>("etcdserverpb.RangeResponse").encode({ header: { revision: result.revision }, more: encoded.more, count: result.count }).length;
        response = `range_response_count:${encoded.kvCount} size:${rest + encoded.kvBytes}`;
      } else if (result !== undefined) {
        const codec = loadMemberCodecs().message<unknown, Obj>("etcdserverpb.RangeResponse");
        const size = codec.encode({ header: { revision: result.revision }, kvs: result.kvs, more: result.more, count: result.count }).length;
        response = `range_response_count:${result.kvs.length} size:${size}`;
      }
      return { request: compactText("etcdserverpb.RangeRequest", req), response };
    });
  }

  /** A read-only txn was served in `tookMs` (its ReadIndex wait included): warns if that is too long. */
  readOnlyTxnServed(tookMs: number, req: TxnRequestInit, result: { response: { succeeded: boolean; responses: readonly object[] }; revision: number } | undefined, error: unknown): void {
    if (tookMs <= this.o.thresholdMs) return;
    this.warnDescribed(tookMs, "read-only range ", error, () => {
      let response = "";
      if (result !== undefined) {
        const counts = result.response.responses.flatMap((op) => {
          const range = (op as { responseRange?: { kvs?: readonly unknown[] } }).responseRange;
          return range === undefined ? [] : [`range_response_count:${range.kvs?.length ?? 0}`];
        });
        const msg = withTxnHeaders({ ...result.response }, { revision: result.revision });
        const size = loadMemberCodecs().message<unknown, Obj>("etcdserverpb.TxnResponse").encode(msg).length;
        response = `responses:<${counts.join(" ")}> size:${size}`;
      }
      return { request: loggableTxn(req), response };
    });
  }

  /** Warns with what `describe` makes of the request; a request it cannot describe is still warned of (the warning must never fail the request). */
  private warnDescribed(tookMs: number, prefix: string, error: unknown, describe: () => { request: string; response: string }): void {
    let text: { request: string; response: string };
    try {
      text = describe();
    } catch (err) {
      text = { request: `<request not described: ${String(err)}>`, response: "" };
    }
    this.warn(tookMs, prefix, text.request, text.response, error);
  }

  private responseText(req: InternalRaftRequest, outcome: ApplyOutcome): string {
    const kind = Object.keys(RESPONSE_TYPES).find((k) => req[k as keyof InternalRaftRequest] !== undefined);
    if (kind === undefined) return "";
    const { type, fullHeader } = RESPONSE_TYPES[kind]!;
    const header = fullHeader ? this.o.fullHeader(outcome.revision) : { revision: outcome.revision };
    const body = (outcome.response ?? {}) as Obj;
    const msg = kind === "txn" ? withTxnHeaders(body, header) : { ...body, header };
    return `size:${loadMemberCodecs().message<unknown, Obj>(`etcdserverpb.${type}`).encode(msg).length}`;
  }

  private warn(tookMs: number, prefix: string, request: string, response: string, error: unknown): void {
    const fields: Obj = {
      took: formatGoDuration(tookMs),
      "expected-duration": formatGoDuration(this.o.thresholdMs),
      prefix,
      request,
      response,
    };
    if (error !== undefined && error !== null) fields.error = error instanceof Error ? error.message : String(error);
    this.o.logger.warn(fields, "apply request took too long");
    this.o.slowApply.inc();
  }
}
