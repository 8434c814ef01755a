/**
 * What a normal Raft entry carries: etcd's InternalRaftRequest, protobuf-encoded with the codecs
 * compiled from proto/ (proto/etcdserverpb/raft_internal.proto). One request per entry; the id
 * lets the member that proposed it wake the waiting handler when the entry is applied.
 */
import type { MessageCodec } from "../pb/codec.js";
import type { InternalRaftRequest, InternalRaftRequestInit, RequestHeaderInit } from "../pb/member-types.js";
import { loadMemberCodecs } from "../pb/protos.js";
import { varintBytes, writeVarint } from "../pb/wire.js";

export type { InternalRaftRequest } from "../pb/member-types.js";

/** The requests a member proposes through Raft (the id is added when it is proposed). */
export type ProposedRequest = Omit<InternalRaftRequestInit, "ID">;

let internal: MessageCodec<InternalRaftRequest, InternalRaftRequestInit> | undefined;

function internalCodec(): MessageCodec<InternalRaftRequest, InternalRaftRequestInit> {
  internal ??= loadMemberCodecs().message<InternalRaftRequest, InternalRaftRequestInit>("etcdserverpb.InternalRaftRequest");
  return internal;
}

export function encodeRaftRequest(r: InternalRaftRequestInit & { ID: number }): Buffer {
  if (!Number.isSafeInteger(r.ID) || r.ID <= 0) throw new Error(`raft request: bad id ${r.ID}`);
  // The codec encodes into a buffer sized by its learned hint (up to 64 KiB) and returns a view.
  // The entry lives on in raft's log and the WAL's in-memory tail (10,000 entries), so a view
  // would pin the whole buffer per entry: measured +116 MB for 2,000 small puts after one 60 KB
  // put. An exact-size copy costs a memcpy of the entry.
  const pooled = internalCodec().encode(r);
  const exact = Buffer.allocUnsafeSlow(pooled.length);
  pooled.copy(exact);
  return exact;
}

/**
 * A client's request as it arrived (its protobuf bytes, already decoded and checked by the
 * handler) and the InternalRaftRequest field that carries it (proto/etcdserverpb/raft_internal.proto).
 */
export interface RawRequest {
  readonly field: RawRequestField;
  readonly bytes: Buffer;
}

/** InternalRaftRequest's field numbers for the requests a client's bytes can fill unchanged. */
export const RawRequestField = { put: 4, deleteRange: 5, txn: 6 } as const;
export type RawRequestField = (typeof RawRequestField)[keyof typeof RawRequestField];

/**
 * The request proposed with raw bytes holds the decoded request in the field the bytes fill, and
 * nothing else but its header: what the entry carries is the bytes, so anything more would be lost.
 */
export function rawRequestMatches(req: ProposedRequest, raw: RawRequest): boolean {
  let fields = 0;
  for (const key in req) {
    const value = (req as Record<string, unknown>)[key];
    if (value === undefined || value === null || key === "header") continue;
    fields++;
    if (RawRequestField[key as keyof typeof RawRequestField] !== raw.field) return false;
  }
  return fields === 1;
}

const ID_TAG = (1 << 3) | 0;
/** Field 100, wire type 2: two bytes of varint. */
const HEADER_TAG = (100 << 3) | 2;

let requestHeader: MessageCodec<unknown, RequestHeaderInit> | undefined;

function headerCodec(): MessageCodec<unknown, RequestHeaderInit> {
  requestHeader ??= loadMemberCodecs().message<unknown, RequestHeaderInit>("etcdserverpb.RequestHeader");
  return requestHeader;
}

/**
 * encodeRaftRequest for a request whose own bytes are at hand: the ID, then the request's bytes
 * as they came as its field, then the header, in field order as the codec writes them, so a
 * canonically encoded request gives the codec's very bytes (test/server/raft_request.test.ts).
 * Why: a put's InternalRaftRequest was re-encoded from the object just decoded from those bytes,
 * ~4% of the leader's main thread under put load (issue 18). Fields a client sent that the proto
 * does not know ride along, as any decoder skips them; the proposal's size limit is still checked
 * on the codec's encoding (Proposals.propose), as etcd's marshalled request drops them.
 */
export function encodeRaftRequestWith(id: number, raw: RawRequest, header: RequestHeaderInit | undefined): Buffer {
  if (!Number.isSafeInteger(id) || id <= 0) throw new Error(`raft request: bad id ${id}`);
  const h = header === undefined ? undefined : headerCodec().encode(header);
  const body = raw.bytes.length;
  let size = 1 + varintBytes(id) + 1 + varintBytes(body) + body;
  if (h !== undefined) size += varintBytes(HEADER_TAG) + varintBytes(h.length) + h.length;
  const out = Buffer.allocUnsafeSlow(size);
  let at = writeVarint(out, 0, ID_TAG);
  at = writeVarint(out, at, id);
  at = writeVarint(out, at, (raw.field << 3) | 2);
  at = writeVarint(out, at, body);
  raw.bytes.copy(out, at);
  at += body;
  if (h !== undefined) {
    at = writeVarint(out, at, HEADER_TAG);
    at = writeVarint(out, at, h.length);
    h.copy(out, at);
    at += h.length;
  }
  if (at !== size) throw new Error(`raft request: wrote ${at} bytes of ${size}`);
  return out;
}

/** Throws on malformed data: an entry we wrote ourselves must decode, or the log is corrupt. */
export function decodeRaftRequest(data: Uint8Array): InternalRaftRequest {
  const buf = Buffer.isBuffer(data) ? data : Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  return internalCodec().decode(buf);
}
