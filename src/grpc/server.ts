/**
 * The gRPC server of the client port, written directly on node:http2 (see
 * issue 5 for the measurements that ruled out @grpc/grpc-js here). One port
 * serves gRPC over h2c or TLS, and plain HTTP/1.1 and HTTP/2 requests (routed to
 * the HTTP handler), as etcd's client port does.
 */

import http, { type IncomingMessage, type ServerResponse } from "node:http";
import http2, { type IncomingHttpHeaders, type ServerHttp2Session, type ServerHttp2Stream } from "node:http2";
import net, { type AddressInfo, type Socket } from "node:net";
import tls from "node:tls";
import type { ProtoCodecs } from "../pb/codec.js";
import { type CallConnection, type CallHost, type CallObserver, Http2Call, type RegisteredMethod, respondTrailersOnly } from "./call.js";
import { parseGrpcTimeout } from "./deadline.js";
import { goQuote } from "./go_quote.js";
import { handlerOf, methodKind } from "./handler.js";
import type { EtcdServices, HandlersFor } from "./services.js";
import { type HttpHandler, markEncrypted, serveHttp1, serveHttp2 } from "./http.js";
import { FirstRequestGate, type ProbeOptions } from "./h2/first-request-gate.js";
import { DEFAULT_HEADER_TABLE_SIZE } from "./h2/hpack.js";
import { CLIENT_PREFACE, SettingsId } from "./h2/http2-frame.js";
import { DEFAULT_KEEPALIVE, type KeepaliveOptions, SessionKeepalive } from "./h2/keepalive.js";
import { loadEtcdCodecs } from "../pb/protos.js";
import { RewritingStream } from "./h2/rewriting-stream.js";
import { H2Connection, type ConnectionHost } from "./h2/connection.js";
import type { H2Stream } from "./h2/stream.js";
import { GrpcError, Status } from "./status.js";
import { tagClientIdentity } from "./client_identity.js";

/** etcd's default --max-request-bytes (1.5 MiB). */
export const DEFAULT_MAX_REQUEST_BYTES = 1.5 * 1024 * 1024;
/** etcd adds this much to --max-request-bytes for gRPC's receive limit. */
export const GRPC_OVERHEAD_BYTES = 512 * 1024;
/** Largest value of the HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS field. */
export const HTTP2_MAX_CONCURRENT_STREAMS_MAX = 2 ** 32 - 1;

export interface TlsOptions {
  key: string | Buffer;
  cert: string | Buffer;
  /** CA bundle to verify client certificates (--trusted-ca-file). */
  ca?: string | Buffer;
  /** Ask for and verify client certificates (--client-cert-auth). */
  requestCert?: boolean;
  /** OpenSSL cipher list (--cipher-suites); OpenSSL's default when unset. */
  ciphers?: string;
  /**
   * Runs once the handshake is done, before a byte is served: a reason to refuse the connection
   * (a revoked certificate, a disallowed host name), or undefined to serve it.
   */
  check?(socket: tls.TLSSocket): string | undefined;
  /** A connection refused in the handshake or by `check`, for the log. */
  onRefused?(remoteAddress: string, reason: string): void;
}

/**
 * Which HTTP/2 implementation serves the client port's HTTP/2 connections: ours (h2/connection.ts,
 * the default) or node:http2's nghttp2 (the one before it, kept for A/B measurements and as a
 * fallback: ETCETERA_HTTP2=node).
 */
export type Http2Engine = "own" | "node";
export const HTTP2_ENGINES: readonly Http2Engine[] = ["own", "node"];

/** The engine ETCETERA_HTTP2 names (refused if it names none), else the default. */
export function http2EngineFromEnv(env: NodeJS.ProcessEnv = process.env): Http2Engine {
  const value = env.ETCETERA_HTTP2;
  if (value === undefined || value === "") return DEFAULT_HTTP2_ENGINE;
  if ((HTTP2_ENGINES as readonly string[]).includes(value)) return value as Http2Engine;
  throw new Error(`ETCETERA_HTTP2=${value}: expected one of ${HTTP2_ENGINES.join(", ")}`);
}

const DEFAULT_HTTP2_ENGINE: Http2Engine = "own";

/** The methods of each service, as the server reads them (ProtoCodecs; a front end's raw-bytes table). */
export type ServiceTable = Pick<ProtoCodecs, "service">;

