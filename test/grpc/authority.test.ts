/**
 * Clients whose :authority nghttp2 refuses ("http://127.0.0.1:2379", as Go
 * gRPC sends the endpoint URL) get normal answers: a node:http2 client (h2c
 * and TLS), a grpc-js client, and real etcdctl with --endpoints=http://...
 * (etcdctl 3.4 sends the URL on its per-endpoint dials: endpoint status,
 * hashkv, --cluster; its main connection carries host:port). Several requests
 * on one rewritten connection come from the node:http2 and grpc-js clients,
 * whose HPACK encoders refer back to their dynamic tables.
 * Clients with a good authority stay on the native path.
 */

import { execFile, execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import http2 from "node:http2";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isValidAuthority } from "../../src/grpc/h2/authority.js";
import type { CallContext } from "../../src/grpc/handler.js";
import { GrpcServer } from "../../src/grpc/server.js";
import type { KVHandlers, WatchHandlers } from "../../src/grpc/services.js";
import { GrpcError, Status } from "../../src/grpc/status.js";
import { HandlerStats, echoClient, echoHandlers, eventually, frame, loadEchoCodecs, rawRequest, rewritesOn, unary, type EchoRequest, type EchoResponse } from "./harness.js";
import { ETCDCTL_BIN } from "../binaries.js";

const codecs = loadEchoCodecs();
const request = codecs.message<Partial<EchoRequest>>("etceteratest.EchoRequest");
const response = codecs.message<EchoResponse>("etceteratest.EchoResponse");

/** The gRPC messages in a response body. */
function messages(body: Buffer): EchoResponse[] {
  const out: EchoResponse[] = [];
  for (let at = 0; at < body.length; ) {
    const length = body.readUInt32BE(at + 1);
    out.push(response.decode(body.subarray(at + 5, at + 5 + length)));
    at += 5 + length;
  }
  return out;
}

function connect(url: string, options: http2.SecureClientSessionOptions = {}): Promise<http2.ClientHttp2Session> {
  const session = http2.connect(url, options);
  session.on("error", () => {});
  return new Promise((resolve) => session.once("connect", () => resolve(session)));
}

