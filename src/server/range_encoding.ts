/**
 * A Range answer encoded as it is read (the read's RangeSpill, src/mvcc/kvstore_range.ts): each
 * slice of kvs becomes protobuf bytes at once, so a range over millions of keys holds its answer
 * as bytes outside the JavaScript heap instead of one KeyValue object and two Buffer views per row
 * (~400 bytes of heap each: 9,000,000 keys ran a member out of its 4 GB heap). The bytes are what
 * the codec would write for the same RangeResponse, field for field in etcd's order (header, kvs,
 * more, count; within a kv: key, create_revision, mod_revision, version, value, lease, each left out
 * at its default), so a client cannot tell an encoded answer from an ordinary one
 * (test/server/range_encoding.test.ts checks the bytes against the codec's).
 */
import { EncodedMessage } from "../grpc/encoded_message.js";
import { MESSAGE_PREFIX_BYTES } from "../grpc/framing.js";
import type { MessageCodec } from "../pb/codec.js";
import type { ResponseHeaderInit } from "../pb/member-types.js";
import { loadMemberCodecs } from "../pb/protos.js";
import { ProtoWriter, varintBytes, writeVarint } from "../pb/wire.js";
import type { KeyValue, RangeRequest, RangeSpill } from "../mvcc/index.js";

/** Room kept in front of the kvs for the prefix and the header field (a header is 46 bytes at most). */
const FRONT_BYTES = 64;
const FIRST_BYTES = 64 * 1024;

// Field tags: (field number << 3) | wire type.
const HEADER_TAG = (1 << 3) | 2;
const KVS_TAG = (2 << 3) | 2;
const MORE_TAG = (3 << 3) | 0;
const COUNT_TAG = (4 << 3) | 0;
const KV_KEY_TAG = (1 << 3) | 2;
const KV_CREATE_TAG = (2 << 3) | 0;
const KV_MOD_TAG = (3 << 3) | 0;
const KV_VERSION_TAG = (4 << 3) | 0;
const KV_VALUE_TAG = (5 << 3) | 2;
const KV_LEASE_TAG = (6 << 3) | 0;

let headerCodec: MessageCodec<unknown, ResponseHeaderInit> | undefined;

export class RangeEncoding implements RangeSpill {
  /**
   * Made on the first kvs taken: every Range makes an encoding, and most finish within their first
   * slice and never spill, so they must not pay for a 64 KiB buffer.
   */
  private writer: ProtoWriter | undefined;
  private kvsTaken = 0;
  private sawMore = false;
  private readonly limit: number;
  private readonly keysOnly: boolean;

  constructor(req: RangeRequest) {
    this.limit = Number(req.limit ?? 0);
    this.keysOnly = req.keysOnly === true;
  }

  reset(): void {
    this.writer = undefined;
    this.kvsTaken = 0;
    this.sawMore = false;
  }

  take(kvs: readonly KeyValue[]): void {
    for (const kv of kvs) {
      // The read fetches one kv past the limit to tell whether there is more, as finishRange cuts it.
      if (this.limit > 0 && this.kvsTaken >= this.limit) {
        this.sawMore = true;
        continue;
      }
      this.writeKv(kv);
      this.kvsTaken++;
    }
  }

  /** kvs in the answer so far. */
  get kvCount(): number {
    return this.kvsTaken;
  }

  /** Whether the read found a kv past the request's limit. */
  get more(): boolean {
    return this.sawMore;
  }

  /** Bytes of the encoded kvs so far. */
  get kvBytes(): number {
    return this.writer === undefined ? 0 : this.writer.pos - FRONT_BYTES;
  }

  private get w(): ProtoWriter {
    this.writer ??= new ProtoWriter(FIRST_BYTES, FRONT_BYTES);
    return this.writer;
  }

  /** The whole answer: the RangeResponse with `header` and the read's `count`, framed for gRPC. */
  message(header: ResponseHeaderInit, count: number): EncodedMessage {
    headerCodec ??= loadMemberCodecs().message<unknown, ResponseHeaderInit>("etcdserverpb.ResponseHeader");
    const h = headerCodec.encode(header);
    const w = this.w;
    if (this.sawMore) {
      w.uint32(MORE_TAG);
      w.uint32(1);
    }
    if (count !== 0) {
      w.uint32(COUNT_TAG);
      w.int64(count);
    }
    const headerField = 1 + varintBytes(h.length) + h.length;
    const start = FRONT_BYTES - headerField - MESSAGE_PREFIX_BYTES;
    if (start < 0) throw new Error(`range encoding: a header of ${h.length} bytes does not fit in front of the kvs`);
    const out = w.buf;
    let at = start;
    out[at++] = 0; // uncompressed
    out.writeUInt32BE(w.pos - start - MESSAGE_PREFIX_BYTES, at);
    at += 4;
    out[at++] = HEADER_TAG;
    at = writeVarint(out, at, h.length);
    h.copy(out, at);
    return new EncodedMessage(out.subarray(start, w.pos));
  }

  private writeKv(kv: KeyValue): void {
    const w = this.w;
    w.uint32(KVS_TAG);
    const start = w.beginDelimited();
    if (kv.key.length > 0) {
      w.uint32(KV_KEY_TAG);
      w.bytes(kv.key);
    }
    if (kv.createRevision !== 0) {
      w.uint32(KV_CREATE_TAG);
      w.int64(kv.createRevision);
    }
    if (kv.modRevision !== 0) {
      w.uint32(KV_MOD_TAG);
      w.int64(kv.modRevision);
    }
    if (kv.version !== 0) {
      w.uint32(KV_VERSION_TAG);
      w.int64(kv.version);
    }
    if (!this.keysOnly && kv.value.length > 0) {
      w.uint32(KV_VALUE_TAG);
      w.bytes(kv.value);
    }
    if (kv.lease !== 0 && kv.lease !== 0n) {
      w.uint32(KV_LEASE_TAG);
      w.int64Exact(kv.lease);
    }
    w.endDelimited(start);
  }
}

