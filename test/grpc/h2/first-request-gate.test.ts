/**
 * The first-request gate: the probe's verdicts on crafted byte streams, and
 * the SETTINGS handshake against the real server seen from a raw socket (two
 * server SETTINGS with the same content, one ACK each, no GOAWAY).
 */

import net from "node:net";
import hpack from "hpack.js";
import { describe, expect, it } from "vitest";
import { FirstRequestProbe, type GateVerdict, type ProbeOptions } from "../../../src/grpc/h2/first-request-gate.js";
import { CLIENT_PREFACE, Flag, frame, FrameType, MAX_FRAME_SIZE, SettingsId, settingsFrame } from "../../../src/grpc/h2/http2-frame.js";
import { GrpcServer } from "../../../src/grpc/server.js";
import { frame as grpcFrame, HandlerStats, echoHandlers, eventually, loadEchoCodecs } from "../harness.js";

const codecs = loadEchoCodecs();
const CLIENT_SETTINGS = settingsFrame([[0x2, 0]]);
const ACK = frame(FrameType.SETTINGS, Flag.ACK, 0);

function options(overrides: Partial<ProbeOptions> = {}): ProbeOptions {
  return {
    settings: [[SettingsId.MAX_CONCURRENT_STREAMS, 100]],
    keepalive: { minTimeMs: 5000, permitWithoutStream: false },
    ...overrides,
  };
}

function requestBlock(compressor: ReturnType<typeof hpack.compressor.create>, authority: string, path = "/etceteratest.Echo/Unary"): Buffer {
  compressor.write([
    { name: ":method", value: "POST" },
    { name: ":scheme", value: "http" },
    { name: ":path", value: path },
    { name: ":authority", value: authority },
    { name: "content-type", value: "application/grpc" },
    { name: "te", value: "trailers" },
  ]);
  return compressor.read()!;
}

const headers = (streamId: number, block: Buffer, endStream = false): Buffer =>
  frame(FrameType.HEADERS, Flag.END_HEADERS | (endStream ? Flag.END_STREAM : 0), streamId, block);
const ping = (n: number, ack = false): Buffer => frame(FrameType.PING, ack ? Flag.ACK : 0, 0, Buffer.alloc(8, n));

/** Feeds chunks in order; returns all replies and the verdict (after which nothing may be fed). */
function run(probe: FirstRequestProbe, chunks: Buffer[]): { replies: Buffer[]; verdict: GateVerdict | undefined; fedAll: boolean } {
  const replies: Buffer[] = [];
  for (let i = 0; i < chunks.length; i++) {
    const { reply, verdict } = probe.push(chunks[i]!);
    replies.push(...reply);
    if (verdict) return { replies, verdict, fedAll: i === chunks.length - 1 };
  }
  return { replies, verdict: undefined, fedAll: true };
}