describe("isValidAuthority", () => {
  it("agrees with node:http2's nghttp2 on every printable ASCII octet, tab, space, a non-ASCII char and the empty value", async () => {
    const server = http2.createServer();
    server.on("stream", (stream) => {
      stream.respond({ ":status": 200 });
      stream.end();
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const port = (server.address() as { port: number }).port;
    const session = await connect(`http://127.0.0.1:${port}`);
    const values = ["", "a b", "a\tb", "h\u00e9"];
    for (let c = 0x21; c < 0x7f; c++) values.push(`a${String.fromCharCode(c)}b`);
    const disagreements: string[] = [];
    for (const value of values) {
      const accepted = await new Promise<boolean>((resolve) => {
        const req = session.request({ ":path": "/", ":authority": value });
        req.on("error", () => {});
        req.on("close", () => resolve(req.rstCode === 0));
        req.resume();
        req.end();
      });
      if (accepted !== isValidAuthority(value)) disagreements.push(JSON.stringify(value));
    }
    expect(disagreements).toEqual([]);
    session.destroy();
    await new Promise((resolve) => server.close(resolve));
  });
});

describe("a node:http2 client sending :authority http://127.0.0.1:PORT", () => {
  const server = new GrpcServer({ codecs });
  const stats = new HandlerStats();
  const peers: string[] = [];
  let port = 0;

  beforeAll(async () => {
    const echo = echoHandlers(stats);
    server.addService("etceteratest.Echo", {
      ...echo,
      Unary: (req: EchoRequest, ctx: CallContext) => {
        peers.push(ctx.peer);
        return echo.Unary(req, ctx);
      },
    });
    ({ port } = await server.listen(0));
  });

  afterAll(async () => {
    await server.close(100);
  });

  it("gets normal gRPC answers for unary, server-streaming and bidi calls on one connection", async () => {
    const session = await connect(`http://127.0.0.1:${port}`);
    const before = server.authorityRewrites;
    const authority = `http://127.0.0.1:${port}`;
    const calls = [];
    for (let i = 0; i < 5; i++) {
      calls.push(rawRequest(session, { ":path": "/etceteratest.Echo/Unary", ":authority": authority, "x-echo": `n${i}` }, [frame(request.encode({ payload: Buffer.from(`u${i}`) }))]));
    }
    const unaries = await Promise.all(calls);
    unaries.forEach((res, i) => {
      expect(res.trailers?.["grpc-status"] ?? res.headers["grpc-status"]).toBe("0");
      expect(messages(res.body).map((m) => [Buffer.from(m.payload as Uint8Array).toString(), m.metadata])).toEqual([[`u${i}`, `n${i}|deadline=false`]]);
    });
    const stream = await rawRequest(session, { ":path": "/etceteratest.Echo/ServerStream", ":authority": authority }, [frame(request.encode({ payload: Buffer.from("s"), count: 3 }))]);
    expect(messages(stream.body).map((m) => m.index)).toEqual([0, 1, 2]);
    const bidi = await rawRequest(session, { ":path": "/etceteratest.Echo/Bidi", ":authority": authority }, [
      frame(request.encode({ payload: Buffer.from("b0") })),
      frame(request.encode({ payload: Buffer.from("b1") })),
    ]);
    expect(messages(bidi.body).map((m) => Buffer.from(m.payload as Uint8Array).toString())).toEqual(["b0", "b1"]);
    expect(bidi.trailers?.["grpc-status"]).toBe("0");
    // One connection, rewritten; the handlers saw the client's real address.
    expect(server.authorityRewrites).toBe(before + rewritesOn(server, 1));
    const local = (session.socket as unknown as { localPort: number }).localPort;
    expect(peers.slice(-5)).toEqual(Array(5).fill(`127.0.0.1:${local}`));
    session.destroy();
  });

  it("an idle client whose pings the gate answered is rewritten once its first request comes", async () => {
    const session = await connect(`http://127.0.0.1:${port}`);
    const before = server.authorityRewrites;
    for (let i = 0; i < 2; i++) expect(await new Promise<boolean>((resolve) => session.ping((err) => resolve(!err)))).toBe(true);
    const res = await rawRequest(session, { ":path": "/etceteratest.Echo/Unary", ":authority": `http://127.0.0.1:${port}/` }, [frame(request.encode({ payload: Buffer.from("p") }))]);
    expect(messages(res.body).length).toBe(1);
    expect(server.authorityRewrites).toBe(before + rewritesOn(server, 1));
    session.destroy();
  });

  it("a good authority keeps the native path; so do the other kinds of clients", async () => {
    const before = server.authorityRewrites;
    const session = await connect(`http://127.0.0.1:${port}`);
    for (let i = 0; i < 3; i++) {
      const res = await rawRequest(session, { ":path": "/etceteratest.Echo/Unary" }, [frame(request.encode({ payload: Buffer.from("g") }))]);
      expect(res.trailers?.["grpc-status"]).toBe("0");
    }
    session.destroy();
    const client = echoClient(port);
    await unary(client.Unary, client, { payload: Buffer.from("x") });
    client.close();
    expect(server.authorityRewrites).toBe(before);
  });

  it("a rewritten connection cut mid-stream releases its call and connection", async () => {
    const session = await connect(`http://127.0.0.1:${port}`);
    const req = session.request({ ":method": "POST", ":path": "/etceteratest.Echo/Bidi", ":authority": `http://127.0.0.1:${port}`, "content-type": "application/grpc", te: "trailers" });
    req.on("error", () => {});
    req.write(frame(request.encode({ payload: Buffer.from("x"), delay_ms: 60_000 })));
    await eventually(() => stats.active === 1, "the bidi handler running");
    session.destroy();
    await eventually(() => stats.active === 0 && server.liveCalls === 0 && server.connections === 0, "call and connection released");
  });

  it("grpc-js with grpc.default_authority set to a URL", async () => {
    const before = server.authorityRewrites;
    const client = echoClient(port, { "grpc.default_authority": `http://127.0.0.1:${port}` });
    const res = await unary(client.Unary, client, { payload: Buffer.from("js") });
    expect(Buffer.from(res.payload).toString()).toBe("js");
    const again = await unary(client.Unary, client, { payload: Buffer.from("js2") });
    expect(Buffer.from(again.payload).toString()).toBe("js2");
    client.close();
    expect(server.authorityRewrites).toBe(before + rewritesOn(server, 1));
  });
});

describe("TLS", () => {
  let dir: string;
  let cert: Buffer;
  let server: GrpcServer;
  let port: number;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "etcetera-authority-tls-"));
    execFileSync("openssl", [
      "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost",
      "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
      "-keyout", join(dir, "key.pem"), "-out", join(dir, "cert.pem"),
    ], { stdio: "ignore" });
    cert = readFileSync(join(dir, "cert.pem"));
    server = new GrpcServer({ codecs, tls: { key: readFileSync(join(dir, "key.pem")), cert } });
    server.addService("etceteratest.Echo", echoHandlers(new HandlerStats()));
    ({ port } = await server.listen(0));
  });

  afterAll(async () => {
    await server.close(100);
    rmSync(dir, { recursive: true, force: true });
  });

  it("an https:// authority over h2 is answered as well", async () => {
    const session = await connect(`https://127.0.0.1:${port}`, { ca: cert });
    for (const authority of [`https://127.0.0.1:${port}`, `https://127.0.0.1:${port}`]) {
      const res = await rawRequest(session, { ":path": "/etceteratest.Echo/Unary", ":authority": authority }, [frame(request.encode({ payload: Buffer.from("t") }))]);
      expect(messages(res.body).map((m) => Buffer.from(m.payload as Uint8Array).toString())).toEqual(["t"]);
    }
    expect(server.authorityRewrites).toBe(rewritesOn(server, 1));
    session.destroy();
  });
});

