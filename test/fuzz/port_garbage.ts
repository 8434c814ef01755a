/**
 * Bad input for a member's ports below gRPC: raw TCP to the peer port (random bytes, a well-formed
 * etcetera Hello from another cluster, a frame header announcing a huge frame, slowloris) and raw
 * HTTP/1.1 to the client port (random request lines, huge headers, the plain-HTTP routes with
 * junk). Every function resolves with what the server did with the connection; none rejects.
 */
import net from "node:net";
import { ConnectionKind, encodeHello, PROTOCOL_VERSION } from "../../src/server/transport/protocol.js";
import type { Rng } from "./rng.js";

export interface ConnOutcome {
  /** Bytes the server sent back. */
  readonly received: Buffer;
  /** The server closed (or reset) the connection before we did. */
  readonly closedByServer: boolean;
}

/**
 * Connects, writes `chunks` (with `gapMs` between them), and waits up to `waitMs` for the server
 * to close; then closes itself.
 */
export function sendRaw(port: number, chunks: readonly Buffer[], opts: { gapMs?: number; waitMs: number }): Promise<ConnOutcome> {
  return new Promise((resolve) => {
    const socket = net.connect(port, "127.0.0.1");
    const parts: Buffer[] = [];
    let closedByServer = false;
    let done = false;
    const finish = (): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      resolve({ received: Buffer.concat(parts), closedByServer });
    };
    const timer = setTimeout(finish, opts.waitMs);
    socket.on("data", (b: Buffer) => {
      if (parts.length < 64) parts.push(b);
    });
    socket.on("error", () => {
      closedByServer = true;
      finish();
    });
    socket.on("end", () => {
      closedByServer = true;
      finish();
    });
    socket.on("close", () => {
      if (!done) closedByServer = true;
      finish();
    });
    socket.once("connect", async () => {
      for (const c of chunks) {
        if (done) return;
        socket.write(c);
        if (opts.gapMs) await new Promise((r) => setTimeout(r, opts.gapMs));
      }
    });
  });
}

export type PeerGarbageKind = "random-bytes" | "foreign-hello" | "huge-frame" | "bad-crc" | "http-on-peer-port" | "empty-close";

/** One garbage connection's bytes for the peer port. */
export function peerGarbage(rng: Rng, kind: PeerGarbageKind): Buffer[] {
  switch (kind) {
    case "random-bytes":
      return [rng.bytes(rng.between(1, 4096))];
    case "foreign-hello":
      // A well-formed Hello of another cluster (etcetera's own protocol): refused, logged.
      return [
        encodeHello({
          version: rng.bool(0.8) ? PROTOCOL_VERSION : rng.between(2, 60_000),
          kind: rng.bool() ? ConnectionKind.Stream : ConnectionKind.Snapshot,
          clusterId: BigInt(rng.between(1, 2 ** 40)),
          from: BigInt(rng.between(1, 2 ** 40)),
          to: BigInt(rng.between(1, 2 ** 40)),
          clusterToken: `fuzz-${rng.int(1000)}`,
        }),
      ];
    case "huge-frame": {
      const header = Buffer.alloc(8);
      header.writeUInt32BE(rng.pick([0xffffffff, 0x7fffffff, 64 * 1024 + 1, 16 * 1024 * 1024 + 1]), 0);
      header.writeUInt32BE(rng.u32(), 4);
      return [header, rng.bytes(rng.between(0, 1024))];
    }
    case "bad-crc": {
      const body = Buffer.concat([Buffer.from([1]), rng.bytes(rng.between(1, 200))]);
      const header = Buffer.alloc(8);
      header.writeUInt32BE(body.length, 0);
      header.writeUInt32BE(rng.u32(), 4);
      return [header, body];
    }
    case "http-on-peer-port":
      return [Buffer.from(`GET /raft/stream/message/${rng.int(1e6).toString(16)} HTTP/1.1\r\nHost: x\r\nX-Etcd-Cluster-ID: ${rng.int(1e6).toString(16)}\r\n\r\n`)];
    case "empty-close":
      return [];
  }
}

export const PEER_GARBAGE_KINDS: readonly PeerGarbageKind[] = ["random-bytes", "foreign-hello", "huge-frame", "bad-crc", "http-on-peer-port", "empty-close"];

const HTTP_PATHS = ["/metrics", "/health", "/version", "/readyz", "/livez", "/v3/kv/range", "/", "/nope"];

/** One raw HTTP/1.1 request (or garbage that starts like one) for the client port. */
export function httpGarbage(rng: Rng): { bytes: Buffer; label: string } {
  const kind = rng.pick(["random-line", "huge-header", "junk-route", "bad-method", "many-headers", "bad-version"] as const);
  const path = rng.pick(HTTP_PATHS);
  const junkQuery = (): string => `?${Buffer.from(rng.bytes(rng.between(0, 40))).toString("base64url")}=${"%".repeat(rng.int(3))}${rng.int(1e6)}`;
  switch (kind) {
    case "random-line": {
      const line = Buffer.from(rng.bytes(rng.between(1, 300)).map((b) => (b === 0x0d || b === 0x0a ? 0x20 : b)));
      // Starts with a letter so the server's sniffing takes it for HTTP/1.1, not HTTP/2.
      return { bytes: Buffer.concat([Buffer.from("G"), line, Buffer.from("\r\n\r\n")]), label: kind };
    }
    case "huge-header":
      return { bytes: Buffer.from(`GET ${path} HTTP/1.1\r\nHost: x\r\nX-Junk: ${"a".repeat(rng.between(20_000, 200_000))}\r\n\r\n`), label: kind };
    case "junk-route":
      return { bytes: Buffer.from(`GET ${path}${junkQuery()} HTTP/1.1\r\nHost: x\r\nAccept: ${rng.int(1e9)}/*\r\nConnection: close\r\n\r\n`), label: kind };
    case "bad-method":
      return { bytes: Buffer.from(`${rng.pick(["DELETE", "PUT", "FOO", "CONNECT", "TRACE"])} ${path} HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello`), label: kind };
    case "many-headers": {
      let headers = "";
      for (let i = 0; i < rng.between(100, 3000); i++) headers += `X-H${i}: ${i}\r\n`;
      return { bytes: Buffer.from(`GET ${path} HTTP/1.1\r\nHost: x\r\n${headers}Connection: close\r\n\r\n`), label: kind };
    }
    case "bad-version":
      return { bytes: Buffer.from(`GET ${path} HTTP/${rng.pick(["9.9", "1", "x", "1.1.1"])}\r\nHost: x\r\n\r\n`), label: kind };
  }
}
