import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { crc32 } from "node:zlib";
import { type Message, MessageType } from "../../src/raft/types.js";
import { CodecError, decodeMessage, encodedMessageBytes, encodeMessage } from "../../src/server/transport/codec.js";
import { encodeFrame, FrameDecoder, FrameError, FrameKind, FRAME_HEADER_BYTES } from "../../src/server/transport/frame.js";
import {
  ConnectionKind,
  decodeHello,
  decodeMessages,
  decodeSnapBegin,
  encodeHello,
  encodeMessages,
  encodeSnapBegin,
  PROTOCOL_VERSION,
} from "../../src/server/transport/protocol.js";
import { testSeed } from "../seed.js";

const SEED = testSeed("transport_codec");
const fcParams = { seed: SEED, numRuns: 200 };

const id = fc.bigInt({ min: 0n, max: 2n ** 64n - 1n });
const safe = fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER });
const bytes = fc.uint8Array({ maxLength: 64 });
const ids = fc.array(id, { maxLength: 5 });
const entry = fc.record({ term: safe, index: safe, type: fc.integer({ min: 0, max: 2 }), data: bytes });
const snapshot = fc.record({
  data: fc.uint8Array({ maxLength: 256 }),
  metadata: fc.record({
    index: safe,
    term: safe,
    confState: fc.record({ voters: ids, learners: ids, votersOutgoing: ids, learnersNext: ids, autoLeave: fc.boolean() }),
  }),
});
export const arbMessage: fc.Arbitrary<Message> = fc
  .record({
    type: fc.integer({ min: 0, max: 18 }),
    to: id,
    from: id,
    term: safe,
    logTerm: safe,
    index: safe,
    entries: fc.array(entry, { maxLength: 6 }),
    commit: safe,
    snapshot: fc.option(snapshot, { nil: undefined }),
    reject: fc.boolean(),
    rejectHint: safe,
    context: bytes,
  })
  .map((m) => {
    const out: Message = { ...m };
    if (m.snapshot === undefined) delete out.snapshot;
    return out;
  });

function normalise(m: Message): unknown {
  return JSON.parse(JSON.stringify(m, (_k, v: unknown) => (v instanceof Uint8Array ? Array.from(v) : typeof v === "bigint" ? `${v}n` : v)));
}

describe("message codec", () => {
  it("round-trips every field (property)", () => {
    fc.assert(
      fc.property(arbMessage, (m) => {
        const buf = encodeMessage(m);
        expect(buf.byteLength).toBe(encodedMessageBytes(m));
        expect(normalise(decodeMessage(buf))).toEqual(normalise(m));
      }),
      fcParams,
    );
  });

  it("round-trips batches in a Messages frame (property)", () => {
    fc.assert(
      fc.property(fc.array(arbMessage, { maxLength: 8 }), (msgs) => {
        const frame = encodeMessages(msgs);
        const frames = new FrameDecoder().push(frame);
        expect(frames).toHaveLength(1);
        expect(frames[0]!.kind).toBe(FrameKind.Messages);
        expect(decodeMessages(frames[0]!.payload).map(normalise)).toEqual(msgs.map(normalise));
      }),
      fcParams,
    );
  });

  it("rejects every truncation of a message with CodecError (property)", () => {
    fc.assert(
      fc.property(arbMessage, fc.nat(), (m, cut) => {
        const buf = encodeMessage(m);
        const len = cut % buf.byteLength;
        expect(() => decodeMessage(buf.subarray(0, len))).toThrow(CodecError);
      }),
      fcParams,
    );
  });

  it("rejects integers above 2^53-1, unknown types and huge counts", () => {
    const m: Message = { type: MessageType.MsgApp, to: 2n, from: 1n, term: 1, logTerm: 0, index: 0, entries: [], commit: 0, reject: false, rejectHint: 0, context: new Uint8Array() };
    const term = encodeMessage(m);
    term.writeUInt32BE(0xffffffff, 1 + 16); // high word of `term`
    expect(() => decodeMessage(term)).toThrow(/exceeds 2\^53-1/);
    const type = encodeMessage(m);
    type[0] = 99;
    expect(() => decodeMessage(type)).toThrow(/unknown message type/);
    const count = encodeMessage(m);
    count.writeUInt32BE(0x7fffffff, count.byteLength - 5); // entry count
    expect(() => decodeMessage(count)).toThrow(/exceeds the frame/);
    expect(() => encodeMessage({ ...m, term: -1 })).toThrow(CodecError);
    expect(() => encodeMessage({ ...m, index: 2 ** 53 })).toThrow(CodecError);
  });

  it("snapshot header frames carry metadata but not data", () => {
    const m: Message = {
      type: MessageType.MsgSnap, to: 2n, from: 1n, term: 3, logTerm: 0, index: 0, entries: [], commit: 0, reject: false, rejectHint: 0, context: new Uint8Array(),
      snapshot: { data: new Uint8Array(1000).fill(7), metadata: { index: 50, term: 3, confState: { voters: [1n, 2n, 3n], learners: [4n], votersOutgoing: [], learnersNext: [], autoLeave: false } } },
    };
    const frame = encodeSnapBegin(m, 1000);
    expect(frame.byteLength).toBeLessThan(300);
    const [f] = new FrameDecoder().push(frame);
    const { message, totalBytes } = decodeSnapBegin(f!.payload);
    expect(totalBytes).toBe(1000);
    expect(message.snapshot!.metadata).toEqual(m.snapshot!.metadata);
    expect(message.snapshot!.data.byteLength).toBe(0);
  });

  it("hello round-trips", () => {
    const h = { version: PROTOCOL_VERSION, kind: ConnectionKind.Snapshot, clusterId: 2n ** 64n - 1n, from: 7n, to: 9n, clusterToken: "tøken" };
    const [f] = new FrameDecoder().push(encodeHello(h));
    expect(decodeHello(f!.payload)).toEqual(h);
  });
});

