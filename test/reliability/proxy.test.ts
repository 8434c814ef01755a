/**
 * The link proxy on loopback, between test clients and echo servers: pass, blackhole, one-way
 * drops, delay, resets, per-source modes via a classifier, and the etcd/etcetera classifiers.
 */
import { createServer, connect, type Server, type Socket } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { BLACKHOLE, classifyEtcdHttp, classifyEtcetera, normalizeId, PASS, TcpProxy, UNKNOWN_SOURCE, type SourceClassifier } from "./proxy.js";

interface Echo {
  server: Server;
  port: number;
  /** Bytes the server received (to tell a forward drop from a backward drop). */
  received: () => number;
}

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function echoServer(): Promise<Echo> {
  let received = 0;
  const sockets = new Set<Socket>();
  const server = createServer((s) => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
    s.on("error", () => undefined);
    s.on("data", (b) => {
      received += b.length;
      s.write(b);
    });
  });
  const port = await new Promise<number>((r) => server.listen(0, "127.0.0.1", () => r((server.address() as { port: number }).port)));
  cleanups.push(() => {
    for (const s of sockets) s.destroy();
    return new Promise<void>((r) => server.close(() => r()));
  });
  return { server, port, received: () => received };
}

async function startProxy(targetPort: number, classify?: SourceClassifier): Promise<TcpProxy> {
  const p = await TcpProxy.start({ name: "t", targetPort, ...(classify ? { classify, classifyTimeoutMs: 500 } : {}) });
  cleanups.push(() => p.close());
  return p;
}

/** A client connection that collects what it reads. */
async function client(port: number): Promise<{ sock: Socket; got: () => string; closed: Promise<void> }> {
  const sock = connect({ host: "127.0.0.1", port });
  let got = "";
  sock.on("data", (b) => (got += b.toString()));
  sock.on("error", () => undefined);
  const closed = new Promise<void>((r) => sock.on("close", () => r()));
  await new Promise<void>((r) => sock.once("connect", () => r()));
  cleanups.push(() => void sock.destroy());
  return { sock, got: () => got, closed };
}

