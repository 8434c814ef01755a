/**
 * The TLS transport of a chaos link proxy (TcpProxy with `transport`): the proxy terminates the
 * dialing member's TLS with a certificate of the test CA valid for the advertised peer URL's host,
 * so the classifier reads the decrypted first bytes exactly as in plaintext mode (etcd's
 * X-Server-From header, etcetera's Hello frame), and the faults act on the plaintext the members
 * exchange; towards the real member it is a TLS client presenting a certificate of the same CA,
 * which members started with --peer-client-cert-auth accept. Two TLS sessions per link: dropping
 * or delaying plaintext never corrupts either one's records, so a fault means the same as over TCP.
 *
 * ALPN: the proxy offers http/1.1 to the dialer and asks the member for whatever the dialer got
 * (etcd's rafthttp speaks HTTP/1.1, etcetera's peer protocol asks for none); an HTTP/2 peer
 * connection would hide its headers in HPACK and be classified unknown, as any unreadable head is.
 */
import type { Socket } from "node:net";
import { connect, createServer, type TLSSocket } from "node:tls";
import type { ProxyTransport } from "./proxy.js";

/** PEM contents of the proxy's certificate (server and client use), its key, and the CA both sides trust. */
export interface TlsProxyFiles {
  ca: Buffer;
  cert: Buffer;
  key: Buffer;
}

export interface TlsProxyStats {
  /** Handshakes completed with dialing members (their client certificate verified). */
  inbound: number;
  /** Handshakes completed with the real member (its server certificate verified). */
  upstream: number;
  /** Failed inbound handshakes by error message (bounded: a few distinct messages are expected). */
  inboundErrors: Record<string, number>;
  /** Errors of upstream connections before their handshake completed, by message (a killed member: ECONNREFUSED). */
  upstreamErrors: Record<string, number>;
}

const MAX_ERROR_KINDS = 32;

function count(into: Record<string, number>, e: Error): void {
  const key = (e as NodeJS.ErrnoException).code ?? e.message;
  if (into[key] === undefined && Object.keys(into).length >= MAX_ERROR_KINDS) return;
  into[key] = (into[key] ?? 0) + 1;
}

/** A proxy transport that terminates TLS from the dialer and re-encrypts towards the target; `stats` is filled as it runs. */
export function tlsProxyTransport(files: TlsProxyFiles, stats: TlsProxyStats): ProxyTransport {
  return {
    createServer(onSocket) {
      const server = createServer(
        { key: files.key, cert: files.cert, ca: files.ca, requestCert: true, rejectUnauthorized: true, ALPNProtocols: ["http/1.1"] },
        (socket: TLSSocket) => {
          stats.inbound++;
          onSocket(socket);
        },
      );
      server.on("tlsClientError", (e: Error, socket: TLSSocket) => {
        count(stats.inboundErrors, e);
        socket.destroy();
      });
      return server;
    },
    connect(client: Socket, host: string, port: number): Socket {
      const alpn = (client as TLSSocket).alpnProtocol;
      const upstream = connect({
        host,
        port,
        ca: files.ca,
        cert: files.cert,
        key: files.key,
        rejectUnauthorized: true,
        ...(typeof alpn === "string" ? { ALPNProtocols: [alpn] } : {}),
      });
      let secured = false;
      upstream.once("secureConnect", () => {
        secured = true;
        stats.upstream++;
      });
      upstream.on("error", (e: Error) => {
        if (!secured) count(stats.upstreamErrors, e);
      });
      return upstream;
    },
  };
}

export function emptyTlsProxyStats(): TlsProxyStats {
  return { inbound: 0, upstream: 0, inboundErrors: {}, upstreamErrors: {} };
}
