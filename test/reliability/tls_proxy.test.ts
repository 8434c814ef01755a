/**
 * The TLS link proxy on real sockets: it terminates the dialer's TLS, classifies the decrypted
 * first bytes as in plaintext mode, applies a link's mode to the plaintext, and dials the target
 * as a TLS client with its own certificate; a dialer without a certificate of the CA is refused.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect, createServer, type Server, type TLSSocket } from "node:tls";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually, sleep } from "../e2e/harness.js";
import { makeCa, makeLeaf } from "../e2e/tls_certs.js";
import { BLACKHOLE, classifyEtcdHttp, TcpProxy } from "./proxy.js";
import { emptyTlsProxyStats, tlsProxyTransport, type TlsProxyFiles } from "./tls_proxy.js";

const dir = mkdtempSync(join(tmpdir(), "etcetera-tls-proxy-"));
let caFiles: ReturnType<typeof makeCa>;
let ca: Buffer;
let member: TlsProxyFiles;
let proxyFiles: TlsProxyFiles;
let target: Server;
let targetPort = 0;
/** What the target received, and the CN of the certificate each connection presented. */
const received: string[] = [];
const peerCns: string[] = [];

function files(name: string): TlsProxyFiles {
  const l = makeLeaf(caFiles, name);
  return { ca, cert: readFileSync(l.cert), key: readFileSync(l.key) };
}

beforeAll(async () => {
  caFiles = makeCa(dir, "ca");
  ca = readFileSync(caFiles.cert);
  member = files("member");
  proxyFiles = files("proxy");
  // The "real member": TLS with client certificates required, answers every chunk with "ack:<chunk>".
  target = createServer({ ...member, requestCert: true, rejectUnauthorized: true }, (s: TLSSocket) => {
    peerCns.push(String(s.getPeerCertificate().subject.CN));
    s.on("data", (b: Buffer) => {
      received.push(b.toString());
      s.write(`ack:${b.toString()}`);
    });
    s.on("error", () => undefined);
  });
  targetPort = await new Promise<number>((r) => target.listen(0, "127.0.0.1", () => r((target.address() as { port: number }).port)));
});
afterAll(async () => {
  await new Promise<void>((r) => target.close(() => r()));
  rmSync(dir, { recursive: true, force: true });
});

/** A member dialing the proxy over TLS (verifying the proxy's certificate for 127.0.0.1). */
function dial(port: number, withCert: boolean): TLSSocket {
  const s = connect({ host: "127.0.0.1", port, ca, ...(withCert ? { cert: member.cert, key: member.key } : {}) });
  s.on("error", () => undefined);
  return s;
}

function reader(s: TLSSocket): () => string {
  let got = "";
  s.on("data", (b: Buffer) => (got += b.toString()));
  return () => got;
}

const head = (from: string) => `POST /raft HTTP/1.1\r\nHost: x\r\nX-Server-From: ${from}\r\n\r\n`;

describe("TLS link proxy", () => {
  it("classifies the decrypted head, forwards both ways re-encrypted with its own certificate", async () => {
    const stats = emptyTlsProxyStats();
    const proxy = await TcpProxy.start({ name: "t", targetPort, classify: classifyEtcdHttp, transport: tlsProxyTransport(proxyFiles, stats) });
    try {
      proxy.setAlias("1a", "n2");
      const s = dial(proxy.port, true);
      const got = reader(s);
      s.write(head("1a"));
      await eventually(async () => (got().includes("ack:POST /raft") ? true : undefined), 10_000, "the target's answer through the proxy");
      expect(proxy.sources()).toEqual(["n2"]);
      expect(received.join("")).toContain("X-Server-From: 1a");
      expect(peerCns.at(-1)).toBe("proxy");
      expect(stats.inbound).toBe(1);
      expect(stats.upstream).toBe(1);
      s.destroy();
    } finally {
      await proxy.close();
    }
  });

  it("drops a blackholed source's plaintext and resets the tainted connection when the link heals", async () => {
    const stats = emptyTlsProxyStats();
    const proxy = await TcpProxy.start({ name: "t", targetPort, classify: classifyEtcdHttp, transport: tlsProxyTransport(proxyFiles, stats) });
    try {
      proxy.setAlias("2b", "n3");
      const s = dial(proxy.port, true);
      const got = reader(s);
      s.write(head("2b"));
      await eventually(async () => (got().includes("ack:") ? true : undefined), 10_000, "the first answer");
      proxy.setMode(BLACKHOLE, "n3");
      const before = received.length;
      s.write("lost-bytes");
      await sleep(300);
      expect(received.length).toBe(before);
      expect(proxy.stats.bytesDropped).toBeGreaterThan(0);
      const closed = new Promise<void>((r) => s.once("close", () => r()));
      proxy.heal();
      await closed;
      expect(proxy.connectionCount).toBe(0);
    } finally {
      await proxy.close();
    }
  });

  it("refuses a dialer without a certificate of the CA: nothing reaches the target", async () => {
    const stats = emptyTlsProxyStats();
    const proxy = await TcpProxy.start({ name: "t", targetPort, classify: classifyEtcdHttp, transport: tlsProxyTransport(proxyFiles, stats) });
    try {
      const before = received.length;
      const s = dial(proxy.port, false);
      s.write(head("3c"));
      await eventually(async () => (Object.keys(stats.inboundErrors).length > 0 ? true : undefined), 10_000, "the refused handshake counted");
      expect(stats.inbound).toBe(0);
      expect(stats.upstream).toBe(0);
      expect(received.length).toBe(before);
      s.destroy();
    } finally {
      await proxy.close();
    }
  });
});