async function until(cond: () => boolean, what: string, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out: ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** Waits a little so that bytes in flight would have arrived (used only to show absence). */
const settle = () => new Promise((r) => setTimeout(r, 150));

describe("TcpProxy", () => {
  it("passes bytes both ways", async () => {
    const echo = await echoServer();
    const proxy = await startProxy(echo.port);
    const c = await client(proxy.port);
    c.sock.write("hello");
    await until(() => c.got() === "hello", "echo");
    expect(proxy.stats.bytesForwarded).toBe(10);
    expect(proxy.connectionCount).toBe(1);
  });

  it("blackholes both directions, then resets the connection that lost bytes on heal", async () => {
    const echo = await echoServer();
    const proxy = await startProxy(echo.port);
    const c = await client(proxy.port);
    c.sock.write("a");
    await until(() => c.got() === "a", "first echo");
    proxy.setMode(BLACKHOLE);
    c.sock.write("lost");
    await settle();
    expect(c.got()).toBe("a");
    expect(echo.received()).toBe(1);
    expect(proxy.stats.bytesDropped).toBe(4);
    proxy.heal();
    await c.closed; // the stream lost bytes: it must not resume mid-frame
    const fresh = await client(proxy.port);
    fresh.sock.write("again");
    await until(() => fresh.got() === "again", "echo after heal");
  });

  it("drops one way only: forward drop never reaches the server; backward drop reaches it but never returns", async () => {
    const echo = await echoServer();
    const proxy = await startProxy(echo.port);
    const c = await client(proxy.port);
    proxy.setMode({ forward: { kind: "drop" }, backward: { kind: "pass" } });
    c.sock.write("x");
    await settle();
    expect(echo.received()).toBe(0);
    proxy.setMode({ forward: { kind: "pass" }, backward: { kind: "drop" } });
    const d = await client(proxy.port);
    d.sock.write("yy");
    await until(() => echo.received() === 2, "server got the bytes");
    await settle();
    expect(d.got()).toBe("");
  });

  it("delays bytes by at least the configured time, in order", async () => {
    const echo = await echoServer();
    const proxy = await startProxy(echo.port);
    const c = await client(proxy.port);
    proxy.setMode({ forward: { kind: "delay", ms: 100 }, backward: { kind: "delay", ms: 100 } });
    const t0 = Date.now();
    for (const part of ["1", "2", "3", "4"]) c.sock.write(part);
    await until(() => c.got().length === 4, "delayed echo");
    expect(c.got()).toBe("1234");
    // A lower bound only (the proxy must not be early); never an upper bound on speed.
    expect(Date.now() - t0).toBeGreaterThanOrEqual(190);
    expect(proxy.stats.bytesDelayed).toBe(8);
    proxy.setMode(PASS);
    c.sock.write("5");
    await until(() => c.got() === "12345", "echo after delay removed");
  });

  it("resets whole connections; new ones work", async () => {
    const echo = await echoServer();
    const proxy = await startProxy(echo.port);
    const a = await client(proxy.port);
    const b = await client(proxy.port);
    await until(() => proxy.connectionCount === 2, "two connections");
    expect(proxy.reset()).toBe(2);
    await Promise.all([a.closed, b.closed]);
    expect(proxy.stats.resets).toBe(2);
    const c = await client(proxy.port);
    c.sock.write("ok");
    await until(() => c.got() === "ok", "echo after reset");
  });

  it("applies modes per source, as named by the classifier and aliases", async () => {
    const echo = await echoServer();
    // Test protocol: the first line says who is talking.
    const byLine: SourceClassifier = (b) => {
      const s = b.toString();
      const nl = s.indexOf("\n");
      return nl < 0 ? undefined : s.startsWith("FROM ") ? s.slice(5, nl) : null;
    };
    const proxy = await startProxy(echo.port, byLine);
    proxy.setAlias("a1", "alice");
    proxy.setMode(BLACKHOLE, "alice");
    const alice = await client(proxy.port);
    const bob = await client(proxy.port);
    alice.sock.write("FROM a1\nhi");
    bob.sock.write("FROM bob\nhi");
    await until(() => bob.got() === "FROM bob\nhi", "bob's echo");
    await settle();
    expect(alice.got()).toBe("");
    expect(proxy.sources().sort()).toEqual(["alice", "bob"]);
    expect(proxy.reset("bob")).toBe(1);
    await bob.closed;
    expect(proxy.sources()).toEqual(["alice"]);
  });

  it("gives unattributed connections the mode of source '?'", async () => {
    const echo = await echoServer();
    const byLine: SourceClassifier = (b) => (b.includes(10) ? (b.toString().startsWith("FROM ") ? b.toString().slice(5, b.indexOf(10)) : null) : undefined);
    const proxy = await startProxy(echo.port, byLine);
    proxy.setMode(BLACKHOLE, UNKNOWN_SOURCE);
    const anon = await client(proxy.port);
    const named = await client(proxy.port);
    anon.sock.write("GET /probe\n");
    named.sock.write("FROM n2\nx");
    await until(() => named.got() === "FROM n2\nx", "named echo");
    await settle();
    expect(anon.got()).toBe("");
    expect(proxy.sources().sort()).toEqual([UNKNOWN_SOURCE, "n2"].sort());
  });
});

describe("peer protocol classifiers", () => {
  it("reads etcd's X-Server-From header", () => {
    const req = "GET /raft/stream/msgapp/8e9e05c52164694d HTTP/1.1\r\nHost: x\r\nX-Server-From: 0091bc3c23b2e8f\r\nX-Etcd-Cluster-ID: cdf818194e3a8c32\r\n\r\n";
    expect(classifyEtcdHttp(Buffer.from(req))).toBe("91bc3c23b2e8f");
    expect(classifyEtcdHttp(Buffer.from(req.slice(0, 30)))).toBeUndefined();
    expect(classifyEtcdHttp(Buffer.from("GET /raft/probing HTTP/1.1\r\nHost: x\r\n\r\n"))).toBeNull();
  });

  it("reads etcetera's Hello frame", () => {
    const b = Buffer.alloc(40);
    b[8] = 1;
    b.writeUInt32BE(0x45544354, 9);
    b.writeBigUInt64BE(0xabcdefn, 24);
    expect(classifyEtcetera(b)).toBe("abcdef");
    expect(classifyEtcetera(b.subarray(0, 20))).toBeUndefined();
    expect(classifyEtcetera(Buffer.alloc(40))).toBeNull();
    expect(normalizeId("000000000000abcd")).toBe("abcd");
  });
});
