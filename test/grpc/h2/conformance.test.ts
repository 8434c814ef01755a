/**
 * HTTP/2 conformance of the client port's gRPC server, on the wire: a raw
 * client (raw_client.ts) sends frames byte for byte and checks what the server
 * sends back against RFC 7540/7541 and gRPC over HTTP/2. Every test runs
 * against every engine in engines.ts, so a new HTTP/2 server connection can be
 * held to what node:http2 (nghttp2) does today. Where nghttp2 makes an
 * RFC-allowed choice of its own, the test pins it and says so.
 *
 * The first-request gate (src/grpc/h2/first-request-gate.ts) holds every
 * connection until the client has ACKed the server's SETTINGS and sent a
 * complete header block, so tests of connection-level behaviour send a
 * request first.
 */

import { afterEach, describe, expect, it } from "vitest";
import { GrpcServer, type GrpcServerOptions } from "../../../src/grpc/server.js";
import { encodeLiteralBlock } from "../../../src/grpc/h2/hpack.js";
import { Flag, FrameType } from "../../../src/grpc/h2/http2-frame.js";
import { HandlerStats, echoHandlers, frame, loadEchoCodecs } from "../harness.js";
import { HTTP2_ENGINES, engineOptions } from "./engines.js";
import { ErrorCode, RawH2Client, Setting, type StreamResponse, u32 } from "./raw_client.js";

const codecs = loadEchoCodecs();
const request = codecs.message<Record<string, unknown>>("etceteratest.EchoRequest");
const response = codecs.message<{ payload: Buffer; index: number }>("etceteratest.EchoResponse");

const UNARY = "/etceteratest.Echo/Unary";
const SERVER_STREAM = "/etceteratest.Echo/ServerStream";
const BIDI = "/etceteratest.Echo/Bidi";

function echo(fields: Record<string, unknown>): Buffer {
  return frame(request.encode(fields));
}

/** HEADERS(:status 200, application/grpc), DATA with the messages, HEADERS(grpc-status 0, END_STREAM). */
function expectGrpcOk(res: StreamResponse): Buffer[] {
  const [first, ...rest] = res.headerFrames;
  expect(first?.headers?.get(":status")).toBe("200");
  expect(first?.headers?.get("content-type")).toMatch(/^application\/grpc/);
  expect(first!.flags & Flag.END_STREAM).toBe(0);
  expect(rest).toHaveLength(1);
  const trailers = rest[0]!;
  expect(trailers.headers?.get("grpc-status")).toBe("0");
  expect(trailers.flags & Flag.END_STREAM).toBe(Flag.END_STREAM);
  // Trailers come last on the stream.
  expect(res.frames.filter((f) => f.type !== FrameType.CONTINUATION).at(-1)).toBe(trailers);
  expect(res.rst).toBeUndefined();
  return res.messages;
}

function goawayOf(client: RawH2Client): Promise<{ lastStreamId: number; code: number }> {
  return client
    .waitFor((f) => f.type === FrameType.GOAWAY, "GOAWAY")
    .then((f) => ({ lastStreamId: f.payload.readUInt32BE(0) & 0x7fffffff, code: f.payload.readUInt32BE(4) }));
}