export interface GrpcServerOptions {
  /** Largest request message accepted (etcd: --max-request-bytes + 512 KiB). */
  maxReceiveMessageBytes?: number;
  /** Largest response message sent (etcd: math.MaxInt32). */
  maxSendMessageBytes?: number;
  /** HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS (etcd --max-concurrent-streams, default 2^32-1). */
  maxConcurrentStreams?: number;
  keepalive?: Partial<KeepaliveOptions>;
  /** Serve TLS (h2 and http/1.1 by ALPN) instead of cleartext. */
  tls?: TlsOptions;
  /** Handler for plain HTTP requests; without it they get 404. */
  http?: HttpHandler;
  /** Compiled protos; defaults to the etcd v3 API. */
  codecs?: ServiceTable;
  /** nghttp2 memory cap per connection, in MB (Node's default of 10 is tight for many streams). */
  maxSessionMemoryMb?: number;
  /** Time close() waits for calls to finish before cancelling them. */
  shutdownGraceMs?: number;
  /** Per-call events, for metrics. */
  observer?: CallObserver;
  /** The HTTP/2 implementation (default: ETCETERA_HTTP2, else ours). */
  http2Engine?: Http2Engine;
  /** Our engine: how long a PING ACK may wait for a response to ride with (default 5 ms). */
  pingAckHoldMs?: number;
}

/** Bytes enough to tell the HTTP/2 preface from an HTTP/1.1 request line. */
const { NGHTTP2_PROTOCOL_ERROR } = http2.constants;
const SNIFF_BYTES = 3;
const SESSION_WINDOW_BYTES = 16 * 1024 * 1024;
/** After the grace period, how long cancelled calls get to flush their status. */
const SHUTDOWN_FLUSH_MS = 1000;

const kKeepalive = Symbol("grpc.keepalive");
type KeepaliveSession = ServerHttp2Session & { [kKeepalive]?: SessionKeepalive };

function isGrpcContentType(ct: string | undefined): boolean {
  if (ct === undefined || !ct.startsWith("application/grpc")) return false;
  // application/grpc, application/grpc+proto, application/grpc;... but not application/grpc-web.
  const next = ct.charCodeAt(16);
  return ct.length === 16 || next === 0x2b || next === 0x3b;
}

/**
 * `S` is the generated Services table the codecs decode to (src/pb): addService checks each
 * handler against its method there. The default is the etcd API under proto field names.
 */
export class GrpcServer<S extends object = EtcdServices> implements CallHost {
  readonly maxReceiveMessageBytes: number;
  readonly maxSendMessageBytes: number;
  readonly observer: CallObserver | undefined;
  private readonly options: GrpcServerOptions;
  private readonly keepalive: KeepaliveOptions;
  private readonly codecs: ServiceTable;
  private readonly methods = new Map<string, RegisteredMethod>();
  private readonly services = new Set<string>();
  private readonly calls = new Set<Http2Call>();
  private readonly sessions = new Set<ServerHttp2Session>();
  /** Connections of our own HTTP/2 engine (h2/connection.ts). */
  private readonly ownConnections = new Set<H2Connection>();
  private readonly engine: Http2Engine;
  private readonly maxConcurrentStreams: number;
  private readonly pingAckHoldMs: number | undefined;
  private readonly connectionHost: ConnectionHost;
  private readonly http1Sockets = new Set<Socket>();
  /** HTTP/2 connections whose first request is still being read (first-request-gate.ts). */
  private readonly gates = new Set<FirstRequestGate>();
  private readonly probeOptions: ProbeOptions;
  private rewrittenConnections = 0;
  private readonly h2: http2.Http2Server;
  private readonly h1: http.Server;
  private listener: net.Server | undefined;
  private httpHandler: HttpHandler | undefined;
  private closing = false;