describe("FirstRequestProbe", () => {
  const good = requestBlock(hpack.compressor.create({ table: { maxSize: 4096 } }), "127.0.0.1:2379");
  const bad = requestBlock(hpack.compressor.create({ table: { maxSize: 4096 } }), "http://127.0.0.1:2379");

  it("answers the preface with the provisional SETTINGS, then waits for the first request and the ACK (Go's order)", () => {
    const probe = new FirstRequestProbe(options());
    const first = probe.push(Buffer.concat([CLIENT_PREFACE, CLIENT_SETTINGS]));
    expect(first.reply).toEqual([settingsFrame([[SettingsId.MAX_CONCURRENT_STREAMS, 100]])]);
    expect(first.verdict).toBeUndefined();
    expect(probe.push(ACK).verdict).toBeUndefined();
    const data = frame(FrameType.DATA, Flag.END_STREAM, 1, grpcFrame(Buffer.alloc(0)));
    const { verdict } = probe.push(Buffer.concat([headers(1, good), data]));
    // nghttp2 gets everything but the ACK of our SETTINGS.
    expect(verdict).toEqual({ kind: "native", bytes: Buffer.concat([CLIENT_PREFACE, CLIENT_SETTINGS, headers(1, good), data]) });
  });

  it("a request sent before the server's SETTINGS waits for the ACK (grpc-js's order); a bad authority means rewrite", () => {
    const probe = new FirstRequestProbe(options());
    const { verdict } = run(probe, [Buffer.concat([CLIENT_PREFACE, CLIENT_SETTINGS, headers(1, bad)])]);
    expect(verdict).toBeUndefined();
    const windowUpdate = frame(FrameType.WINDOW_UPDATE, 0, 0, Buffer.from([0, 0, 1, 0]));
    expect(probe.push(Buffer.concat([ACK, windowUpdate])).verdict).toEqual({
      kind: "rewrite",
      bytes: Buffer.concat([CLIENT_PREFACE, CLIENT_SETTINGS, headers(1, bad), windowUpdate]),
    });
  });

  it("checks every block that came with the first, in the client's table (a bad authority in the second counts)", () => {
    const compressor = hpack.compressor.create({ table: { maxSize: 4096 } });
    const first = requestBlock(compressor, "127.0.0.1:2379");
    const second = requestBlock(compressor, "http://127.0.0.1:2379");
    const probe = new FirstRequestProbe(options());
    const { verdict } = run(probe, [Buffer.concat([CLIENT_PREFACE, CLIENT_SETTINGS, ACK, headers(1, first, true), headers(3, second, true)])]);
    expect(verdict?.kind).toBe("rewrite");
  });

  it("an ACK split across reads and a block split over CONTINUATION frames", () => {
    const probe = new FirstRequestProbe(options());
    const stream = Buffer.concat([
      CLIENT_PREFACE,
      CLIENT_SETTINGS,
      ACK,
      frame(FrameType.HEADERS, 0, 1, bad.subarray(0, 5)),
      frame(FrameType.CONTINUATION, Flag.END_HEADERS, 1, bad.subarray(5)),
    ]);
    const chunks = Array.from({ length: stream.length }, (_, i) => stream.subarray(i, i + 1));
    const { verdict, fedAll } = run(probe, chunks);
    expect(fedAll).toBe(true);
    expect(verdict?.kind).toBe("rewrite");
  });

  it("answers pings itself, and past two strikes sends GOAWAY too_many_pings (etcd's policy, no stream open)", () => {
    let now = 1_000_000;
    const probe = new FirstRequestProbe(options({ nowMs: () => now }));
    const replies = run(probe, [Buffer.concat([CLIENT_PREFACE, CLIENT_SETTINGS, ACK, ping(1), ping(2), ping(3)])]).replies;
    expect(replies.slice(1)).toEqual([ping(1, true), ping(2, true), ping(3, true)]);
    now += 10;
    const { verdict } = probe.push(ping(4));
    expect(verdict).toMatchObject({ kind: "reject", reason: "too_many_pings" });
    const goaway = (verdict as { goaway: Buffer }).goaway;
    expect(goaway[3]).toBe(FrameType.GOAWAY);
    expect(goaway.readUInt32BE(13)).toBe(0xb);
    expect(goaway.subarray(17).toString()).toBe("too_many_pings");
  });

  it("pings are fine when the policy allows them; they never reach nghttp2", () => {
    let now = 0;
    const probe = new FirstRequestProbe(options({ keepalive: { minTimeMs: 10, permitWithoutStream: true }, nowMs: () => (now += 20) }));
    const chunks = [Buffer.concat([CLIENT_PREFACE, CLIENT_SETTINGS, ACK]), ...Array.from({ length: 10 }, (_, i) => ping(i)), headers(1, good, true)];
    const { replies, verdict } = run(probe, chunks);
    expect(replies.length).toBe(11);
    expect(verdict).toEqual({ kind: "native", bytes: Buffer.concat([CLIENT_PREFACE, CLIENT_SETTINGS, headers(1, good, true)]) });
  });

  it("not an HTTP/2 preface: native at once, nothing sent", () => {
    const probe = new FirstRequestProbe(options());
    const junk = Buffer.from("PRI * HTTP/1.1\r\n");
    expect(probe.push(junk)).toEqual({ reply: [], verdict: { kind: "native", bytes: junk } });
  });

  it("protocol trouble: rejected while our SETTINGS is unacknowledged, nghttp2's to judge after", () => {
    const oversize = frame(FrameType.DATA, 0, 1, Buffer.alloc(MAX_FRAME_SIZE + 1));
    const before = new FirstRequestProbe(options());
    expect(run(before, [Buffer.concat([CLIENT_PREFACE, CLIENT_SETTINGS, oversize])]).verdict).toMatchObject({ kind: "reject" });
    const after = new FirstRequestProbe(options());
    expect(run(after, [Buffer.concat([CLIENT_PREFACE, CLIENT_SETTINGS, ACK, oversize])]).verdict?.kind).toBe("native");
    const stray = new FirstRequestProbe(options());
    const continuation = frame(FrameType.CONTINUATION, Flag.END_HEADERS, 1, good);
    expect(run(stray, [Buffer.concat([CLIENT_PREFACE, CLIENT_SETTINGS, continuation])]).verdict).toMatchObject({ kind: "reject", reason: "CONTINUATION without HEADERS" });
  });

  it("an undecodable first block goes to nghttp2 unchanged (it answers COMPRESSION_ERROR itself)", () => {
    const probe = new FirstRequestProbe(options());
    const garbage = headers(1, Buffer.from([0xbf, 0xff]));
    expect(run(probe, [Buffer.concat([CLIENT_PREFACE, CLIENT_SETTINGS, ACK, garbage])]).verdict?.kind).toBe("native");
  });
});

