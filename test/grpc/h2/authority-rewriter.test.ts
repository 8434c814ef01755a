/**
 * The AuthorityRewriter on crafted client byte streams (header blocks encoded
 * by hpack.js, an independent HPACK encoder): what comes out must be what
 * nghttp2 accepts, i.e. header blocks that decode, with a fresh decoder whose
 * dynamic table stays empty, to the client's fields with the authority
 * repaired; every other frame byte-for-byte. Random chunkings print their
 * seed; replay with SEED=<n>.
 */

import http2 from "node:http2";
import net from "node:net";
import fc from "fast-check";
import hpack, { type HpackHeader } from "hpack.js";
import { describe, expect, it } from "vitest";
import { AuthorityRewriter } from "../../../src/grpc/h2/authority-rewriter.js";
import { HpackDecoder } from "../../../src/grpc/h2/hpack.js";
import { CLIENT_PREFACE, Flag, frame, FrameType, MAX_FRAME_SIZE, settingsFrame } from "../../../src/grpc/h2/http2-frame.js";
import { seedFor } from "../harness.js";

const SEED = seedFor("authority-rewriter");
const BAD = "http://127.0.0.1:2379";
const GOOD = "127.0.0.1:2379";

interface Frame {
  type: number;
  flags: number;
  streamId: number;
  payload: Buffer;
}

function parseFrames(bytes: Buffer): Frame[] {
  expect(bytes.subarray(0, CLIENT_PREFACE.length).equals(CLIENT_PREFACE)).toBe(true);
  const frames: Frame[] = [];
  let at = CLIENT_PREFACE.length;
  while (at < bytes.length) {
    const length = bytes.readUIntBE(at, 3);
    frames.push({ type: bytes[at + 3]!, flags: bytes[at + 4]!, streamId: bytes.readUInt32BE(at + 5), payload: bytes.subarray(at + 9, at + 9 + length) });
    at += 9 + length;
  }
  expect(at).toBe(bytes.length);
  return frames;
}

/** What nghttp2 would see: header blocks decoded by a decoder that never gets a dynamic entry. */
function decodeAsNghttp2(frames: Frame[]): { streamId: number; endStream: boolean; fields: [string, string][] }[] {
  const decoder = new HpackDecoder();
  const blocks: { streamId: number; endStream: boolean; fields: [string, string][] }[] = [];
  let open: { streamId: number; endStream: boolean; parts: Buffer[] } | undefined;
  for (const f of frames) {
    if (f.type === FrameType.HEADERS) {
      expect(f.flags & Flag.PADDED).toBe(0);
      const priorityBytes = f.flags & Flag.PRIORITY ? 5 : 0;
      open = { streamId: f.streamId, endStream: (f.flags & Flag.END_STREAM) !== 0, parts: [f.payload.subarray(priorityBytes)] };
    } else if (f.type === FrameType.CONTINUATION) {
      expect(open?.streamId).toBe(f.streamId);
      open!.parts.push(f.payload);
    } else {
      expect(open).toBeUndefined();
      continue;
    }
    expect(f.payload.length).toBeLessThanOrEqual(MAX_FRAME_SIZE);
    if (f.flags & Flag.END_HEADERS) {
      const block = Buffer.concat(open!.parts);
      if (blocks.length === 0) expect(block[0]).toBe(0x20); // the first block zeroes nghttp2's table
      blocks.push({ streamId: open!.streamId, endStream: open!.endStream, fields: decoder.decode(block).map((h) => [h.name, h.value]) });
      expect(decoder.table.entries).toBe(0);
      open = undefined;
    }
  }
  return blocks;
}

function requestHeaders(authority: string, extra: HpackHeader[] = [], huffman = true): HpackHeader[] {
  return [
    { name: ":method", value: "POST", huffman },
    { name: ":scheme", value: "http", huffman },
    { name: ":path", value: "/etcdserverpb.KV/Range", huffman },
    { name: ":authority", value: authority, huffman },
    { name: "content-type", value: "application/grpc", huffman },
    { name: "te", value: "trailers", huffman },
    ...extra,
  ];
}

class ClientStream {
  private readonly compressor = hpack.compressor.create({ table: { maxSize: 4096 } });
  readonly parts: Buffer[] = [CLIENT_PREFACE, settingsFrame([[0x2, 0]])];

  encode(headers: HpackHeader[], prefix: Buffer = Buffer.alloc(0)): Buffer {
    this.compressor.write(headers);
    return Buffer.concat([prefix, this.compressor.read() ?? Buffer.alloc(0)]);
  }

