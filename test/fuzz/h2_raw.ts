/**
 * A raw gRPC-over-HTTP/2 client on node:http2 for sending what no gRPC library would: any bytes
 * as DATA, any headers, resets and closes at any point. Each call ends in one RawOutcome that says
 * what the server did: a gRPC status, a plain HTTP answer, a reset, a dropped connection, or
 * nothing before the wait ran out (a hang).
 */
import http2, { type ClientHttp2Session, type ClientHttp2Stream } from "node:http2";

const { NGHTTP2_CANCEL } = http2.constants;

export type RawOutcome =
  /** A gRPC status, in trailers or a trailers-only response. */
  | { kind: "status"; code: number; message: string; httpStatus: number; dataBytes: number }
  /** An HTTP response without grpc-status (e.g. a 404/415 for a non-gRPC content type). */
  | { kind: "http"; httpStatus: number; contentType: string; dataBytes: number }
  /** The server reset the stream before any status. */
  | { kind: "reset"; rstCode: number }
  /** The connection went away before any status. */
  | { kind: "closed"; error: string }
  /** We reset the stream ourselves on purpose (the case never waits for an answer). */
  | { kind: "abandoned" }
  /** No status within the wait: the server hung. */
  | { kind: "hang"; waitedMs: number };

export interface RawCall {
  readonly path: string;
  /** Replaces the default gRPC request headers; a value of undefined removes that header. */
  readonly headers?: Readonly<Record<string, string | undefined>>;
  /** DATA written in order, one write each. */
  readonly chunks: readonly Buffer[];
  /** Half-close after the chunks (default true); false leaves the request side open. */
  readonly endStream?: boolean;
  /** Reset the stream with CANCEL right after the chunks (no answer awaited). */
  readonly resetAfterChunks?: boolean;
  /** Longest time to wait for the answer before calling it a hang. */
  readonly waitMs: number;
}

export const DEFAULT_GRPC_HEADERS: Readonly<Record<string, string>> = {
  "content-type": "application/grpc",
  te: "trailers",
  "user-agent": "etcetera-fuzz/1",
};

/** gRPC's 5-byte prefix (compressed flag, big-endian length) in front of `payload`. */
export function grpcFrame(payload: Buffer, opts: { compressed?: boolean; declaredLength?: number } = {}): Buffer {
  const out = Buffer.allocUnsafe(5 + payload.length);
  out[0] = opts.compressed === true ? 1 : 0;
  out.writeUInt32BE(opts.declaredLength ?? payload.length, 1);
  payload.copy(out, 5);
  return out;
}

function decodeGrpcMessage(raw: string | undefined): string {
  if (raw === undefined) return "";
  try {
    return decodeURIComponent(raw);
  } catch {
    return raw;
  }
}

/** One HTTP/2 connection to a target, reopened when the server (or a case) closed it. */
export class RawH2Client {
  private session: ClientHttp2Session | undefined;
  /** GOAWAYs and session errors seen (a server dropping connections on bad input shows up here). */
  readonly sessionEvents: string[] = [];

  constructor(readonly endpoint: string) {}

  private connect(): ClientHttp2Session {
    if (this.session !== undefined && !this.session.closed && !this.session.destroyed) return this.session;
    const session = http2.connect(`http://${this.endpoint}`, { maxSessionMemory: 64 });
    session.on("error", (e) => this.sessionEvents.push(`error: ${(e as Error).message}`)); // surfaced per stream as 'closed'
    session.on("goaway", (code, last) => this.sessionEvents.push(`goaway from server: code ${code} last stream ${last}`));
    session.unref();
    this.session = session;
    return session;
  }

  /** Runs one call and reports what the server did. Never rejects. */
  call(c: RawCall): Promise<RawOutcome> {
    return runCall(this.connect(), c);
  }

  /** A fresh connection owned by the caller (for cases that kill their connection). */
  dedicated(): ClientHttp2Session {
    const session = http2.connect(`http://${this.endpoint}`);
    session.on("error", () => undefined);
    return session;
  }

  close(): void {
    this.session?.destroy();
    this.session = undefined;
  }
}

/** Sends one call on `session` (see RawCall). Never rejects. */
export function runCall(session: ClientHttp2Session, c: RawCall): Promise<RawOutcome> {
  return new Promise((resolve) => {
    const headers: Record<string, string> = { ":method": "POST", ":path": c.path };
    for (const [k, v] of Object.entries({ ...DEFAULT_GRPC_HEADERS, ...c.headers })) if (v !== undefined) headers[k] = v;
    let stream: ClientHttp2Stream;
    try {
      stream = session.request(headers, { endStream: false });
    } catch (e) {
      resolve({ kind: "closed", error: (e as Error).message });
      return;
    }
    let done = false;
    let httpStatus = 0;
    let responseHeaders: http2.IncomingHttpHeaders = {};
    let dataBytes = 0;
    const finish = (o: RawOutcome): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      // Reset only what the server has not finished: a reset of every answered stream would look
      // like the HTTP/2 rapid-reset attack, which the server rightly answers with GOAWAY.
      if ((o.kind === "hang" || o.kind === "abandoned") && !stream.destroyed) stream.close(NGHTTP2_CANCEL);
      resolve(o);
    };
    const timer = setTimeout(() => finish({ kind: "hang", waitedMs: c.waitMs }), c.waitMs);
    const fromHeaders = (h: http2.IncomingHttpHeaders): boolean => {
      const status = h["grpc-status"];
      if (status === undefined) return false;
      finish({ kind: "status", code: Number(status), message: decodeGrpcMessage(h["grpc-message"] as string | undefined), httpStatus, dataBytes });
      return true;
    };
    stream.on("response", (h) => {
      responseHeaders = h;
      httpStatus = Number(h[":status"] ?? 0);
      fromHeaders(h);
    });
    stream.on("trailers", (t) => fromHeaders(t));
    stream.on("data", (chunk: Buffer) => (dataBytes += chunk.length));
    stream.on("error", () => undefined);
    stream.on("close", () => {
      if (done) return;
      if (httpStatus !== 0 && stream.rstCode === http2.constants.NGHTTP2_NO_ERROR) {
        const ct = String(responseHeaders["content-type"] ?? "");
        finish({ kind: "http", httpStatus, contentType: ct, dataBytes });
      } else if (session.destroyed || session.closed) {
        finish({ kind: "closed", error: `session closed (rst ${stream.rstCode})` });
      } else {
        finish({ kind: "reset", rstCode: stream.rstCode ?? -1 });
      }
    });
    for (const chunk of c.chunks) stream.write(chunk);
    if (c.resetAfterChunks === true) {
      // Let the DATA leave before the reset, so the server sees the partial message first.
      setImmediate(() => finish({ kind: "abandoned" }));
      return;
    }
    if (c.endStream !== false) stream.end();
    stream.resume();
  });
}

/** A short label of an outcome, for comparing targets and for logs. */
export function outcomeKey(o: RawOutcome): string {
  switch (o.kind) {
    case "status":
      return `status:${o.code}`;
    case "http":
      return `http:${o.httpStatus}`;
    case "reset":
      return `reset:${o.rstCode}`;
    default:
      return o.kind;
  }
}
