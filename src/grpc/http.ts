/**
 * Plain HTTP on the client port: requests that are not gRPC (HTTP/1.1, or
 * HTTP/2 without an application/grpc content type) go to one pluggable handler,
 * as etcd's client port serves /metrics, /health, /version and the JSON gateway
 * beside gRPC. The handler sees a transport-neutral request; with no handler, or
 * when it returns undefined, the answer is Go's 404 "404 page not found".
 */

import type { IncomingMessage, ServerResponse } from "node:http";
import type { IncomingHttpHeaders, ServerHttp2Stream } from "node:http2";

export interface HttpRequest {
  readonly method: string;
  /** Path and query, e.g. "/health?serializable=true". */
  readonly url: string;
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  readonly httpVersion: "1.1" | "2";
  /** Go's Request.Host: the Host header (HTTP/1.1) or :authority (HTTP/2), "" when absent. */
  readonly host: string;
  /** The request came over TLS (Go's req.TLS != nil). */
  readonly secure: boolean;
  /** Aborted when the client goes away before the response is complete. */
  readonly signal: AbortSignal;
  /** Reads the whole body; rejects with HttpError(413) past limitBytes. */
  body(limitBytes: number): Promise<Buffer>;
  /**
   * Reads the body as it arrives, for requests that stream (the gateway's watch): chunks in
   * order, then `onEnd` (also when the client goes away). The returned switch pauses reading.
   */
  readBody(onChunk: (chunk: Buffer) => void, onEnd: () => void): BodyFlow;
}

/** Pauses and resumes reading a request body (the transport's flow control pushes back). */
export interface BodyFlow {
  pause(): void;
  resume(): void;
}

export interface HttpResponse {
  status: number;
  headers?: Record<string, string>;
  /** A whole body, or a stream of chunks (written with backpressure). */
  body?: string | Uint8Array | AsyncIterable<string | Uint8Array>;
  /** HTTP/1.1 trailers sent after the body (announce them in a `Trailer` header). */
  trailers?: Record<string, string>;
}

export type HttpHandler = (request: HttpRequest) => Promise<HttpResponse | undefined> | HttpResponse | undefined;

export class HttpError extends Error {
  readonly status: number;
  constructor(status: number, message: string) {
    super(message);
    this.name = "HttpError";
    this.status = status;
  }
}

const NOT_FOUND: HttpResponse = {
  status: 404,
  headers: { "content-type": "text/plain; charset=utf-8" },
  body: "404 page not found\n",
};

/** The transport side of one plain HTTP exchange (a front end's pipe is one too: src/server/front_end). */
export interface HttpExchange {
  readonly source: NodeJS.ReadableStream & { destroyed: boolean };
  writeHead(status: number, headers: Record<string, string>): void;
  /** Writes a chunk; resolves when the transport can take more. */
  write(chunk: string | Uint8Array): Promise<void>;
  end(chunk?: string | Uint8Array, trailers?: Record<string, string>): void;
  onClose(listener: () => void): void;
}

function readBody(source: HttpExchange["source"], limitBytes: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer): void => {
      size += chunk.length;
      if (size > limitBytes) {
        source.removeListener("data", onData);
        source.resume();
        reject(new HttpError(413, `request body larger than ${limitBytes} bytes`));
        return;
      }
      parts.push(chunk);
    };
    source.on("data", onData);
    source.once("end", () => resolve(Buffer.concat(parts, size)));
    source.once("error", reject);
  });
}

/** The handler's view of one exchange. */
export function makeRequest(
  method: string,
  url: string,
  headers: Record<string, string | string[] | undefined>,
  httpVersion: "1.1" | "2",
  exchange: HttpExchange,
  via: { host: string; secure: boolean },
): HttpRequest {
  let controller: AbortController | undefined;
  let closed = false;
  exchange.onClose(() => {
    closed = true;
    controller?.abort(new Error("client went away"));
  });
  return {
    method,
    url,
    headers,
    httpVersion,
    host: via.host,
    secure: via.secure,
    get signal(): AbortSignal {
      if (!controller) {
        controller = new AbortController();
        if (closed) controller.abort(new Error("client went away"));
      }
      return controller.signal;
    },
    body: (limitBytes: number) => readBody(exchange.source, limitBytes),
    readBody: (onChunk, onEnd) => {
      const source = exchange.source;
      let ended = false;
      const end = (): void => {
        if (ended) return;
        ended = true;
        onEnd();
      };
      source.on("data", (chunk: Buffer) => onChunk(chunk));
      source.once("end", end);
      source.once("error", end);
      exchange.onClose(end);
      return { pause: () => void source.pause(), resume: () => void source.resume() };
    },
  };
}