  /** HEADERS (+ CONTINUATION) carrying `block`, cut into fragments of the given sizes. */
  headers(streamId: number, block: Buffer, options: { endStream?: boolean; fragments?: number[]; pad?: number; priority?: boolean } = {}): this {
    const sizes = options.fragments ?? [block.length];
    let at = 0;
    sizes.forEach((size, i) => {
      const last = i === sizes.length - 1;
      const fragment = block.subarray(at, last ? block.length : at + size);
      at += size;
      if (i === 0) {
        let flags = (options.endStream ? Flag.END_STREAM : 0) | (last ? Flag.END_HEADERS : 0);
        const head: Buffer[] = [];
        if (options.pad !== undefined) {
          flags |= Flag.PADDED;
          head.push(Buffer.from([options.pad]));
        }
        if (options.priority) {
          flags |= Flag.PRIORITY;
          head.push(Buffer.from([0x80, 0, 0, 0, 15]));
        }
        this.parts.push(frame(FrameType.HEADERS, flags, streamId, Buffer.concat([...head, fragment, Buffer.alloc(options.pad ?? 0, 0xee)])));
      } else {
        this.parts.push(frame(FrameType.CONTINUATION, last ? Flag.END_HEADERS : 0, streamId, fragment));
      }
    });
    return this;
  }

  raw(bytes: Buffer): this {
    this.parts.push(bytes);
    return this;
  }

  bytes(): Buffer {
    return Buffer.concat(this.parts);
  }
}

function rewriteAll(input: Buffer, cuts: number[] = []): { out: Buffer; rewriter: AuthorityRewriter } {
  const rewriter = new AuthorityRewriter();
  const out: Buffer[] = [];
  let from = 0;
  for (const cut of [...cuts.filter((c) => c > 0 && c < input.length).sort((a, b) => a - b), input.length]) {
    out.push(...rewriter.push(input.subarray(from, cut)));
    from = cut;
  }
  return { out: Buffer.concat(out), rewriter };
}

/** End of the last complete frame (a capture may stop mid-frame). */
function lastFrameEnd(bytes: Buffer): number {
  let at = CLIENT_PREFACE.length;
  while (at + 9 <= bytes.length && at + 9 + bytes.readUIntBE(at, 3) <= bytes.length) at += 9 + bytes.readUIntBE(at, 3);
  return at;
}

const dataFrame = (streamId: number, payload: Buffer, endStream = false): Buffer => frame(FrameType.DATA, endStream ? Flag.END_STREAM : 0, streamId, payload);