/** A raw HTTP/2 client socket that records every frame the server sends. */
class RawClient {
  readonly frames: { type: number; flags: number; streamId: number; payload: Buffer }[] = [];
  private buffer = Buffer.alloc(0);
  private readonly socket: net.Socket;
  closed = false;

  constructor(port: number) {
    this.socket = net.connect(port, "127.0.0.1");
    this.socket.on("data", (chunk: Buffer) => {
      this.buffer = Buffer.concat([this.buffer, chunk]);
      while (this.buffer.length >= 9) {
        const length = this.buffer.readUIntBE(0, 3);
        if (this.buffer.length < 9 + length) break;
        this.frames.push({ type: this.buffer[3]!, flags: this.buffer[4]!, streamId: this.buffer.readUInt32BE(5) & 0x7fffffff, payload: this.buffer.subarray(9, 9 + length) });
        this.buffer = this.buffer.subarray(9 + length);
      }
    });
    this.socket.on("close", () => (this.closed = true));
    this.socket.on("error", () => {});
  }

  write(bytes: Buffer): void {
    this.socket.write(bytes);
  }

  of(type: number, flags?: number): { type: number; flags: number; payload: Buffer }[] {
    return this.frames.filter((f) => f.type === type && (flags === undefined || f.flags === flags));
  }

  destroy(): void {
    this.socket.destroy();
  }
}

describe("the gate in front of node:http2", () => {
  for (const authority of ["127.0.0.1:2379", "http://127.0.0.1:2379"]) {
    it(`two server SETTINGS with the same content, one ACK each, and an answer (:authority ${authority})`, async () => {
      const server = new GrpcServer({ codecs, maxConcurrentStreams: 100, http2Engine: "node" });
      server.addService("etceteratest.Echo", echoHandlers(new HandlerStats()));
      const { port } = await server.listen(0);
      const client = new RawClient(port);
      try {
        client.write(Buffer.concat([CLIENT_PREFACE, CLIENT_SETTINGS]));
        await eventually(() => client.of(FrameType.SETTINGS, 0).length === 1, "the provisional SETTINGS");
        // Go's order: ACK, then the request (its body an empty EchoRequest).
        const block = requestBlock(hpack.compressor.create({ table: { maxSize: 4096 } }), authority);
        client.write(Buffer.concat([ACK, headers(1, block), frame(FrameType.DATA, Flag.END_STREAM, 1, grpcFrame(Buffer.alloc(0)))]));
        await eventually(() => client.of(FrameType.SETTINGS, 0).length === 2, "nghttp2's SETTINGS");
        client.write(ACK);
        await eventually(() => client.of(FrameType.HEADERS).some((f) => f.flags & Flag.END_STREAM), "the trailers");
        const [provisional, native] = client.of(FrameType.SETTINGS, 0);
        expect(provisional!.payload).toEqual(native!.payload);
        expect(provisional!.payload).toEqual(Buffer.from([0, SettingsId.MAX_CONCURRENT_STREAMS, 0, 0, 0, 100]));
        // nghttp2 acknowledged the client's SETTINGS exactly once and took our ACK for its own: no GOAWAY.
        expect(client.of(FrameType.SETTINGS, Flag.ACK).length).toBe(1);
        // A ping after the handover is nghttp2's to answer; then still no GOAWAY.
        client.write(ping(9));
        await eventually(() => client.of(FrameType.PING, Flag.ACK).length === 1, "nghttp2's ping ack");
        expect(client.of(FrameType.GOAWAY)).toEqual([]);
        expect(client.of(FrameType.RST_STREAM)).toEqual([]);
        expect(server.authorityRewrites).toBe(authority.startsWith("http://") ? 1 : 0);
      } finally {
        client.destroy();
        await server.close(100);
      }
    });
  }

  it("close() ends connections still at the gate", async () => {
    const server = new GrpcServer({ codecs, http2Engine: "node" });
    const { port } = await server.listen(0);
    const client = new RawClient(port);
    client.write(Buffer.concat([CLIENT_PREFACE, CLIENT_SETTINGS]));
    await eventually(() => client.of(FrameType.SETTINGS, 0).length === 1, "the provisional SETTINGS");
    expect(server.connections).toBe(1);
    await server.close(100);
    await eventually(() => client.closed, "the gated connection closed");
    expect(server.connections).toBe(0);
  });
});
