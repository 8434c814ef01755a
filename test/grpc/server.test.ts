/**
 * Conformance of the node:http2 gRPC server, driven by @grpc/grpc-js clients and
 * by a raw HTTP/2 client for wire-level details. The method-kind cases also run
 * against the grpc-js adapter, so both transports serve handlers identically.
 */

import http2 from "node:http2";
import * as grpc from "@grpc/grpc-js";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { GrpcJsServer } from "./grpc-js-adapter.js";
import { GrpcServer } from "../../src/grpc/server.js";
import { goQuote } from "../../src/grpc/go_quote.js";
import { Status } from "../../src/grpc/status.js";
import {
  type EchoClient,
  HandlerStats,
  collect,
  echoClient,
  echoHandlers,
  eventually,
  frame,
  loadEchoCodecs,
  rawRequest,
  unary,
} from "./harness.js";

const codecs = loadEchoCodecs();
const requestCodec = codecs.message("etceteratest.EchoRequest");
const responseCodec = codecs.message<{ payload: Buffer; index: number; received: number }>("etceteratest.EchoResponse");

interface Served {
  port: number;
  stats: HandlerStats;
  liveCalls(): number;
  close(): Promise<void>;
}

async function serveHttp2Echo(options: ConstructorParameters<typeof GrpcServer>[0] = {}): Promise<Served & { server: GrpcServer }> {
  const stats = new HandlerStats();
  const server = new GrpcServer({ codecs, ...options });
  server.addService("etceteratest.Echo", echoHandlers(stats));
  const { port } = await server.listen(0);
  return { port, stats, server, liveCalls: () => server.liveCalls, close: () => server.close(200) };
}

async function serveGrpcJsEcho(): Promise<Served> {
  const stats = new HandlerStats();
  const server = new GrpcJsServer({ codecs });
  server.addService("etceteratest.Echo", echoHandlers(stats));
  const port = await server.listen(0);
  return { port, stats, liveCalls: () => stats.active, close: async () => server.forceClose() };
}

const transports: [string, () => Promise<Served>][] = [
  ["node:http2", serveHttp2Echo],
  ["grpc-js adapter", serveGrpcJsEcho],
];