describe("AuthorityRewriter", () => {
  it("repairs a Huffman-coded bad authority; other frames pass byte-for-byte", () => {
    const client = new ClientStream();
    const block = client.encode(requestHeaders(BAD));
    // The authority is Huffman-coded on the wire: its literal text is not in the block.
    expect(block.includes(Buffer.from("127.0.0.1"))).toBe(false);
    const data = dataFrame(1, Buffer.from([0, 0, 0, 0, 3, 1, 2, 3]), true);
    const ping = frame(FrameType.PING, 0, 0, Buffer.alloc(8, 7));
    const windowUpdate = frame(FrameType.WINDOW_UPDATE, 0, 0, Buffer.from([0, 1, 0, 0]));
    const input = client.raw(windowUpdate).headers(1, block).raw(data).raw(ping).bytes();
    const { out, rewriter } = rewriteAll(input);
    const frames = parseFrames(out);
    expect(frames.map((f) => f.type)).toEqual([FrameType.SETTINGS, FrameType.WINDOW_UPDATE, FrameType.HEADERS, FrameType.DATA, FrameType.PING]);
    expect(out.includes(data) && out.includes(ping) && out.includes(windowUpdate) && out.includes(settingsFrame([[0x2, 0]]))).toBe(true);
    const [request] = decodeAsNghttp2(frames);
    expect(request!.fields).toEqual(requestHeaders(GOOD).map((h) => [h.name, h.value]));
    expect(rewriter.repaired).toBe(1);
  });

  it("follows the client's dynamic table: a later block's reference to the indexed bad authority is repaired too", () => {
    const client = new ClientStream();
    const first = client.encode(requestHeaders(BAD, [{ name: "token", value: "abc" }]));
    const second = client.encode(requestHeaders(BAD, [{ name: "token", value: "abc" }]));
    // The second block is all indexed references (one octet per field, 0x80 | index), 62+ being dynamic.
    expect(second.length).toBe(7);
    expect([...second].some((b) => (b & 0x7f) >= 62)).toBe(true);
    const input = client.headers(1, first, { endStream: true }).headers(3, second, { endStream: true }).bytes();
    const { out, rewriter } = rewriteAll(input);
    const blocks = decodeAsNghttp2(parseFrames(out));
    const expected = requestHeaders(GOOD, [{ name: "token", value: "abc" }]).map((h) => [h.name, h.value]);
    expect(blocks).toEqual([
      { streamId: 1, endStream: true, fields: expected },
      { streamId: 3, endStream: true, fields: expected },
    ]);
    expect(rewriter.repaired).toBe(2);
    expect(rewriter.blocks).toBe(2);
  });

  it("joins HEADERS + CONTINUATION fragments, drops padding, keeps priority and END_STREAM", () => {
    const client = new ClientStream();
    const block = client.encode(requestHeaders(BAD, [{ name: "x-note", value: "n".repeat(50) }]));
    const input = client.headers(5, block, { fragments: [3, 20, 1], pad: 4, priority: true, endStream: true }).bytes();
    const { out } = rewriteAll(input);
    const frames = parseFrames(out);
    const headers = frames.find((f) => f.type === FrameType.HEADERS)!;
    expect(headers.flags & Flag.PRIORITY).toBe(Flag.PRIORITY);
    expect(headers.payload.subarray(0, 5)).toEqual(Buffer.from([0x80, 0, 0, 0, 15]));
    const [request] = decodeAsNghttp2(frames);
    expect(request).toEqual({ streamId: 5, endStream: true, fields: requestHeaders(GOOD, [{ name: "x-note", value: "n".repeat(50) }]).map((h) => [h.name, h.value]) });
  });

  it("applies the client's table size updates (evict to 0, grow back) while following references", () => {
    const client = new ClientStream();
    const first = client.encode(requestHeaders(BAD));
    // The client shrinks its table to 0 and back: hpack.js cannot say so itself, so a fresh encoder stands in from here.
    const input = client.headers(1, first).bytes();
    const after = new ClientStream();
    const second = after.encode(requestHeaders(BAD), Buffer.from([0x20, 0x3f, 0xe1, 0x1f]));
    const third = after.encode(requestHeaders(BAD));
    expect([...third].some((b) => (b & 0x80) !== 0 && (b & 0x7f) >= 62)).toBe(true);
    const stream = Buffer.concat([input, frame(FrameType.HEADERS, Flag.END_HEADERS, 3, second), frame(FrameType.HEADERS, Flag.END_HEADERS, 5, third)]);
    const { out, rewriter } = rewriteAll(stream);
    const blocks = decodeAsNghttp2(parseFrames(out));
    expect(blocks.map((b) => b.fields.find(([n]) => n === ":authority")![1])).toEqual([GOOD, GOOD, GOOD]);
    expect(rewriter.repaired).toBe(3);
  });

  it("leaves good authorities alone but still re-encodes their blocks", () => {
    const client = new ClientStream();
    const input = client.headers(1, client.encode(requestHeaders(GOOD))).headers(3, client.encode(requestHeaders(BAD))).bytes();
    const { out, rewriter } = rewriteAll(input);
    const blocks = decodeAsNghttp2(parseFrames(out));
    expect(blocks.map((b) => b.fields[3])).toEqual([[":authority", GOOD], [":authority", GOOD]]);
    expect(rewriter).toMatchObject({ blocks: 2, repaired: 1 });
  });

  it("splits a block that outgrows SETTINGS_MAX_FRAME_SIZE into CONTINUATION frames", () => {
    const client = new ClientStream();
    // Huffman-coded 'a's (5 bits each) grow by 8/5 when re-encoded raw: 14,000 octets become 22,400.
    const value = "a".repeat(22_400);
    const block = client.encode(requestHeaders(BAD, [{ name: "x-big", value, incremental: false }]));
    expect(block.length).toBeLessThan(MAX_FRAME_SIZE);
    const { out } = rewriteAll(client.headers(1, block).bytes());
    const frames = parseFrames(out);
    expect(frames.filter((f) => f.type === FrameType.CONTINUATION).length).toBe(1);
    const [request] = decodeAsNghttp2(frames);
    expect(request!.fields.at(-1)).toEqual(["x-big", value]);
  });

  it("translates what a real HPACK encoder sends (node:http2's nghttp2: Huffman, dynamic-table references)", async () => {
    // A raw server records the client's bytes; its empty SETTINGS lets the client go on.
    let captured = Buffer.alloc(0);
    const headersSeen = (): number => {
      let n = 0;
      for (let at = CLIENT_PREFACE.length; at + 9 <= captured.length; at += 9 + captured.readUIntBE(at, 3)) if (captured[at + 3] === FrameType.HEADERS) n++;
      return n;
    };
    const raw = net.createServer((socket) => {
      socket.write(settingsFrame([]));
      socket.on("data", (chunk: Buffer) => (captured = Buffer.concat([captured, chunk])));
    });
    await new Promise<void>((resolve) => raw.listen(0, "127.0.0.1", resolve));
    const port = (raw.address() as net.AddressInfo).port;
    const session = http2.connect(`http://127.0.0.1:${port}`);
    session.on("error", () => {});
    for (let i = 0; i < 3; i++) {
      const req = session.request({ ":method": "POST", ":path": "/etcdserverpb.KV/Range", ":authority": `http://127.0.0.1:${port}`, "content-type": "application/grpc", te: "trailers", "x-i": String(i) });
      req.on("error", () => {});
      req.end(Buffer.alloc(5));
    }
    while (headersSeen() < 3) await new Promise((r) => setTimeout(r, 5));
    session.destroy();
    await new Promise((resolve) => raw.close(resolve));
    const frames = parseFrames(captured.subarray(0, lastFrameEnd(captured)));
    const inputBlocks = frames.filter((f) => f.type === FrameType.HEADERS).map((f) => f.payload);
    // Later blocks refer to the first one's entries: the authority is one octet there, not a literal.
    expect(inputBlocks[1]!.length).toBeLessThan(inputBlocks[0]!.length / 2);
    expect([...inputBlocks[1]!].some((b) => b >= 0x80 + 62)).toBe(true);
    const { out, rewriter } = rewriteAll(captured.subarray(0, lastFrameEnd(captured)));
    const blocks = decodeAsNghttp2(parseFrames(out));
    expect(blocks.map((b) => [b.fields.find(([n]) => n === ":authority")![1], b.fields.find(([n]) => n === "x-i")![1]])).toEqual([
      ["127.0.0.1:" + port, "0"],
      ["127.0.0.1:" + port, "1"],
      ["127.0.0.1:" + port, "2"],
    ]);
    expect(rewriter.repaired).toBe(3);
  });

  it(`gives the same bytes whatever the chunking (seed ${SEED})`, () => {
    const client = new ClientStream();
    const first = client.encode(requestHeaders(BAD));
    const second = client.encode(requestHeaders(BAD, [{ name: "x-n", value: "2" }]));
    const input = client
      .headers(1, first, { fragments: [5, 7, 100], pad: 2 })
      .raw(dataFrame(1, Buffer.alloc(300, 1)))
      .raw(dataFrame(1, Buffer.alloc(0), true))
      .headers(3, second, { priority: true })
      .raw(frame(FrameType.RST_STREAM, 0, 3, Buffer.from([0, 0, 0, 8])))
      .bytes();
    const whole = rewriteAll(input).out;
    decodeAsNghttp2(parseFrames(whole));
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 1, max: input.length - 1 }), { maxLength: 40 }), (cuts) => {
        expect(rewriteAll(input, cuts).out.equals(whole)).toBe(true);
      }),
      { seed: SEED, numRuns: 300 },
    );
    // Byte by byte too.
    expect(rewriteAll(input, Array.from({ length: input.length }, (_, i) => i)).out.equals(whole)).toBe(true);
  });

  it("refuses framing the protocol forbids and blocks it cannot decode", () => {
    const client = () => new ClientStream();
    const block = new ClientStream().encode(requestHeaders(BAD));
    const cases: [Buffer, RegExp][] = [
      [client().raw(frame(FrameType.CONTINUATION, Flag.END_HEADERS, 1, block)).bytes(), /CONTINUATION of stream 1 without HEADERS/],
      [client().headers(1, block, { fragments: [4, 100] }).bytes().subarray(0, -(block.length - 4) - 9), /./],
      [Buffer.concat([client().bytes(), frame(FrameType.HEADERS, 0, 1, block.subarray(0, 4)), dataFrame(1, Buffer.alloc(1))]), /frame type 0 inside the header block/],
      [Buffer.concat([client().bytes(), frame(FrameType.HEADERS, Flag.END_HEADERS, 1, Buffer.alloc(MAX_FRAME_SIZE + 1))]), /header frame of 16385 bytes/],
      [Buffer.concat([client().bytes(), frame(FrameType.HEADERS, Flag.END_HEADERS, 1, Buffer.from([0xff]))]), /HPACK: truncated integer/],
      [Buffer.concat([client().bytes(), frame(FrameType.HEADERS, Flag.END_HEADERS | Flag.PADDED, 1, Buffer.from([9, 0x82]))]), /padding exceeds/],
      [Buffer.concat([client().bytes(), frame(FrameType.HEADERS, Flag.END_HEADERS, 0, block)]), /stream 0/],
    ];
    for (const [input, message] of cases.filter((_, i) => i !== 1)) expect(() => rewriteAll(input), String(message)).toThrow(message);
    // A block cut short is held, not forwarded half-done.
    const held = rewriteAll(cases[1]![0]).out;
    expect(parseFrames(held).map((f) => f.type)).toEqual([FrameType.SETTINGS]);
  });
});