/** Runs the handler on a request and writes its response (or its error, or 404) to the exchange. */
export async function respond(exchange: HttpExchange, handler: HttpHandler | undefined, request: HttpRequest): Promise<void> {
  let response: HttpResponse | undefined;
  try {
    response = handler ? await handler(request) : undefined;
  } catch (err) {
    const status = err instanceof HttpError ? err.status : 500;
    response = { status, headers: { "content-type": "text/plain; charset=utf-8" }, body: `${(err as Error).message}\n` };
  }
  response ??= NOT_FOUND;
  exchange.writeHead(response.status, response.headers ?? {});
  const body = response.body;
  if (body === undefined || typeof body === "string" || body instanceof Uint8Array) {
    exchange.end(body, response.trailers);
    return;
  }
  try {
    for await (const chunk of body) {
      if (request.signal.aborted) break;
      await exchange.write(chunk);
    }
  } finally {
    exchange.end(undefined, response.trailers);
  }
}

/** Serves one HTTP/1.1 request. */
export function serveHttp1(req: IncomingMessage, res: ServerResponse, handler: HttpHandler | undefined): void {
  const exchange: HttpExchange = {
    source: req,
    writeHead: (status, headers) => void res.writeHead(status, headers),
    write: (chunk) => (res.write(chunk) ? Promise.resolve() : new Promise((r) => res.once("drain", r))),
    end: (chunk, trailers) => {
      if (trailers !== undefined) {
        if (chunk !== undefined) res.write(chunk);
        res.addTrailers(trailers);
        res.end();
      } else if (chunk === undefined) res.end();
      else res.end(chunk);
    },
    onClose: (listener) => void res.once("close", listener),
  };
  const request = makeRequest(req.method ?? "GET", req.url ?? "/", req.headers, "1.1", exchange, { host: req.headers.host ?? "", secure: isEncrypted(req.socket) });
  respond(exchange, handler, request).catch(() => res.destroy());
}

/**
 * Whether a connection's socket is TLS: a TLSSocket says so itself; the stream the server hands
 * node:http2 in its place (first-request-gate.ts) is marked by markEncrypted.
 */
function isEncrypted(socket: object | null | undefined): boolean {
  return socket != null && (socket as { encrypted?: unknown }).encrypted === true;
}

/** Marks a stream standing in for a TLS socket as encrypted (read by isEncrypted). */
export function markEncrypted(stream: object): void {
  (stream as { encrypted?: boolean }).encrypted = true;
}

/** Serves one HTTP/2 stream that is not a gRPC call. */
export function serveHttp2(stream: ServerHttp2Stream, headers: IncomingHttpHeaders, handler: HttpHandler | undefined): void {
  stream.on("error", () => {});
  const exchange: HttpExchange = {
    source: stream,
    writeHead: (status, responseHeaders) => {
      // No trailers follow on HTTP/2 here (see end), so none are announced.
      const { trailer: _announced, ...headers } = responseHeaders;
      if (!stream.destroyed) stream.respond({ ":status": status, ...headers });
    },
    write: (chunk) => {
      if (stream.destroyed) return Promise.resolve();
      return stream.write(chunk) ? Promise.resolve() : new Promise((r) => stream.once("drain", r));
    },
    // HTTP/2 trailers would need waitForTrailers at respond time; plain HTTP/2 clients of the
    // gateway get the body without them.
    end: (chunk) => {
      if (!stream.destroyed) stream.end(chunk);
    },
    onClose: (listener) => void stream.once("close", listener),
  };
  const plain: Record<string, string | string[] | undefined> = {};
  for (const key of Object.keys(headers)) if (key.charCodeAt(0) !== 0x3a) plain[key] = headers[key];
  const via = { host: String(headers[":authority"] ?? headers.host ?? ""), secure: isEncrypted(stream.session?.socket) };
  const request = makeRequest(String(headers[":method"] ?? "GET"), String(headers[":path"] ?? "/"), plain, "2", exchange, via);
  respond(exchange, handler, request).catch(() => stream.destroy());
}
