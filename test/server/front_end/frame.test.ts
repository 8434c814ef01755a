/**
 * The front-end hand-off's frame codec (src/server/front_end/frame.ts): every kind round-trips,
 * every truncation and every over-long frame is refused, and the stream reader splits frames
 * across any chunking, including one byte at a time.
 */
import { describe, expect, it } from "vitest";
import { decodeFrame, encodeFrame, type Frame, FrameError, FrameKind, FrameReader, FRAME_BYTES_MAX } from "../../../src/server/front_end/frame.js";

/** One frame of every kind, with awkward values (empty, multi-byte UTF-8, binary with zeros). */
function samples(): Frame[] {
  const bytes = Buffer.from([0, 1, 2, 255, 0]);
  return [
    { kind: FrameKind.Call, id: 1, values: ["/etcdserverpb.KV/Put", ["token", "abc", "x-rep", "1", "x-rep", "2"], "127.0.0.1:5000", "rööt", 1_764_000_000_123.5, bytes] },
    { kind: FrameKind.Message, id: 2, values: [Buffer.alloc(0)] },
    { kind: FrameKind.HalfClose, id: 3, values: [] },
    { kind: FrameKind.Cancel, id: 4, values: [4] },
    { kind: FrameKind.WritePause, id: 5, values: [] },
    { kind: FrameKind.WriteResume, id: 6, values: [] },
    { kind: FrameKind.HttpRequest, id: 7, values: ["POST", "/v3/kv/range?x=1", ["content-type", "application/json"], 1, "localhost:2379", 0] },
    { kind: FrameKind.HttpBody, id: 8, values: [bytes] },
    { kind: FrameKind.HttpBodyEnd, id: 9, values: [] },
    { kind: FrameKind.Listening, id: 10, values: [] },
    { kind: FrameKind.Reply, id: 2 ** 32 - 1, values: [bytes] },
    { kind: FrameKind.Response, id: 12, values: [Buffer.alloc(300, 7)] },
    { kind: FrameKind.Status, id: 13, values: [8, "etcdserver: request is too large ✓", ["x-extra", "v"]] },
    { kind: FrameKind.ReadPause, id: 14, values: [] },
    { kind: FrameKind.ReadResume, id: 15, values: [] },
    { kind: FrameKind.HttpWhole, id: 16, values: [404, ["content-type", "text/plain; charset=utf-8"], 1, Buffer.from("404 page not found\n"), 0, []] },
    { kind: FrameKind.HttpHead, id: 17, values: [200, []] },
    { kind: FrameKind.HttpChunk, id: 18, values: [bytes] },
    { kind: FrameKind.HttpEnd, id: 19, values: [1, ["grpc-status", "0"]] },
    { kind: FrameKind.Close, id: 0, values: [] },
  ];
}

describe("front-end frames", () => {
  it("has a sample of every kind", () => {
    expect(new Set(samples().map((f) => f.kind))).toEqual(new Set(Object.values(FrameKind)));
  });

  it("round-trips every kind", () => {
    for (const frame of samples()) {
      const decoded = decodeFrame(encodeFrame(frame.kind, frame.id, frame.values));
      expect(decoded).toEqual(frame);
    }
  });

  it("refuses every truncation of every kind, and a byte too many", () => {
    for (const frame of samples()) {
      const buf = encodeFrame(frame.kind, frame.id, frame.values);
      // Every cut of the whole frame, and every cut of its body behind a length prefix that agrees with the cut.
      for (let cut = 0; cut < buf.length; cut++) {
        expect(() => decodeFrame(buf.subarray(0, cut)), `kind ${frame.kind} cut at ${cut}`).toThrow(FrameError);
        if (cut >= 4) {
          const lying = Buffer.from(buf.subarray(0, cut));
          lying.writeUInt32BE(cut - 4, 0);
          expect(() => decodeFrame(lying), `kind ${frame.kind} body cut at ${cut}`).toThrow(FrameError);
        }
      }
      const longer = Buffer.concat([buf, Buffer.from([0])]);
      longer.writeUInt32BE(buf.length - 4 + 1, 0);
      expect(() => decodeFrame(longer)).toThrow(/after its last field/);
    }
  });

  it("refuses an unknown kind and a pair count the frame cannot hold", () => {
    const buf = encodeFrame(FrameKind.Close, 0, []);
    buf[4] = 99;
    expect(() => decodeFrame(buf)).toThrow(/unknown frame kind 99/);
    const status = encodeFrame(FrameKind.Status, 1, [0, "", []]);
    status.writeUInt32BE(2 ** 31, status.length - 4);
    expect(() => decodeFrame(status)).toThrow(FrameError);
  });

  it("refuses to encode values that do not fit the kind", () => {
    expect(() => encodeFrame(FrameKind.Status, 1, [0, "", ["odd"]])).toThrow(/odd number/);
    expect(() => encodeFrame(FrameKind.Message, 1, [] as unknown as [Buffer])).toThrow(/0 values for 1 fields/);
  });

  it("splits a stream of frames however it is chunked, and says when the stream stopped inside one", () => {
    // A frame larger than a pipe read, too.
    const frames = [...samples(), { kind: FrameKind.Response, id: 99, values: [Buffer.alloc(200_000, 7)] } as Frame];
    const stream = Buffer.concat(frames.map((f) => encodeFrame(f.kind, f.id, f.values)));
    for (const step of [1, 3, 7, 4096, stream.length]) {
      const reader = new FrameReader();
      const out: Frame[] = [];
      for (let at = 0; at < stream.length; at += step) reader.push(stream.subarray(at, at + step), (f) => out.push(f));
      expect(out, `chunks of ${step}`).toEqual(frames);
      expect(reader.partial).toBe(false);
    }
    const reader = new FrameReader();
    const out: Frame[] = [];
    reader.push(stream.subarray(0, stream.length - 1), (f) => out.push(f));
    expect(out).toEqual(frames.slice(0, -1));
    expect(reader.partial).toBe(true);
  });

  it("refuses a length prefix over the limit before buffering it", () => {
    const prefix = Buffer.alloc(4);
    prefix.writeUInt32BE(FRAME_BYTES_MAX + 1, 0);
    expect(() => new FrameReader().push(prefix, () => {})).toThrow(/exceeds the limit/);
  });
});