describe.each(transports)("method kinds over %s", (_name, serve) => {
  let served: Served;
  let client: EchoClient;

  beforeAll(async () => {
    served = await serve();
    client = echoClient(served.port);
  });
  afterAll(async () => {
    client.close();
    await served.close();
  });

  it("unary: echoes payload, int64 and metadata", async () => {
    const md = new grpc.Metadata();
    md.set("x-echo", "hello");
    const res = await unary(client.Unary, client, { payload: Buffer.from("ping"), zigzag: -(2 ** 40), numbers: [1, -2, 2 ** 50] }, {}, md);
    expect(Buffer.from(res.payload).toString()).toBe("ping");
    expect(res.zigzag).toBe(-(2 ** 40));
    expect(res.numbers).toEqual([1, -2, 2 ** 50]);
    expect(res.metadata).toBe("hello|deadline=false");
  });

  it("unary: a handler error becomes the call's status and message", async () => {
    const err = await unary(client.Unary, client, { status: Status.FAILED_PRECONDITION, message: "etcdserver: 100% wrong\nclé" }).catch((e: grpc.ServiceError) => e);
    expect((err as grpc.ServiceError).code).toBe(Status.FAILED_PRECONDITION);
    expect((err as grpc.ServiceError).details).toBe("etcdserver: 100% wrong\nclé");
  });

  it("server streaming: sends every message then OK", async () => {
    const { messages, error } = await collect(client.ServerStream({ count: 50, response_bytes: 10 }));
    expect(error).toBeUndefined();
    expect(messages.map((m) => m.index)).toEqual([...Array(50).keys()]);
    expect(messages.every((m) => m.payload.length === 10)).toBe(true);
  });

  it("server streaming: an error after some messages arrives in trailers", async () => {
    const { messages, error } = await collect(client.ServerStream({ count: 3, status: Status.OUT_OF_RANGE, message: "too far" }));
    expect(messages).toHaveLength(3);
    expect(error?.code).toBe(Status.OUT_OF_RANGE);
    expect(error?.details).toBe("too far");
  });

  it("client streaming: reads every message until half-close", async () => {
    const res = await new Promise<{ received: number; index: number }>((resolve, reject) => {
      const call = client.ClientStream(new grpc.Metadata(), {}, (err, r) => (err ? reject(err) : resolve(r)));
      for (let i = 0; i < 100; i++) call.write({ payload: Buffer.alloc(i) });
      call.end();
    });
    expect(res.received).toBe(100);
    expect(res.index).toBe((99 * 100) / 2);
  });

  it("bidi: answers each message in order and ends after the client half-closes", async () => {
    const call = client.Bidi();
    const done = collect(call);
    for (let i = 0; i < 20; i++) call.write({ payload: Buffer.from(`m${i}`) });
    call.end();
    const { messages, error } = await done;
    expect(error).toBeUndefined();
    expect(messages.map((m) => Buffer.from(m.payload).toString())).toEqual([...Array(20).keys()].map((i) => `m${i}`));
  });

  it("deadline: the handler is aborted and the client sees DEADLINE_EXCEEDED", async () => {
    const before = served.stats.aborted;
    const err = await unary(client.Unary, client, { delay_ms: 60_000 }, { deadline: Date.now() + 100 }).catch((e: grpc.ServiceError) => e);
    expect((err as grpc.ServiceError).code).toBe(Status.DEADLINE_EXCEEDED);
    await eventually(() => served.stats.aborted === before + 1, "handler abort");
    await eventually(() => served.liveCalls() === 0, "no live calls");
  });

  it("cancellation mid-stream reaches the handler", async () => {
    const before = served.stats.aborted;
    const call = client.ServerStream({ count: 1_000_000, delay_ms: 5 });
    call.on("error", () => {});
    await new Promise<void>((resolve) => call.once("data", () => resolve()));
    call.cancel();
    await eventually(() => served.stats.aborted === before + 1, "handler abort");
    await eventually(() => served.stats.active === 0 && served.liveCalls() === 0, "handler finished");
  });
});

