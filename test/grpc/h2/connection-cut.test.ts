/**
 * Clients cutting a connection at any moment must not crash the process.
 *
 * Rewritten connections (served through RewritingStream, which node:http2
 * wraps in its JSStreamSocket): a node:http2 client's session.destroy() while
 * a large response streams (client FIN, then EPIPE/ECONNRESET on the server's
 * writes) reached Node's internal assertion in JSStreamSocket.doWrite
 * (`kCurrentShutdownRequest === null`): the client EOF had started a
 * JSStreamSocket shutdown, the socket error was re-emitted as the wrapper's
 * 'error', and http2's socketOnError destroyed the session, whose GOAWAY was
 * written while that shutdown was in flight. A lone FIN and a lone RST are
 * checked as well, and a random mix of call kinds, cut moments and FIN/RST
 * under a printed seed.
 *
 * Both paths: unary calls still waiting for their request message when the
 * connection goes got 'end' on an already closed stream; the status answer
 * then threw ERR_HTTP2_INVALID_STREAM from respond() (call.ts).
 */

import http2 from "node:http2";
import net, { type Socket } from "node:net";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { GrpcServer } from "../../../src/grpc/server.js";
import { HandlerStats, echoHandlers, eventually, frame, loadEchoCodecs, rewritesOn, seedFor } from "../harness.js";

const codecs = loadEchoCodecs();
const request = codecs.message<Record<string, unknown>>("etceteratest.EchoRequest");
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

type Cut = "fin" | "rst" | "destroy";

describe("a connection cut by its client", () => {
  let server: GrpcServer;
  let port: number;
  const stats = new HandlerStats();
  let uncaught: Error[] = [];
  const onUncaught = (err: Error): void => {
    uncaught.push(err);
  };

  beforeAll(async () => {
    server = new GrpcServer({ codecs });
    server.addService("etceteratest.Echo", echoHandlers(stats));
    ({ port } = await server.listen(0));
  });

  afterAll(async () => {
    await server.close(100);
  });

  beforeEach(() => {
    uncaught = [];
    process.on("uncaughtException", onUncaught);
  });

  afterEach(() => {
    process.off("uncaughtException", onUncaught);
  });

  /** A client session over a socket of our own (node:http2 forbids touching its socket). */
  function open(): { session: http2.ClientHttp2Session; socket: Socket } {
    const socket = net.connect(port, "127.0.0.1");
    const session = http2.connect(`http://127.0.0.1:${port}`, { createConnection: () => socket });
    session.on("error", () => {});
    return { session, socket };
  }

  /** A rewritten connection streaming `count` responses of `bytes` each, cut once `after` bytes arrived. */
  async function cutStreaming(cut: Cut, after: number, count = 40, bytes = 64 * 1024): Promise<void> {
    const { session, socket } = open();
    const req = session.request({
      ":method": "POST",
      ":path": "/etceteratest.Echo/ServerStream",
      ":authority": `http://127.0.0.1:${port}`,
      "content-type": "application/grpc",
      te: "trailers",
    });
    req.on("error", () => {});
    req.end(frame(request.encode({ payload: Buffer.from("x"), count, response_bytes: bytes })));
    let received = 0;
    await new Promise<void>((resolve) => {
      const done = (): void => resolve();
      req.on("data", (chunk: Buffer) => {
        received += chunk.length;
        if (received >= after) done();
      });
      req.once("close", done);
    });
    if (cut === "fin") socket.end();
    else if (cut === "rst") socket.resetAndDestroy();
    else session.destroy();
    if (cut === "fin") setTimeout(() => session.destroy(), 200);
  }

  async function released(): Promise<void> {
    await eventually(() => stats.active === 0 && server.liveCalls === 0 && server.connections === 0, "calls and connections released");
  }

  for (const cut of ["fin", "rst", "destroy"] as const) {
    it(`${cut} while a large response streams: no uncaught error, everything released`, async () => {
      const before = server.authorityRewrites;
      for (let i = 0; i < 6; i++) await cutStreaming(cut, 1 + i * 40_000);
      await released();
      await sleep(50);
      expect(server.authorityRewrites).toBe(before + rewritesOn(server, 6));
      expect(uncaught.map((e) => e.stack ?? String(e))).toEqual([]);
    });
  }

  for (const path of ["rewritten", "native"] as const) {
    for (const cut of ["rst", "destroy"] as const) {
      it(`${path}, ${cut} while unary calls wait for their request message: no uncaught error, calls released`, async () => {
        const authority = path === "rewritten" ? `http://127.0.0.1:${port}` : `127.0.0.1:${port}`;
        const before = server.authorityRewrites;
        for (let i = 0; i < 4; i++) {
          const { session, socket } = open();
          const reqs = Array.from({ length: 3 }, () => {
            const req = session.request({ ":method": "POST", ":path": "/etceteratest.Echo/Unary", ":authority": authority, "content-type": "application/grpc", te: "trailers" });
            req.on("error", () => {});
            return req;
          });
          // Part of a message on one stream, nothing on the others.
          reqs[0]!.write(frame(request.encode({ payload: Buffer.from("x") })).subarray(0, 3));
          await eventually(() => server.liveCalls === 3, "the calls started");
          if (cut === "rst") socket.resetAndDestroy();
          else session.destroy();
          await released();
        }
        await sleep(50);
        expect(server.authorityRewrites).toBe(path === "rewritten" ? before + rewritesOn(server, 4) : before);
        expect(uncaught.map((e) => e.stack ?? String(e))).toEqual([]);
      });
    }
  }

  it("random call kinds, cut moments and FIN/RST: no uncaught error, everything released", async () => {
    const seed = seedFor("connection cut");
    let s = seed;
    const rnd = (): number => (s = (Math.imul(s, 1103515245) + 12345) & 0x7fffffff) / 0x80000000;
    const paths = ["/etceteratest.Echo/Bidi", "/etceteratest.Echo/Unary", "/etceteratest.Echo/ServerStream"];
    const one = async (): Promise<void> => {
      const { session, socket } = open();
      await new Promise((resolve) => session.once("connect", resolve));
      for (let i = 1 + Math.floor(rnd() * 3); i > 0; i--) {
        const kind = Math.floor(rnd() * 3);
        const req = session.request({ ":method": "POST", ":path": paths[kind]!, ":authority": `http://127.0.0.1:${port}`, "content-type": "application/grpc", te: "trailers" });
        req.on("error", () => {});
        req.on("data", () => {});
        req.write(frame(request.encode({ payload: Buffer.alloc(rnd() < 0.3 ? 70_000 : 10), count: 20, response_bytes: rnd() < 0.5 ? 100_000 : 10, delay_ms: rnd() < 0.3 ? 60_000 : 0 })));
        if (kind !== 0) req.end();
      }
      await sleep(Math.floor(rnd() * 25));
      const cut = rnd();
      if (cut < 0.4) socket.resetAndDestroy();
      else if (cut < 0.7) socket.end();
      else session.destroy();
      setTimeout(() => session.destroy(), 200);
    };
    for (let round = 0; round < 10; round++) await Promise.all(Array.from({ length: 6 }, one));
    await released();
    await sleep(50);
    expect(uncaught.map((e) => e.stack ?? String(e)), `seed ${seed}`).toEqual([]);
  });
});