describe("graceful close", () => {
  it("a rewritten connection gets GOAWAY, its call finishes, close() resolves", async () => {
    const server = new GrpcServer({ codecs });
    server.addService("etceteratest.Echo", echoHandlers(new HandlerStats()));
    const { port } = await server.listen(0);
    const session = await connect(`http://127.0.0.1:${port}`);
    const goaway = new Promise<void>((resolve) => session.once("goaway", () => resolve()));
    const slow = rawRequest(session, { ":path": "/etceteratest.Echo/Unary", ":authority": `http://127.0.0.1:${port}` }, [frame(request.encode({ payload: Buffer.from("s"), delay_ms: 200 }))]);
    await eventually(() => server.liveCalls === 1, "the call started");
    expect(server.authorityRewrites).toBe(rewritesOn(server, 1));
    const closed = server.close(5_000);
    await goaway;
    const res = await slow;
    expect(messages(res.body).map((m) => Buffer.from(m.payload as Uint8Array).toString())).toEqual(["s"]);
    await closed;
    expect(server.connections).toBe(0);
    session.destroy();
  });
});

// ---- etcdctl (Go gRPC) ----

const ETCDCTL = ETCDCTL_BIN;

function etcdctl(endpoint: string, args: string[], timeoutMs = 15_000): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(ETCDCTL, [`--endpoints=${endpoint}`, "--command-timeout=5s", ...args], { env: { ...process.env, ETCDCTL_API: "3" }, timeout: timeoutMs }, (err, stdout, stderr) =>
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

describe("etcdctl --endpoints=http://127.0.0.1:PORT", () => {
  const server = new GrpcServer();
  const store = new Map<string, string>();
  /** method and peer (the client's address:port, i.e. its connection) of every call. */
  const calls: { method: string; peer: string; token?: string }[] = [];
  let port = 0;
  let endpoint = "";
  const header = (revision: number) => ({ cluster_id: 0x1234n, member_id: 0x42n, revision, raft_term: 2 });
  const kv = (key: string, value: string, revision: number) => ({ key: Buffer.from(key), value: Buffer.from(value), create_revision: revision, mod_revision: revision, version: 1, lease: 0 });

  beforeAll(async () => {
    const kvHandlers: Partial<KVHandlers> = {
      Range: (req, ctx) => {
        calls.push({ method: "Range", peer: ctx.peer });
        const value = store.get(req.key.toString());
        return value === undefined ? { header: header(store.size), kvs: [], count: 0 } : { header: header(store.size), kvs: [kv(req.key.toString(), value, 2)], count: 1 };
      },
      Put: (req, ctx) => {
        calls.push({ method: "Put", peer: ctx.peer });
        if (ctx.metadata.get("token") !== undefined && ctx.metadata.get("token") !== "tok-root") throw new GrpcError(Status.PERMISSION_DENIED, "etcdserver: permission denied");
        store.set(req.key.toString(), req.value.toString());
        return { header: header(store.size + 1) };
      },
    };
    server.addService("etcdserverpb.KV", kvHandlers);
    const watch: WatchHandlers = {
      Watch: (call, ctx) => {
        calls.push({ method: "Watch", peer: ctx.peer });
        call.onMessage((req) => {
          if (req.request_union !== "create_request") return;
          const key = req.create_request!.key.toString();
          call.write({ header: header(10), watch_id: 0, created: true });
          let n = 0;
          const timer = setInterval(() => {
            n++;
            call.write({ header: header(10 + n), watch_id: 0, events: [{ type: 0, kv: kv(key, `v${n}`, 10 + n) }] });
            if (n === 3) clearInterval(timer);
          }, 30);
          ctx.signal.addEventListener("abort", () => clearInterval(timer));
        });
      },
    };
    server.addService("etcdserverpb.Watch", watch);
    server.addService("etcdserverpb.Auth", {
      Authenticate: (req: { name: string; password: string }, ctx: CallContext) => {
        calls.push({ method: "Authenticate", peer: ctx.peer });
        if (req.name !== "root" || req.password !== "pw") throw new GrpcError(Status.INVALID_ARGUMENT, "etcdserver: authentication failed, invalid user ID or password");
        return { header: header(1), token: "tok-root" };
      },
    });
    server.addService("etcdserverpb.Cluster", {
      MemberList: (_req: object, ctx: CallContext) => {
        calls.push({ method: "MemberList", peer: ctx.peer });
        return { header: header(1), members: [{ ID: 0x42n, name: "m1", peerURLs: ["http://127.0.0.1:1"], clientURLs: [endpoint] }] };
      },
    });
    server.addService("etcdserverpb.Maintenance", {
      Status: (_req: object, ctx: CallContext) => {
        calls.push({ method: "Status", peer: ctx.peer, token: ctx.metadata.get("token") });
        return { header: header(12), version: "3.4.23", dbSize: 20480, leader: 0x42n, raftIndex: 77, raftTerm: 2 };
      },
      HashKV: (_req: object, ctx: CallContext) => {
        calls.push({ method: "HashKV", peer: ctx.peer });
        return { header: header(12), hash: 0xabcdef, compact_revision: 1 };
      },
    });
    ({ port } = await server.listen(0));
    endpoint = `http://127.0.0.1:${port}`;
  });

  afterAll(async () => {
    await server.close(100);
  });

  it("put, then get (etcdctl 3.4 dials its main connection with host:port; these work either way)", async () => {
    const put = await etcdctl(endpoint, ["put", "a", "b"]);
    expect(put).toMatchObject({ code: 0, stdout: "OK\n" });
    const get = await etcdctl(endpoint, ["get", "a"]);
    expect(get).toMatchObject({ code: 0, stdout: "a\nb\n" });
  });

  it("endpoint status and hashkv (per-endpoint dials that send the URL as :authority) are answered", async () => {
    const before = server.authorityRewrites;
    const status = await etcdctl(endpoint, ["endpoint", "status", "-w", "json"]);
    expect(status.stderr).toBe("");
    expect((JSON.parse(status.stdout) as { Status: { raftIndex: number } }[])[0]!.Status.raftIndex).toBe(77);
    const hashkv = await etcdctl(endpoint, ["endpoint", "hashkv", "-w", "json"]);
    expect(hashkv.stderr).toBe("");
    expect((JSON.parse(hashkv.stdout) as { HashKV: { hash: number } }[])[0]!.HashKV.hash).toBe(0xabcdef);
    expect(server.authorityRewrites).toBe(before + rewritesOn(server, 2));
  });

  it("--user: Authenticate, then Status with the token on a rewritten connection", async () => {
    const before = server.authorityRewrites;
    const run = await etcdctl(endpoint, ["--user=root:pw", "endpoint", "status", "-w", "json"]);
    expect(run.stderr).toBe("");
    expect(calls.at(-1)).toMatchObject({ method: "Status", token: "tok-root" });
    expect(server.authorityRewrites).toBeGreaterThanOrEqual(before + rewritesOn(server, 1));
  });

  it("watch receives every event of its stream", async () => {
    const run = await etcdctl(endpoint, ["watch", "w"], 2_000);
    expect(run.stdout).toBe("PUT\nw\nv1\nPUT\nw\nv2\nPUT\nw\nv3\n");
    await eventually(() => server.liveCalls === 0, "watch stream released");
  });

  it("endpoint status --cluster dials the member's client URL from MemberList", async () => {
    const before = server.authorityRewrites;
    const run = await etcdctl(endpoint, ["endpoint", "status", "--cluster", "-w", "json"]);
    expect(run.stderr).toBe("");
    const parsed = JSON.parse(run.stdout) as { Endpoint: string; Status: { version: string; raftIndex: number } }[];
    expect(parsed.map((s) => [s.Endpoint, s.Status.version, s.Status.raftIndex])).toEqual([[endpoint, "3.4.23", 77]]);
    expect(calls.slice(-2).map((c) => c.method)).toEqual(["MemberList", "Status"]);
    expect(server.authorityRewrites).toBe(before + rewritesOn(server, 1));
  });
});