describe("node:http2 server specifics", () => {
  let served: Served & { server: GrpcServer };
  let client: EchoClient;
  let session: http2.ClientHttp2Session;

  beforeAll(async () => {
    served = await serveHttp2Echo({ maxReceiveMessageBytes: 1024 * 1024 });
    client = echoClient(served.port, { "grpc.max_receive_message_length": -1, "grpc.max_send_message_length": -1 });
    session = http2.connect(`http://127.0.0.1:${served.port}`);
  });
  afterAll(async () => {
    client.close();
    session.close();
    await served.close();
  });
  afterEach(async () => {
    await eventually(() => served.server.liveCalls === 0 && served.stats.active === 0, "calls released after test");
  });

  it("large messages both ways (just under the receive limit)", async () => {
    const payload = Buffer.alloc(1024 * 1024 - 64, 7);
    const res = await unary(client.Unary, client, { payload, response_bytes: 8 * 1024 * 1024 });
    expect(res.payload.length).toBe(8 * 1024 * 1024);
  });

  it("a message split over many DATA frames, and several messages in one frame", async () => {
    const msg = frame(requestCodec.encode({ payload: Buffer.from("split me please") }));
    const pieces = [...msg].map((b) => Buffer.from([b]));
    const res = await rawRequest(session, { ":path": "/etceteratest.Echo/Unary" }, pieces);
    expect(res.trailers?.["grpc-status"]).toBe("0");
    expect(responseCodec.decode(res.body.subarray(5)).payload.toString()).toBe("split me please");

    const two = Buffer.concat([
      frame(requestCodec.encode({ payload: Buffer.from("a") })),
      frame(requestCodec.encode({ payload: Buffer.from("bb") })),
    ]);
    const cs = await rawRequest(session, { ":path": "/etceteratest.Echo/ClientStream" }, [two]);
    expect(cs.trailers?.["grpc-status"]).toBe("0");
    expect(responseCodec.decode(cs.body.subarray(5))).toMatchObject({ received: 2, index: 3 });
  });

  it("oversize request: RESOURCE_EXHAUSTED from the prefix, trailers-only, body never buffered", async () => {
    // Announce 64 MiB but send only the first 64 KiB: the answer must not wait for the rest.
    const prefix = Buffer.from([0, 0, 0, 0, 0]);
    prefix.writeUInt32BE(64 * 1024 * 1024, 1);
    const res = await rawRequest(session, { ":path": "/etceteratest.Echo/Unary" }, [prefix, Buffer.alloc(64 * 1024)], false);
    expect(res.headers["grpc-status"]).toBe(String(Status.RESOURCE_EXHAUSTED));
    expect(res.headers["grpc-message"]).toBe(`grpc: received message larger than max (${64 * 1024 * 1024} vs. ${1024 * 1024})`);
    expect(res.trailers).toBeUndefined();
    expect(served.stats.started).toBeGreaterThan(0);
  });

  it("oversize request via grpc-js gets RESOURCE_EXHAUSTED", async () => {
    const started = served.stats.started;
    const err = await unary(client.Unary, client, { payload: Buffer.alloc(1024 * 1024 + 10) }).catch((e: grpc.ServiceError) => e);
    expect((err as grpc.ServiceError).code).toBe(Status.RESOURCE_EXHAUSTED);
    expect(served.stats.started).toBe(started);
  });

  it("unknown service and unknown method answer UNIMPLEMENTED in a trailers-only response", async () => {
    const svc = await rawRequest(session, { ":path": "/etcdserverpb.Nope/Range" }, [frame(Buffer.alloc(0))]);
    expect(svc.headers[":status"]).toBe(200);
    expect(svc.headers["grpc-status"]).toBe(String(Status.UNIMPLEMENTED));
    expect(svc.headers["grpc-message"]).toBe("unknown service etcdserverpb.Nope");
    expect(svc.trailers).toBeUndefined();
    const method = await rawRequest(session, { ":path": "/etceteratest.Echo/Nope" }, [frame(Buffer.alloc(0))]);
    expect(method.headers["grpc-message"]).toBe("unknown method Nope for service etceteratest.Echo");
  });

  it("immediate handler errors use trailers-only responses", async () => {
    const res = await rawRequest(session, { ":path": "/etceteratest.Echo/Unary" }, [
      frame(requestCodec.encode({ status: Status.NOT_FOUND, message: "etcdserver: requested lease not found" })),
    ]);
    expect(res.headers["grpc-status"]).toBe(String(Status.NOT_FOUND));
    expect(res.headers["grpc-message"]).toBe("etcdserver: requested lease not found");
    expect(res.body.length).toBe(0);
    expect(res.trailers).toBeUndefined();
  });

  it("a successful unary call sends headers, one message, and status in trailers", async () => {
    const res = await rawRequest(session, { ":path": "/etceteratest.Echo/Unary" }, [frame(requestCodec.encode({ payload: Buffer.from("x") }))]);
    expect(res.headers["content-type"]).toBe("application/grpc");
    expect(res.headers["grpc-status"]).toBeUndefined();
    expect(res.trailers?.["grpc-status"]).toBe("0");
    expect(res.body.readUInt32BE(1)).toBe(res.body.length - 5);
  });

  it("compressed messages are rejected (no decompressor)", async () => {
    const msg = frame(requestCodec.encode({ payload: Buffer.from("z") }), true);
    const gz = await rawRequest(session, { ":path": "/etceteratest.Echo/Unary", "grpc-encoding": "gzip" }, [msg]);
    expect(gz.headers["grpc-status"]).toBe(String(Status.UNIMPLEMENTED));
    expect(gz.headers["grpc-message"]).toBe('grpc: Decompressor is not installed for grpc-encoding "gzip"');
    const identity = await rawRequest(session, { ":path": "/etceteratest.Echo/Unary" }, [msg]);
    expect(identity.headers["grpc-status"]).toBe(String(Status.INTERNAL));
  });

  it("malformed requests: bad grpc-timeout, garbage message, no message, truncated message", async () => {
    const ok = frame(requestCodec.encode({ payload: Buffer.from("x") }));
    // grpc-go resets the stream of a malformed grpc-timeout (PROTOCOL_ERROR) before it looks at the path.
    for (const path of ["/etceteratest.Echo/Unary", "/etceteratest.Echo/Nope"]) {
      const badTimeout = await rawRequest(session, { ":path": path, "grpc-timeout": "5x" }, [ok]);
      expect([badTimeout.headers["grpc-status"], badTimeout.rstCode]).toEqual([undefined, http2.constants.NGHTTP2_PROTOCOL_ERROR]);
    }
    // A negative timeout is a deadline already past (Go's ParseInt takes the sign), not a malformed header.
    const slow = frame(requestCodec.encode({ payload: Buffer.from("x"), delay_ms: 5_000 }));
    const past = await rawRequest(session, { ":path": "/etceteratest.Echo/Unary", "grpc-timeout": "-1S" }, [slow]);
    expect(past.headers["grpc-status"] ?? past.trailers?.["grpc-status"]).toBe(String(Status.DEADLINE_EXCEEDED));
    const garbage = await rawRequest(session, { ":path": "/etceteratest.Echo/Unary" }, [frame(Buffer.from([0x0a, 0x10, 1]))]);
    expect(garbage.headers["grpc-status"]).toBe(String(Status.INTERNAL));
    expect(String(garbage.headers["grpc-message"])).toMatch(/^grpc: error unmarshalling request/);
    // A request stream that ends early gets grpc-go's answers (what etcd sends): the reader's
    // error, UNKNOWN for a unary call, INTERNAL "unexpected EOF" from a streaming call's RecvMsg.
    const none = await rawRequest(session, { ":path": "/etceteratest.Echo/Unary" }, []);
    expect([none.headers["grpc-status"], none.headers["grpc-message"]]).toEqual([String(Status.UNKNOWN), "EOF"]);
    const cutUnary = await rawRequest(session, { ":path": "/etceteratest.Echo/Unary" }, [ok.subarray(0, 6)]);
    expect(cutUnary.headers["grpc-status"] ?? cutUnary.trailers?.["grpc-status"]).toBe(String(Status.UNKNOWN));
    expect(cutUnary.headers["grpc-message"] ?? cutUnary.trailers?.["grpc-message"]).toBe("unexpected EOF");
    const cut = await rawRequest(session, { ":path": "/etceteratest.Echo/ClientStream" }, [ok.subarray(0, 6)]);
    expect(cut.headers["grpc-status"] ?? cut.trailers?.["grpc-status"]).toBe(String(Status.INTERNAL));
    expect(cut.headers["grpc-message"] ?? cut.trailers?.["grpc-message"]).toBe("unexpected EOF");
  });

  it("deadline of a bidi stream: UNKNOWN 'context deadline exceeded', as etcd's Watch and LeaseKeepAlive return it", async () => {
    const bidi = await rawRequest(session, { ":path": "/etceteratest.Echo/Bidi", "grpc-timeout": "200m" }, [], false);
    const status = bidi.trailers?.["grpc-status"] ?? bidi.headers["grpc-status"];
    const message = bidi.trailers?.["grpc-message"] ?? bidi.headers["grpc-message"];
    expect([status, message]).toEqual([String(Status.UNKNOWN), "context deadline exceeded"]);
    const unaryCall = await rawRequest(session, { ":path": "/etceteratest.Echo/Unary", "grpc-timeout": "200m" }, [], false);
    expect(unaryCall.trailers?.["grpc-status"] ?? unaryCall.headers["grpc-status"]).toBe(String(Status.DEADLINE_EXCEEDED));
  });

  it("a grpc-timeout deadline is visible to the handler", async () => {
    const res = await unary(client.Unary, client, { payload: Buffer.from("d") }, { deadline: Date.now() + 60_000 });
    expect(res.metadata).toBe("|deadline=true");
  });

  it("many concurrent streams on one connection", async () => {
    const n = 500;
    const calls = [...Array(n).keys()].map((i) => unary(client.Unary, client, { payload: Buffer.from(String(i)), delay_ms: 20 }));
    const results = await Promise.all(calls);
    expect(results.map((r) => Buffer.from(r.payload).toString())).toEqual([...Array(n).keys()].map(String));
  });

  it("many connections at once", async () => {
    const n = Number(process.env.GRPC_TEST_CONNECTIONS ?? 300);
    const sessions = [...Array(n)].map(() => http2.connect(`http://127.0.0.1:${served.port}`));
    try {
      const msg = frame(requestCodec.encode({ payload: Buffer.from("c") }));
      const results = await Promise.all(sessions.map((s) => rawRequest(s, { ":path": "/etceteratest.Echo/Unary" }, [msg])));
      expect(results.every((r) => r.trailers?.["grpc-status"] === "0")).toBe(true);
      expect(served.server.connections).toBeGreaterThanOrEqual(n);
    } finally {
      for (const s of sessions) s.destroy();
    }
    await eventually(() => served.server.connections <= 2, "connections released");
  });

  it("abrupt disconnects release every call and abort every handler", async () => {
    const n = Number(process.env.GRPC_TEST_ABANDONED ?? 3000);
    const perSession = 100;
    const abortedBefore = served.stats.aborted;
    const startedBefore = served.stats.started;
    const msg = frame(requestCodec.encode({ count: 1_000_000, delay_ms: 60_000 }));
    for (let done = 0; done < n; done += perSession) {
      const s = http2.connect(`http://127.0.0.1:${served.port}`);
      s.on("error", () => {});
      const batch = Math.min(perSession, n - done);
      for (let i = 0; i < batch; i++) {
        const req = s.request({ ":method": "POST", ":path": "/etceteratest.Echo/ServerStream", "content-type": "application/grpc" });
        req.on("error", () => {});
        req.end(msg);
        // Half the streams are reset one by one, the rest die with their connection.
        if (i % 2 === 0) setImmediate(() => req.close(http2.constants.NGHTTP2_CANCEL));
      }
      await eventually(() => served.stats.started - startedBefore >= done + batch, "handlers started");
      s.destroy();
    }
    await eventually(() => served.stats.aborted - abortedBefore === n, `${n} aborts`);
    await eventually(() => served.server.liveCalls === 0 && served.stats.active === 0, "no live calls");
  });

  it("plain HTTP/1.1 and HTTP/2 requests go to the HTTP handler, 404 otherwise", async () => {
    served.server.setHttpHandler((req) =>
      req.url === "/health" ? { status: 200, headers: { "content-type": "application/json" }, body: '{"health":"true"}' } : undefined,
    );
    const h1 = await fetch(`http://127.0.0.1:${served.port}/health`);
    expect(h1.status).toBe(200);
    expect(await h1.json()).toEqual({ health: "true" });
    const missing = await fetch(`http://127.0.0.1:${served.port}/nope`);
    expect(missing.status).toBe(404);
    expect(await missing.text()).toBe("404 page not found\n");
    const h2 = await new Promise<{ status: number; body: string }>((resolve) => {
      const req = session.request({ ":path": "/health" });
      let body = "";
      let status = 0;
      req.on("response", (h) => (status = Number(h[":status"])));
      req.on("data", (d: Buffer) => (body += d.toString()));
      req.on("end", () => resolve({ status, body }));
    });
    expect(h2).toEqual({ status: 200, body: '{"health":"true"}' });
    served.server.setHttpHandler(undefined);
  });
});