  constructor(options: GrpcServerOptions = {}) {
    this.options = options;
    this.maxReceiveMessageBytes = options.maxReceiveMessageBytes ?? DEFAULT_MAX_REQUEST_BYTES + GRPC_OVERHEAD_BYTES;
    this.maxSendMessageBytes = options.maxSendMessageBytes ?? 2 ** 31 - 1;
    this.keepalive = { ...DEFAULT_KEEPALIVE, ...options.keepalive };
    this.observer = options.observer;
    this.codecs = options.codecs ?? loadEtcdCodecs();
    this.httpHandler = options.http;
    const maxConcurrentStreams = Math.max(
      0,
      Math.min(options.maxConcurrentStreams ?? HTTP2_MAX_CONCURRENT_STREAMS_MAX, HTTP2_MAX_CONCURRENT_STREAMS_MAX),
    );
    this.maxConcurrentStreams = maxConcurrentStreams;
    this.pingAckHoldMs = options.pingAckHoldMs;
    this.engine = options.http2Engine ?? http2EngineFromEnv();
    this.connectionHost = {
      // H2Stream has the part of ServerHttp2Stream that calls and plain-HTTP exchanges use (h2/stream.ts).
      onStream: (stream: H2Stream, headers: IncomingHttpHeaders) =>
        this.onStream(stream as unknown as ServerHttp2Stream, headers, stream.session as H2Connection),
      onConnectionClosed: (connection: H2Connection) => void this.ownConnections.delete(connection),
    };
    this.h2 = http2.createServer({
      settings: { maxConcurrentStreams },
      maxSessionMemory: options.maxSessionMemoryMb ?? 64,
    });
    // The gate's provisional SETTINGS says what node:http2 will (it sends only the settings given above).
    this.probeOptions = {
      settings: [[SettingsId.MAX_CONCURRENT_STREAMS, maxConcurrentStreams]],
      maxTableSize: DEFAULT_HEADER_TABLE_SIZE,
      keepalive: this.keepalive,
    };
    this.h2.on("session", (session: ServerHttp2Session) => this.onSession(session));
    this.h2.on("stream", (stream: ServerHttp2Stream, headers: IncomingHttpHeaders) => this.onStream(stream, headers));
    this.h1 = http.createServer((req: IncomingMessage, res: ServerResponse) => serveHttp1(req, res, this.httpHandler));
  }

  /** Registers the handlers of a proto service; methods without a handler answer UNIMPLEMENTED. */
  addService<N extends string>(serviceName: N, handlers: HandlersFor<S, N>): void {
    if (this.services.has(serviceName)) throw new Error(`service ${serviceName} already registered`);
    const descriptors = this.codecs.service(serviceName);
    const known = new Set(descriptors.map((d) => d.name));
    for (const key of Object.keys(handlers)) {
      if (!known.has(key)) throw new Error(`${serviceName} has no method ${key}`);
    }
    this.services.add(serviceName);
    for (const descriptor of descriptors) {
      const handler = handlerOf(handlers, descriptor.name);
      if (!handler) continue;
      this.methods.set(descriptor.path, {
        descriptor,
        kind: methodKind(descriptor.requestStream, descriptor.responseStream),
        handler,
      });
      this.observer?.registered?.(descriptor);
    }
  }

  /**
   * The registered method at a gRPC path, or the error a call to it gets: the JSON gateway calls
   * the very handlers gRPC calls do, through this.
   */
  method(path: string): RegisteredMethod | GrpcError {
    return this.methods.get(path) ?? this.unknownMethod(path);
  }

  /** Sets the handler of plain HTTP requests (metrics, health, gateway). */
  setHttpHandler(handler: HttpHandler | undefined): void {
    this.httpHandler = handler;
  }

  /** Number of gRPC calls whose stream is still open. */
  get liveCalls(): number {
    return this.calls.size;
  }

  /** The HTTP/2 implementation this server runs. */
  get http2Engine(): Http2Engine {
    return this.engine;
  }

  /** HTTP/2 connections served through the AuthorityRewriter so far (clients sending an authority nghttp2 refuses). */
  get authorityRewrites(): number {
    return this.rewrittenConnections;
  }

  get connections(): number {
    return this.sessions.size + this.ownConnections.size + this.http1Sockets.size + this.gates.size;
  }

  /** Listens on a unix socket path (etcd's unix:// and unixs:// client URLs). */
  listenUnix(path: string): Promise<void> {
    return this.listen(0, "", path).then(() => undefined);
  }