describe("frame decoder", () => {
  it("reassembles frames split at every byte boundary (property)", () => {
    fc.assert(
      fc.property(fc.array(fc.uint8Array({ minLength: 0, maxLength: 100 }), { minLength: 1, maxLength: 5 }), fc.array(fc.nat(), { maxLength: 10 }), (payloads, cuts) => {
        const stream = Buffer.concat(payloads.map((p) => encodeFrame(FrameKind.Messages, p)));
        const points = [...new Set(cuts.map((c) => c % (stream.byteLength + 1)))].sort((a, b) => a - b);
        const decoder = new FrameDecoder();
        const got: Buffer[] = [];
        let prev = 0;
        for (const p of [...points, stream.byteLength]) {
          for (const f of decoder.push(stream.subarray(prev, p))) got.push(Buffer.from(f.payload));
          prev = p;
        }
        expect(got.map((b) => [...b])).toEqual(payloads.map((p) => [...p]));
        expect(decoder.pendingBytes()).toBe(0);
      }),
      fcParams,
    );
  });

  it("rejects a flipped bit anywhere in the body (property)", () => {
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 1, maxLength: 200 }), fc.nat(), fc.integer({ min: 0, max: 7 }), (payload, at, bit) => {
        const frame = encodeFrame(FrameKind.Messages, payload);
        const pos = FRAME_HEADER_BYTES + (at % (frame.byteLength - FRAME_HEADER_BYTES));
        frame[pos]! ^= 1 << bit;
        expect(() => new FrameDecoder().push(frame)).toThrow(FrameError);
      }),
      fcParams,
    );
  });

  it("rejects an oversized frame from its header alone, before buffering it", () => {
    const decoder = new FrameDecoder(1024);
    const header = Buffer.alloc(FRAME_HEADER_BYTES);
    header.writeUInt32BE(1025, 0);
    expect(() => decoder.push(header)).toThrow(/exceeds the maximum of 1024/);
    const ok = encodeFrame(FrameKind.Messages, new Uint8Array(1023));
    expect(new FrameDecoder(1024).push(ok)).toHaveLength(1);
  });

  it("rejects empty frames and unknown kinds", () => {
    expect(() => new FrameDecoder().push(Buffer.alloc(8))).toThrow(/empty frame/);
    const body = Buffer.from([200, 1, 2]);
    const frame = Buffer.alloc(8 + body.byteLength);
    frame.writeUInt32BE(body.byteLength, 0);
    frame.writeUInt32BE(crc32(body), 4);
    body.copy(frame, 8);
    expect(() => new FrameDecoder().push(frame)).toThrow(/unknown frame kind 200/);
  });
});