describe.each(HTTP2_ENGINES)("HTTP/2 conformance (%s engine)", (engine) => {
  const servers: GrpcServer[] = [];
  const clients: RawH2Client[] = [];

  async function serve(options: GrpcServerOptions = {}): Promise<{ server: GrpcServer; port: number; stats: HandlerStats }> {
    const stats = new HandlerStats();
    const server = new GrpcServer({ codecs, ...options, ...engineOptions(engine) });
    server.addService("etceteratest.Echo", echoHandlers(stats));
    servers.push(server);
    const { port } = await server.listen(0);
    return { server, port, stats };
  }

  async function connect(port: number, options: Parameters<typeof RawH2Client.connect>[1] = {}): Promise<RawH2Client> {
    const client = await RawH2Client.connect(port, options);
    clients.push(client);
    return client;
  }

  /** A unary echo on `streamId`, answered OK: the gate is past and the connection is the engine's. */
  async function unaryOk(client: RawH2Client, streamId: number): Promise<void> {
    client.headers(streamId, client.grpcHeaders(UNARY));
    client.dataFrame(streamId, echo({ payload: Buffer.from("warm") }), { endStream: true });
    const messages = expectGrpcOk(await client.response(streamId));
    expect(response.decode(messages[0]!).payload.toString()).toBe("warm");
  }

  afterEach(async () => {
    for (const client of clients.splice(0)) {
      expect(client.violations).toEqual([]);
      client.close();
    }
    await Promise.all(servers.splice(0).map((s) => s.close(100)));
  });

  describe("connection preface", () => {
    it("sends SETTINGS first (with MAX_CONCURRENT_STREAMS), answers PING, ACKs the client's SETTINGS", async () => {
      const { port } = await serve({ maxConcurrentStreams: 7 });
      const client = await connect(port, { settings: [[Setting.INITIAL_WINDOW_SIZE, 100_000]] });
      const first = client.log[0]!;
      expect(first.type).toBe(FrameType.SETTINGS);
      expect(first.flags & Flag.ACK).toBe(0);
      expect(first.streamId).toBe(0);
      const settings = new Map<number, number>();
      for (let i = 0; i < first.payload.length; i += 6) settings.set(first.payload.readUInt16BE(i), first.payload.readUInt32BE(i + 2));
      expect(settings.get(Setting.MAX_CONCURRENT_STREAMS)).toBe(7);

      const opaque = Buffer.from("8 bytes!");
      client.ping(opaque);
      const pong = await client.waitFor((f) => f.type === FrameType.PING, "PING ACK");
      expect(pong.flags & Flag.ACK).toBe(Flag.ACK);
      expect(pong.streamId).toBe(0);
      expect(pong.payload).toEqual(opaque);

      // The gate holds the client's SETTINGS until a first request (see the file comment): send one.
      await unaryOk(client, 1);
      const ack = await client.waitFor((f) => f.type === FrameType.SETTINGS && (f.flags & Flag.ACK) !== 0, "SETTINGS ACK");
      expect(ack.payload.length).toBe(0);
      expect(ack.streamId).toBe(0);
    });

    it("answers a PING sent with a unary request, and one sent while a call stays open and silent", async () => {
      const { port } = await serve();
      const client = await connect(port);
      await unaryOk(client, 1);
      // With a request (grpc-go's clients ping with each one): the ACK may ride with the response.
      client.headers(3, client.grpcHeaders(UNARY));
      client.dataFrame(3, echo({ payload: Buffer.from("with a ping") }), { endStream: true });
      client.ping(Buffer.from("request!"));
      const withCall = await client.waitFor((f) => f.type === FrameType.PING && f.payload.toString() === "request!", "PING ACK beside a unary call");
      expect(withCall.flags & Flag.ACK).toBe(Flag.ACK);
      expect(response.decode(expectGrpcOk(await client.response(3))[0]!).payload.toString()).toBe("with a ping");
      // A bidi call that sends nothing: nothing else is written, and the ACK still comes.
      client.headers(5, client.grpcHeaders(BIDI));
      client.ping(Buffer.from("silent!!"));
      const silent = await client.waitFor((f) => f.type === FrameType.PING && f.payload.toString() === "silent!!", "PING ACK beside a silent call");
      expect(silent.flags & Flag.ACK).toBe(Flag.ACK);
      expect(client.log.some((f) => f.streamId === 5)).toBe(false);
    });
  });

  describe("request framing", () => {
    it("a header block split over HEADERS + CONTINUATION", async () => {
      const { port } = await serve();
      const client = await connect(port);
      client.headers(1, client.grpcHeaders(UNARY, { "x-echo": "continued" }), { fragments: 3 });
      client.dataFrame(1, echo({ payload: Buffer.from("split") }), { endStream: true });
      const [msg] = expectGrpcOk(await client.response(1));
      const decoded = codecs.message<{ payload: Buffer; metadata: string }>("etceteratest.EchoResponse").decode(msg!);
      expect(decoded.payload.toString()).toBe("split");
      expect(decoded.metadata).toBe("continued|deadline=false");
    });

    it("padded HEADERS with the PRIORITY flag, and padded DATA frames", async () => {
      const { port } = await serve();
      const client = await connect(port);
      client.headers(1, client.grpcHeaders(UNARY), { padding: 17, priority: { dependsOn: 0, weight: 200, exclusive: true } });
      const message = echo({ payload: Buffer.from("padded") });
      client.dataFrame(1, message.subarray(0, 4), { padding: 0 });
      client.dataFrame(1, message.subarray(4), { padding: 255, endStream: true });
      const [msg] = expectGrpcOk(await client.response(1));
      expect(response.decode(msg!).payload.toString()).toBe("padded");
    });

    it("a message split across several DATA frames, END_STREAM on an empty DATA frame after it", async () => {
      const { port } = await serve();
      const client = await connect(port);
      client.headers(1, client.grpcHeaders(UNARY));
      const message = echo({ payload: Buffer.alloc(3000, 0x61) });
      for (let at = 0; at < message.length; at += 700) client.dataFrame(1, message.subarray(at, at + 700));
      client.dataFrame(1, Buffer.alloc(0), { endStream: true });
      const [msg] = expectGrpcOk(await client.response(1));
      expect(response.decode(msg!).payload).toEqual(Buffer.alloc(3000, 0x61));
    });

    it("calls whose header blocks repeat byte for byte each get their own headers, and a change is seen", async () => {
      const { port } = await serve();
      const client = await connect(port);
      const metadataOf = async (streamId: number, echoed: string): Promise<string> => {
        client.headers(streamId, client.grpcHeaders(UNARY, { "x-echo": echoed }));
        client.dataFrame(streamId, echo({ payload: Buffer.from(echoed) }), { endStream: true });
        const [msg] = expectGrpcOk(await client.response(streamId));
        return codecs.message<{ metadata: string }>("etceteratest.EchoResponse").decode(msg!).metadata;
      };
      // The raw client's blocks are literals without indexing: one header list, the same bytes.
      expect(await metadataOf(1, "one")).toBe("one|deadline=false");
      expect(await metadataOf(3, "one")).toBe("one|deadline=false");
      expect(await metadataOf(5, "two")).toBe("two|deadline=false");
      expect(await metadataOf(7, "one")).toBe("one|deadline=false");
      expect(await metadataOf(9, "one")).toBe("one|deadline=false");
    });

    it("a malformed header block is refused each time it repeats", async () => {
      const { port } = await serve();
      const client = await connect(port);
      await unaryOk(client, 1);
      for (const streamId of [3, 5]) {
        client.headers(streamId, client.grpcHeaders(UNARY, { te: "gzip" }), { endStream: true });
        const res = await client.response(streamId);
        expect(res.rst).toBe(ErrorCode.PROTOCOL_ERROR);
      }
      await unaryOk(client, 7);
    });

    it("several calls on one connection, one after another and interleaved", async () => {
      const { port } = await serve();
      const client = await connect(port);
      await unaryOk(client, 1);
      const a = echo({ payload: Buffer.from("stream 3") });
      const b = echo({ payload: Buffer.from("stream 5") });
      client.headers(3, client.grpcHeaders(UNARY));
      client.headers(5, client.grpcHeaders(UNARY));
      client.dataFrame(5, b.subarray(0, 3));
      client.dataFrame(3, a.subarray(0, 6));
      client.dataFrame(5, b.subarray(3), { endStream: true });
      client.dataFrame(3, a.subarray(6), { endStream: true });
      expect(response.decode(expectGrpcOk(await client.response(3))[0]!).payload.toString()).toBe("stream 3");
      expect(response.decode(expectGrpcOk(await client.response(5))[0]!).payload.toString()).toBe("stream 5");
    });
  });

  describe("flow control", () => {
    it("grants window for a request body larger than 65,535 bytes (1 MiB)", async () => {
      const { port } = await serve();
      const client = await connect(port);
      const payload = Buffer.alloc(1024 * 1024, 0x5a);
      client.headers(1, client.grpcHeaders(UNARY));
      await client.sendData(1, echo({ payload, response_bytes: 3 }), { endStream: true });
      const [msg] = expectGrpcOk(await client.response(1));
      expect(response.decode(msg!).payload).toEqual(Buffer.from("xxx"));
      expect(client.log.some((f) => f.type === FrameType.WINDOW_UPDATE)).toBe(true);
    });

    it("sends no more DATA than a small stream window (INITIAL_WINDOW_SIZE 1,000), then continues on WINDOW_UPDATE", async () => {
      const { port } = await serve();
      const client = await connect(port, { settings: [[Setting.INITIAL_WINDOW_SIZE, 1000]], autoWindow: false });
      client.headers(1, client.grpcHeaders(UNARY));
      client.dataFrame(1, echo({ response_bytes: 40_000 }), { endStream: true });
      const dataOn1 = (): number => client.log.filter((f) => f.type === FrameType.DATA && f.streamId === 1).reduce((n, f) => n + f.payload.length, 0);
      // The window is used up (violations would record any byte beyond it: afterEach checks).
      await client.until(() => dataOn1() === 1000, "1,000 bytes of DATA on stream 1");
      await client.sync();
      expect(dataOn1()).toBe(1000);
      client.windowUpdate(1, 100_000);
      const [msg] = expectGrpcOk(await client.response(1));
      expect(response.decode(msg!).payload.length).toBe(40_000);
      expect(client.log.every((f) => f.payload.length <= 16_384)).toBe(true);
      expect(client.violations).toEqual([]);
    });

    it("bounds the DATA of all streams by the connection window (65,535) until the client grants more", async () => {
      const { port } = await serve();
      const client = await connect(port, { settings: [[Setting.INITIAL_WINDOW_SIZE, 1_000_000]], autoWindow: false });
      for (const id of [1, 3]) {
        client.headers(id, client.grpcHeaders(UNARY));
        client.dataFrame(id, echo({ response_bytes: 60_000 }), { endStream: true });
      }
      const allData = (): number => client.log.filter((f) => f.type === FrameType.DATA).reduce((n, f) => n + f.payload.length, 0);
      await client.until(() => allData() === 65_535, "the connection window to be used up");
      await client.sync();
      expect(allData()).toBe(65_535);
      expect(client.violations).toEqual([]);
      client.windowUpdate(0, 1_000_000);
      for (const id of [1, 3]) expect(response.decode(expectGrpcOk(await client.response(id))[0]!).payload.length).toBe(60_000);
    });

    it("a SETTINGS raising INITIAL_WINDOW_SIZE lets a blocked stream's DATA go (RFC 7540 6.9.2)", async () => {
      const { port } = await serve();
      const client = await connect(port, { settings: [[Setting.INITIAL_WINDOW_SIZE, 1000]], autoWindow: false });
      client.headers(1, client.grpcHeaders(UNARY));
      client.dataFrame(1, echo({ response_bytes: 30_000 }), { endStream: true });
      const dataOn1 = (): number => client.log.filter((f) => f.type === FrameType.DATA && f.streamId === 1).reduce((n, f) => n + f.payload.length, 0);
      await client.until(() => dataOn1() === 1000, "1,000 bytes of DATA on stream 1");
      const acksBefore = client.log.filter((f) => f.type === FrameType.SETTINGS && (f.flags & Flag.ACK) !== 0).length;
      client.settings([[Setting.INITIAL_WINDOW_SIZE, 50_000]]);
      const [msg] = expectGrpcOk(await client.response(1));
      expect(response.decode(msg!).payload.length).toBe(30_000);
      await client.until(
        () => client.log.filter((f) => f.type === FrameType.SETTINGS && (f.flags & Flag.ACK) !== 0).length > acksBefore,
        "the ACK of the new SETTINGS",
      );
    });
  });

  describe("stream lifecycle", () => {
    it("RST_STREAM(CANCEL) on a running server stream aborts the handler, and no frame follows on it", async () => {
      const { port, stats } = await serve();
      const client = await connect(port);
      client.headers(1, client.grpcHeaders(SERVER_STREAM));
      client.dataFrame(1, echo({ payload: Buffer.from("tick"), count: 10_000, delay_ms: 5 }), { endStream: true });
      await client.waitFor((f) => f.type === FrameType.DATA && f.streamId === 1, "a first response message", { take: false });
      client.rstStream(1, ErrorCode.CANCEL);
      // Frames the server wrote before it read the RST may still arrive; none after the PING ACK may.
      await client.sync();
      const seen = client.log.length;
      await client.until(() => stats.aborted === 1 && stats.active === 0, "the handler to see the cancellation");
      // Another call round trip: frames on stream 1 would have been sent by now.
      await unaryOk(client, 3);
      expect(client.log.slice(seen).filter((f) => f.streamId === 1)).toEqual([]);
      expect(stats.aborted).toBe(1);
    });

    it("refuses a stream beyond MAX_CONCURRENT_STREAMS and answers the others", async () => {
      const { port, stats } = await serve({ maxConcurrentStreams: 2 });
      const client = await connect(port);
      for (const id of [1, 3]) {
        client.headers(id, client.grpcHeaders(BIDI));
        client.dataFrame(id, echo({ payload: Buffer.from(`open ${id}`) }));
        await client.waitFor((f) => f.type === FrameType.DATA && f.streamId === id, `the echo on stream ${id}`, { take: false });
      }
      // Every SETTINGS the server sent has been ACKed and the ACKs read: its limit is in force.
      await client.sync();
      client.headers(5, client.grpcHeaders(UNARY));
      client.dataFrame(5, echo({ payload: Buffer.from("one too many") }), { endStream: true });
      const refused = await client.waitFor(
        (f) => (f.type === FrameType.RST_STREAM && f.streamId === 5) || f.type === FrameType.GOAWAY,
        "RST_STREAM on stream 5 (or GOAWAY)",
      );
      // Whatever the engine, the extra stream is never served.
      expect(stats.started).toBe(2);
      if (engine === "node" && refused.type === FrameType.GOAWAY) {
        // node:http2 today (reported, strict test on branch h2conf-red): nghttp2 reports the extra
        // stream to node as a session error and node destroys the whole connection, RST_STREAM and
        // GOAWAY(INTERNAL_ERROR), taking the calls on streams 1 and 3 with it.
        expect(refused.payload.readUInt32BE(4)).toBe(ErrorCode.INTERNAL_ERROR);
        await client.waitClosed();
        expect(client.log.filter((f) => f.streamId === 5)).toEqual([]);
        return;
      }
      expect(refused.type).toBe(FrameType.RST_STREAM);
      // RFC 7540 5.1.2 allows PROTOCOL_ERROR or REFUSED_STREAM as a stream error: REFUSED_STREAM tells the
      // client the stream was not processed and may be retried (nghttp2's source sends it while its SETTINGS
      // are not yet ACKed; not exercised here).
      expect(refused.payload.readUInt32BE(0)).toBe(ErrorCode.REFUSED_STREAM);
      expect(client.log.filter((f) => f.streamId === 5 && f.type === FrameType.HEADERS)).toEqual([]);
      for (const id of [1, 3]) client.dataFrame(id, Buffer.alloc(0), { endStream: true });
      for (const id of [1, 3]) {
        const [msg] = expectGrpcOk(await client.response(id));
        expect(response.decode(msg!).payload.toString()).toBe(`open ${id}`);
      }
      // The connection lives on: a new stream is served once the others closed.
      await unaryOk(client, 7);
    });

    it("trailers-only error: an unknown method gets one HEADERS with END_STREAM, grpc-status 12", async () => {
      const { port } = await serve();
      const client = await connect(port);
      client.headers(1, client.grpcHeaders("/etceteratest.Echo/Nope"));
      client.dataFrame(1, echo({}), { endStream: true });
      const res = await client.response(1);
      expect(res.headerFrames).toHaveLength(1);
      const only = res.headerFrames[0]!;
      expect(only.flags & Flag.END_STREAM).toBe(Flag.END_STREAM);
      expect(only.headers?.get(":status")).toBe("200");
      expect(only.headers?.get("content-type")).toBe("application/grpc");
      expect(only.headers?.get("grpc-status")).toBe("12");
      expect(only.headers?.get("grpc-message")).toBe("unknown method Nope for service etceteratest.Echo");
      expect(res.dataFrames).toEqual([]);
      expect(res.rst).toBeUndefined();
    });
  });

  describe("plain HTTP over HTTP/2", () => {
    it("GET /x reaches the HTTP handler and gets its status and body", async () => {
      const { server, port } = await serve();
      server.setHttpHandler((req) => (req.url === "/x" ? { status: 418, headers: { "content-type": "text/plain" }, body: `teapot ${req.method} ${req.httpVersion}` } : undefined));
      const client = await connect(port);
      client.headers(1, { ":method": "GET", ":scheme": "http", ":path": "/x", ":authority": "localhost" }, { endStream: true });
      const res = await client.response(1);
      expect(res.headerFrames[0]?.headers?.get(":status")).toBe("418");
      expect(res.headerFrames[0]?.headers?.get("content-type")).toBe("text/plain");
      expect(res.body.toString()).toBe("teapot GET 2");
      expect(res.rst).toBeUndefined();
    });

    it("answers 404 without a handler", async () => {
      const { port } = await serve();
      const client = await connect(port);
      client.headers(1, { ":method": "GET", ":scheme": "http", ":path": "/x", ":authority": "localhost" }, { endStream: true });
      const res = await client.response(1);
      expect(res.headerFrames[0]?.headers?.get(":status")).toBe("404");
      expect(res.body.toString()).toBe("404 page not found\n");
    });
  });

  describe("connection errors", () => {
    /**
     * A connection error: GOAWAY with `code`. node:http2 deviates in two ways, pinned here and
     * reported (see the red tests on branch h2conf-red): errors nghttp2 hands to node as a session
     * 'error' (an even or refused stream id, a window overflow) end the session by destroy(), whose
     * GOAWAY says INTERNAL_ERROR (so `nodeCode`); errors nghttp2 answers itself (DATA on stream 0, a
     * broken header block, bad HPACK) get the right GOAWAY but the socket is then never closed, even
     * on the client's FIN, so "then close" is not asserted.
     */
    async function expectGoaway(client: RawH2Client, code: number, nodeCode = code): Promise<{ lastStreamId: number; code: number }> {
      const goaway = await goawayOf(client);
      if (engine === "node") {
        expect([code, nodeCode]).toContain(goaway.code);
        return goaway;
      }
      // Ours: the RFC's code, then the connection closes.
      expect(goaway.code).toBe(code);
      await client.waitClosed();
      return goaway;
    }

    it("an even stream id: GOAWAY(PROTOCOL_ERROR)", async () => {
      const { port } = await serve();
      const client = await connect(port);
      await unaryOk(client, 1);
      client.headers(2, client.grpcHeaders(UNARY), { endStream: true });
      await expectGoaway(client, ErrorCode.PROTOCOL_ERROR, ErrorCode.INTERNAL_ERROR);
    });

    it("an even stream id on the first request: GOAWAY(PROTOCOL_ERROR)", async () => {
      const { port } = await serve();
      const client = await connect(port);
      client.headers(2, client.grpcHeaders(UNARY), { endStream: true });
      await expectGoaway(client, ErrorCode.PROTOCOL_ERROR, ErrorCode.INTERNAL_ERROR);
    });

    it("a decreasing stream id: GOAWAY(PROTOCOL_ERROR), or (nghttp2) the HEADERS ignored", async () => {
      const { port, stats } = await serve();
      const client = await connect(port);
      await unaryOk(client, 5);
      client.headers(3, client.grpcHeaders(UNARY));
      client.dataFrame(3, echo({ payload: Buffer.from("backwards") }), { endStream: true });
      client.ping(Buffer.from("after 3!"));
      const next = await client.waitFor((f) => f.type === FrameType.GOAWAY || (f.type === FrameType.PING && (f.flags & Flag.ACK) !== 0), "GOAWAY or the PING ACK");
      if (next.type === FrameType.GOAWAY) {
        // RFC 7540 5.1.1: an unexpected stream identifier is a connection error of type PROTOCOL_ERROR.
        expect(next.payload.readUInt32BE(4)).toBe(ErrorCode.PROTOCOL_ERROR);
        expect(next.payload.readUInt32BE(0) & 0x7fffffff).toBe(5);
      } else {
        // nghttp2 deliberately ignores HEADERS on a stream id at or below the last one it saw (it cannot
        // tell a closed stream from a late trailer): the request is not served, the connection lives on.
        await unaryOk(client, 7);
      }
      expect(client.log.filter((f) => f.streamId === 3)).toEqual([]);
      expect(stats.started).toBe(1 + (next.type === FrameType.GOAWAY ? 0 : 1));
    });

    it("a frame other than CONTINUATION inside a header block: GOAWAY(PROTOCOL_ERROR)", async () => {
      const { port } = await serve();
      const client = await connect(port);
      await unaryOk(client, 1);
      // HEADERS without END_HEADERS, then a PING where its CONTINUATION belongs.
      const block = encodeLiteralBlock(Object.entries(client.grpcHeaders(UNARY)).map(([name, value]) => ({ name, value, neverIndexed: false })));
      client.sendFrame(FrameType.HEADERS, Flag.END_STREAM, 3, block);
      client.ping(Buffer.alloc(8));
      await expectGoaway(client, ErrorCode.PROTOCOL_ERROR);
    });

    it("DATA on stream 0: GOAWAY(PROTOCOL_ERROR)", async () => {
      const { port } = await serve();
      const client = await connect(port);
      await unaryOk(client, 1);
      client.sendFrame(FrameType.DATA, 0, 0, Buffer.from("stray"));
      await expectGoaway(client, ErrorCode.PROTOCOL_ERROR);
    });

    it("a bad client preface: the connection closes", async () => {
      const { port } = await serve();
      const client = await connect(port, { handshake: false });
      client.send(Buffer.from("PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n", "latin1"));
      await client.waitClosed(2000);
    });

    it("a WINDOW_UPDATE taking the connection window past 2^31-1: GOAWAY(FLOW_CONTROL_ERROR)", async () => {
      const { port } = await serve();
      const client = await connect(port);
      await unaryOk(client, 1);
      client.sendFrame(FrameType.WINDOW_UPDATE, 0, 0, u32(2 ** 31 - 1));
      await expectGoaway(client, ErrorCode.FLOW_CONTROL_ERROR, ErrorCode.INTERNAL_ERROR);
    });

    it("a header block with a broken HPACK encoding: GOAWAY(COMPRESSION_ERROR)", async () => {
      const { port } = await serve();
      const client = await connect(port);
      await unaryOk(client, 1);
      // 0x80: an indexed field with index 0 (RFC 7541 6.1: a decoding error).
      client.sendFrame(FrameType.HEADERS, Flag.END_HEADERS | Flag.END_STREAM, 3, Buffer.from([0x80]));
      await expectGoaway(client, ErrorCode.COMPRESSION_ERROR);
    });
  });

  describe("graceful shutdown", () => {
    it("close(grace): GOAWAY with the last stream id, the call in flight completes, new streams are not served", async () => {
      const { server, port, stats } = await serve();
      const client = await connect(port);
      client.headers(1, client.grpcHeaders(BIDI));
      client.dataFrame(1, echo({ payload: Buffer.from("in flight") }));
      await client.waitFor((f) => f.type === FrameType.DATA && f.streamId === 1, "the echo on stream 1", { take: false });
      const closed = server.close(10_000);
      const goaway = await goawayOf(client);
      expect(goaway.code).toBe(ErrorCode.NO_ERROR);
      expect(goaway.lastStreamId).toBe(1);
      client.headers(3, client.grpcHeaders(UNARY));
      client.dataFrame(3, echo({ payload: Buffer.from("too late") }), { endStream: true });
      client.dataFrame(1, echo({ payload: Buffer.from("still here") }), { endStream: true });
      const messages = expectGrpcOk(await client.response(1));
      expect(messages.map((m) => response.decode(m).payload.toString())).toEqual(["in flight", "still here"]);
      expect(stats.started).toBe(1);
      expect(client.log.filter((f) => f.streamId === 3 && f.type !== FrameType.RST_STREAM)).toEqual([]);
      await closed;
      await client.waitClosed();
    });
  });
});