  /** Listens on host:port (port 0 picks a free one). */
  listen(port: number, host = "127.0.0.1", unixPath?: string): Promise<AddressInfo> {
    if (this.listener) throw new Error("already listening");
    const tlsOptions = this.options.tls;
    const listener = tlsOptions
      ? tls.createServer(
          {
            key: tlsOptions.key,
            cert: tlsOptions.cert,
            ca: tlsOptions.ca,
            requestCert: tlsOptions.requestCert ?? false,
            rejectUnauthorized: tlsOptions.requestCert ?? false,
            ciphers: tlsOptions.ciphers,
            // etcd's MinVersion.
            minVersion: "TLSv1.2",
            ALPNProtocols: ["h2", "http/1.1"],
            noDelay: true,
          },
          (socket) => this.onTlsConnection(socket),
        )
      : net.createServer((socket) => this.onCleartextConnection(socket));
    if (tlsOptions?.onRefused !== undefined) {
      const onRefused = tlsOptions.onRefused;
      listener.on("tlsClientError", (err: Error, socket: tls.TLSSocket) => onRefused(`${socket.remoteAddress}:${socket.remotePort}`, err.message));
    }
    listener.on("error", () => {});
    this.listener = listener;
    return new Promise((resolve, reject) => {
      listener.once("error", reject);
      const done = () => {
        listener.removeListener("error", reject);
        resolve(listener.address() as AddressInfo);
      };
      if (unixPath !== undefined) listener.listen(unixPath, done);
      else listener.listen(port, host, done);
    });
  }

  /**
   * Graceful stop: no new connections, GOAWAY to every client, wait up to the
   * grace period for calls to finish, then end the rest with UNAVAILABLE.
   */
  async close(graceMs = this.options.shutdownGraceMs ?? 5000): Promise<void> {
    this.closing = true;
    const listenerClosed = new Promise<void>((resolve) => (this.listener ? this.listener.close(() => resolve()) : resolve()));
    for (const gate of [...this.gates]) gate.destroy();
    for (const session of this.sessions) if (!session.closed) session.close();
    for (const connection of this.ownConnections) connection.close();
    this.h1.closeIdleConnections();
    const deadline = Date.now() + graceMs;
    await this.waitFor(() => this.calls.size === 0 && this.http1Sockets.size === 0, deadline);
    for (const call of [...this.calls]) call.shutdown();
    // Let the UNAVAILABLE trailers go out and the sessions close on their own, briefly.
    await this.waitFor(() => this.sessions.size === 0 && this.ownConnections.size === 0, Date.now() + SHUTDOWN_FLUSH_MS);
    for (const session of this.sessions) session.destroy();
    for (const connection of [...this.ownConnections]) connection.destroy();
    for (const socket of this.http1Sockets) socket.destroy();
    await listenerClosed;
  }

