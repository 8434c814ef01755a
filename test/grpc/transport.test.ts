/**
 * Connection-level behaviour of the node:http2 server: TLS with ALPN (h2 and
 * http/1.1 on one port), the advertised max-concurrent-streams setting, and
 * the keepalive ping policy (too_many_pings).
 */

import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import http2 from "node:http2";
import https from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GrpcServer } from "../../src/grpc/server.js";
import { HandlerStats, echoClient, echoHandlers, loadEchoCodecs, unary } from "./harness.js";

const codecs = loadEchoCodecs();

describe("TLS", () => {
  let dir: string;
  let key: Buffer;
  let cert: Buffer;
  let server: GrpcServer;
  let port: number;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "etcetera-tls-"));
    execFileSync("openssl", [
      "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost",
      "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
      "-keyout", join(dir, "key.pem"), "-out", join(dir, "cert.pem"),
    ], { stdio: "ignore" });
    key = readFileSync(join(dir, "key.pem"));
    cert = readFileSync(join(dir, "cert.pem"));
    server = new GrpcServer({ codecs, tls: { key, cert }, http: (req) => (req.url === "/version" ? { status: 200, body: "tls-ok" } : undefined) });
    server.addService("etceteratest.Echo", echoHandlers(new HandlerStats()));
    ({ port } = await server.listen(0));
  });

  afterAll(async () => {
    await server.close(100);
    rmSync(dir, { recursive: true, force: true });
  });

  it("serves gRPC over h2 with TLS", async () => {
    const tlsClient = new (grpc.makeGenericClientConstructor({}, "x"))(`127.0.0.1:${port}`, grpc.credentials.createSsl(cert));
    const res = await new Promise<Buffer>((resolve, reject) => {
      tlsClient.makeUnaryRequest(
        "/etceteratest.Echo/Unary",
        (v: Buffer) => v,
        (b: Buffer) => b,
        codecs.message("etceteratest.EchoRequest").encode({ payload: Buffer.from("secure") }),
        (err, value) => (err ? reject(err) : resolve(value!)),
      );
    });
    expect(codecs.message<{ payload: Buffer }>("etceteratest.EchoResponse").decode(res).payload.toString()).toBe("secure");
    tlsClient.close();
  });

  it("serves HTTP/1.1 on the same TLS port (client without ALPN h2)", async () => {
    const body = await new Promise<string>((resolve, reject) => {
      https
        .get({ host: "127.0.0.1", port, path: "/version", ca: cert }, (res) => {
          let data = "";
          res.on("data", (d: Buffer) => (data += d.toString()));
          res.on("end", () => resolve(`${res.statusCode} ${data}`));
        })
        .on("error", reject);
    });
    expect(body).toBe("200 tls-ok");
  });
});

describe("HTTP/2 settings and keepalive", () => {
  it("advertises --max-concurrent-streams", async () => {
    const server = new GrpcServer({ codecs, maxConcurrentStreams: 7 });
    const { port } = await server.listen(0);
    const session = http2.connect(`http://127.0.0.1:${port}`);
    const settings = await new Promise<http2.Settings>((resolve) => session.once("remoteSettings", resolve));
    expect(settings.maxConcurrentStreams).toBe(7);
    session.destroy();
    await server.close(100);
  });

  it("clamps the default (2^32-1) to what HTTP/2 can carry", async () => {
    const server = new GrpcServer({ codecs });
    const { port } = await server.listen(0);
    const session = http2.connect(`http://127.0.0.1:${port}`);
    const settings = await new Promise<http2.Settings>((resolve) => session.once("remoteSettings", resolve));
    expect(settings.maxConcurrentStreams).toBe(2 ** 32 - 1);
    session.destroy();
    await server.close(100);
  });

  it("answers pings, and sends GOAWAY too_many_pings to a client pinging too often", async () => {
    const server = new GrpcServer({ codecs, keepalive: { minTimeMs: 60_000 } });
    server.addService("etceteratest.Echo", echoHandlers(new HandlerStats()));
    const { port } = await server.listen(0);
    const session = http2.connect(`http://127.0.0.1:${port}`);
    session.on("error", () => {});
    const goaway = new Promise<{ code: number; data: string }>((resolve) =>
      session.once("goaway", (code: number, _last: number, data?: Buffer) => resolve({ code, data: data?.toString() ?? "" })),
    );
    await new Promise<void>((resolve) => session.once("connect", () => resolve()));
    const pings: Promise<boolean>[] = [];
    for (let i = 0; i < 5; i++) pings.push(new Promise((resolve) => session.ping((err) => resolve(!err))));
    expect((await pings[0])).toBe(true);
    const got = await goaway;
    expect(got).toEqual({ code: http2.constants.NGHTTP2_ENHANCE_YOUR_CALM, data: "too_many_pings" });
    session.destroy();
    await server.close(100);
  });

  it("a client with an open stream may ping at the configured minimum interval", async () => {
    const server = new GrpcServer({ codecs, keepalive: { minTimeMs: 1 } });
    server.addService("etceteratest.Echo", echoHandlers(new HandlerStats()));
    const { port } = await server.listen(0);
    const client = echoClient(port);
    const res = await unary(client.Unary, client, { payload: Buffer.from("k") }, {});
    expect(Buffer.from(res.payload).toString()).toBe("k");
    const session = http2.connect(`http://127.0.0.1:${port}`);
    // Node cancels a ping made while the session is still connecting ("HTTP2 ping cancelled", with
    // no GOAWAY and no error): the first ping used to follow a 5 ms sleep only, which under a loaded
    // CI machine came before the handshake, so the ping was never sent. Ping once connected.
    const connected = new Promise<void>((resolve) => session.once("connect", () => resolve()));
    let sessionEnd = "";
    session.on("error", (err: Error) => (sessionEnd += ` session error: ${err.message};`));
    session.on("close", () => (sessionEnd += " session closed;"));
    let goaway: string | undefined;
    session.on("goaway", (code: number, _last: number, data?: Buffer) => (goaway = `GOAWAY ${code} ${data?.toString() ?? ""}`));
    const stream = session.request({ ":method": "POST", ":path": "/etceteratest.Echo/Bidi", "content-type": "application/grpc" });
    stream.on("error", () => {});
    await connected;
    for (let i = 0; i < 5; i++) {
      await new Promise((r) => setTimeout(r, 5));
      // The failure text says why a ping failed (a GOAWAY, and which), so a rare failure explains itself.
      const failure = await new Promise<string | undefined>((resolve) => session.ping((err) => resolve(err ? `ping ${i}: ${err.message}; ${goaway ?? "no GOAWAY"};${sessionEnd}` : undefined)));
      expect(failure).toBeUndefined();
    }
    expect(goaway).toBeUndefined();
    stream.close();
    session.destroy();
    client.close();
    await server.close(100);
  });
});