describe("graceful shutdown", () => {
  it("lets a running call finish, then ends long streams with UNAVAILABLE", async () => {
    const served = await serveHttp2Echo();
    const client = echoClient(served.port);
    try {
      const slow = unary(client.Unary, client, { payload: Buffer.from("s"), delay_ms: 100 });
      const endless = collect(client.ServerStream({ count: 1_000_000, delay_ms: 20 }));
      await eventually(() => served.stats.active === 2, "both calls running");
      await served.server.close(500);
      expect(Buffer.from((await slow).payload).toString()).toBe("s");
      const { error } = await endless;
      expect(error?.code).toBe(Status.UNAVAILABLE);
      expect(served.server.liveCalls).toBe(0);
      await eventually(() => served.stats.active === 0, "handlers done");
    } finally {
      client.close();
    }
  });
});

describe("call observer (metrics hooks)", () => {
  it("sees starts, handled codes, and messages received and sent per method", async () => {
    const events: string[] = [];
    const served = await serveHttp2Echo({
      observer: {
        started: (m) => events.push(`start ${m.name}`),
        handled: (m, code) => events.push(`handled ${m.name} ${code}`),
        received: (m) => events.push(`recv ${m.name}`),
        sent: (m) => events.push(`sent ${m.name}`),
      },
    });
    const client = echoClient(served.port);
    try {
      await unary(client.Unary, client, { payload: Buffer.from("a") });
      await unary(client.Unary, client, { status: Status.NOT_FOUND, message: "nope" }).catch(() => {});
      await collect(client.ServerStream({ count: 3 }));
      const call = client.ServerStream({ count: 1_000_000, delay_ms: 5 });
      call.on("error", () => {});
      await new Promise<void>((resolve) => call.once("data", () => resolve()));
      call.cancel();
      await eventually(() => served.server.liveCalls === 0, "calls released");
      const count = (e: string) => events.filter((x) => x === e).length;
      expect(count("start Unary")).toBe(2);
      expect(count("recv Unary")).toBe(2);
      expect(count("sent Unary")).toBe(1);
      expect(count(`handled Unary ${Status.OK}`)).toBe(1);
      expect(count(`handled Unary ${Status.NOT_FOUND}`)).toBe(1);
      expect(count("start ServerStream")).toBe(2);
      expect(count(`handled ServerStream ${Status.OK}`)).toBe(1);
      expect(count(`handled ServerStream ${Status.CANCELLED}`)).toBe(1);
      expect(count("sent ServerStream")).toBeGreaterThanOrEqual(4);
    } finally {
      client.close();
      await served.close();
    }
  });
});

describe("goQuote (grpc-go's malformed method name quotes the path as Go's %q)", () => {
  it("escapes quotes, backslashes and control bytes, keeps printable UTF-8, and shows other bytes as \\xNN", () => {
    expect(goQuote("/etcdserverpb.KV")).toBe('"/etcdserverpb.KV"');
    expect(goQuote('a"b\\c')).toBe('"a\\"b\\\\c"');
    expect(goQuote("\t\n\x01\x7f")).toBe('"\\t\\n\\x01\\x7f"');
    // The path's bytes as latin1 characters, as HPACK hands them over.
    expect(goQuote(Buffer.from("é☃", "utf8").toString("latin1"))).toBe('"é☃"');
    expect(goQuote("\xff\xc3")).toBe('"\\xff\\xc3"');
    expect(goQuote(Buffer.from("\u0085", "utf8").toString("latin1"))).toBe('"\\u0085"');
  });
});