  private async waitFor(done: () => boolean, deadline: number): Promise<void> {
    while (!done() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
  }

  callClosed(call: Http2Call): void {
    this.calls.delete(call);
  }

  // ---- connections ----

  private onCleartextConnection(socket: Socket): void {
    if (this.closing) {
      socket.destroy();
      return;
    }
    socket.on("error", () => {});
    // Responses are small and latency-bound: never hold them back for Nagle's algorithm.
    socket.setNoDelay(true);
    let seen: Buffer | undefined;
    const onData = (chunk: Buffer): void => {
      seen = seen ? Buffer.concat([seen, chunk]) : chunk;
      if (seen.length < SNIFF_BYTES && CLIENT_PREFACE.subarray(0, seen.length).equals(seen)) return;
      socket.removeListener("data", onData);
      if (seen.subarray(0, SNIFF_BYTES).equals(CLIENT_PREFACE.subarray(0, SNIFF_BYTES))) {
        this.admitHttp2(socket, seen);
      } else {
        socket.pause();
        socket.unshift(seen);
        this.adoptHttp1(socket);
        // The HTTP/1 parser reads from the handle; the sniffed bytes come from the JS buffer.
        socket.resume();
      }
    };
    socket.on("data", onData);
  }

  private onTlsConnection(socket: tls.TLSSocket): void {
    if (this.closing) {
      socket.destroy();
      return;
    }
    socket.on("error", () => {});
    const refused = this.options.tls?.check?.(socket);
    if (refused !== undefined) {
      this.options.tls?.onRefused?.(`${socket.remoteAddress}:${socket.remotePort}`, refused);
      socket.destroy();
      return;
    }
    tagClientIdentity(socket, socket);
    if (socket.alpnProtocol === "h2") this.admitHttp2(socket, undefined);
    else this.adoptHttp1(socket);
  }

  /**
   * An HTTP/2 connection goes to nghttp2 once its first request is read:
   * natively, or through the AuthorityRewriter if its :authority is one
   * nghttp2 would refuse (see first-request-gate.ts).
   */
  private admitHttp2(socket: Socket, initial: Buffer | undefined): void {
    if (this.engine === "own") {
      const connection = new H2Connection(socket, initial, { maxConcurrentStreams: this.maxConcurrentStreams, keepalive: this.keepalive, pingAckHoldMs: this.pingAckHoldMs }, this.connectionHost);
      if (!connection.closed) this.ownConnections.add(connection);
      if (this.closing) connection.close();
      return;
    }
    const gate = new FirstRequestGate(socket, this.probeOptions, {
      deliver: (stream) => {
        this.gates.delete(gate);
        if (stream !== socket && socket instanceof tls.TLSSocket) {
          tagClientIdentity(stream, socket);
          markEncrypted(stream);
        }
        if (stream instanceof RewritingStream) this.rewrittenConnections++;
        this.h2.emit("connection", stream);
      },
      closed: () => this.gates.delete(gate),
    });
    this.gates.add(gate);
    gate.start(initial);
  }

  private adoptHttp1(socket: Socket): void {
    this.http1Sockets.add(socket);
    socket.once("close", () => this.http1Sockets.delete(socket));
    this.h1.emit("connection", socket);
  }

  private onSession(session: ServerHttp2Session): void {
    this.sessions.add(session);
    session.on("error", () => {});
    session.once("close", () => this.sessions.delete(session));
    (session as KeepaliveSession)[kKeepalive] = new SessionKeepalive(session, this.keepalive);
    session.once("connect", () => {
      if (!session.destroyed) session.setLocalWindowSize(SESSION_WINDOW_BYTES);
    });
    if (this.closing) session.close();
  }

  // ---- streams ----

  private onStream(stream: ServerHttp2Stream, headers: IncomingHttpHeaders, connection?: CallConnection): void {
    const contentType = headers["content-type"];
    if (headers[":method"] !== "POST" || !isGrpcContentType(contentType)) {
      serveHttp2(stream, headers, this.httpHandler);
      return;
    }
    // grpc-go reads the headers before it looks the method up, and resets the stream of a malformed
    // grpc-timeout with PROTOCOL_ERROR, sending no status (a grpc-go client reports INTERNAL).
    let timeoutMs: number | undefined;
    const timeoutHeader = headers["grpc-timeout"];
    if (timeoutHeader !== undefined) {
      timeoutMs = parseGrpcTimeout(timeoutHeader as string);
      if (timeoutMs === undefined) {
        stream.on("error", () => {});
        if (!stream.destroyed) stream.close(NGHTTP2_PROTOCOL_ERROR);
        return;
      }
    }
    const path = headers[":path"] ?? "";
    const registered = this.methods.get(path);
    if (!registered) {
      const error = this.unknownMethod(path);
      respondTrailersOnly(stream, error.code, error.message);
      return;
    }
    const keepalive = connection ?? (stream.session as KeepaliveSession | undefined)?.[kKeepalive];
    const call = new Http2Call(stream, headers, registered, this, timeoutMs, keepalive);
    this.calls.add(call);
  }

  /**
   * grpc-go's answer to a path no handler serves (its handleStream): one leading "/" dropped, the
   * rest split at its last "/" into service and method; with no "/" left the path is malformed
   * (RESOURCE_EXHAUSTED, the path quoted as Go's %q does), else UNIMPLEMENTED naming the unknown
   * service or method.
   */
  private unknownMethod(path: string): GrpcError {
    const name = path.startsWith("/") ? path.slice(1) : path;
    const slash = name.lastIndexOf("/");
    if (slash === -1) return new GrpcError(Status.RESOURCE_EXHAUSTED, `malformed method name: ${goQuote(path)}`);
    const service = name.slice(0, slash);
    const method = name.slice(slash + 1);
    if (!this.services.has(service)) {
      return new GrpcError(Status.UNIMPLEMENTED, `unknown service ${service}`);
    }
    const known = this.codecs.service(service).some((d) => d.name === method);
    return new GrpcError(
      Status.UNIMPLEMENTED,
      known ? `method ${method} not implemented` : `unknown method ${method} for service ${service}`,
    );
  }
}
