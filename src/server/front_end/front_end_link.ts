/**
 * The core's side of one front end's pipe: every gRPC call the front end forwards runs the
 * member's handlers as a PipeCall; every plain HTTP request (the JSON gateway, /health, /version,
 * /metrics on the client URLs) runs the member's HTTP handler through the same `respond` the
 * single-process server uses, so both answer byte for byte alike.
 */
import { PassThrough } from "node:stream";
import type { Socket } from "node:net";
import type { CallObserver, RegisteredMethod } from "../../grpc/call.js";
import { type HttpExchange, type HttpHandler, makeRequest, respond } from "../../grpc/http.js";
import { GrpcError, Status } from "../../grpc/status.js";
import { type Frame, FrameError, FrameKind } from "./frame.js";
import { FramePipe } from "./pipe.js";
import { headersFromPairs, PipeCall, type PipeCallHost } from "./pipe_call.js";

export interface FrontEndLinkOptions {
  /** The registered method at a gRPC path, or the error a call to it gets (GrpcServer.method). */
  method(path: string): RegisteredMethod | GrpcError;
  http: HttpHandler;
  observer: CallObserver | undefined;
  maxSendMessageBytes: number;
  /** The front end listens on every client URL. */
  onListening(): void;
  /** The pipe closed; `error` when a frame was malformed. */
  onClosed(error: Error | undefined): void;
}

/** One plain HTTP exchange forwarded by the front end. */
class PipeHttp implements HttpExchange {
  readonly source = new PassThrough();
  private readonly id: number;
  private readonly link: FrontEndLink;
  private head: { status: number; headers: string[] } | undefined;
  private headSent = false;
  private done = false;
  private clientPaused = false;
  private resumeWaiters: (() => void)[] = [];
  private closeListeners: (() => void)[] = [];

  constructor(id: number, link: FrontEndLink) {
    this.id = id;
    this.link = link;
  }

  writeHead(status: number, headers: Record<string, string>): void {
    const pairs: string[] = [];
    for (const key of Object.keys(headers)) pairs.push(key, headers[key]!);
    this.head = { status, headers: pairs };
  }

  write(chunk: string | Uint8Array): Promise<void> {
    if (this.done) return Promise.resolve();
    this.sendHead();
    this.link.pipe.send(FrameKind.HttpChunk, this.id, [toBuffer(chunk)]);
    return this.writable();
  }

  end(chunk?: string | Uint8Array, trailers?: Record<string, string>): void {
    if (this.done) return;
    const trailerPairs: string[] = [];
    if (trailers) for (const key of Object.keys(trailers)) trailerPairs.push(key, trailers[key]!);
    const hasTrailers = trailers === undefined ? 0 : 1;
    if (!this.headSent) {
      // A whole response in one frame: the front end ends its response with the body, as today
      // (a Content-Length, not chunked transfer).
      const head = this.head ?? { status: 200, headers: [] };
      this.headSent = true;
      const body = chunk === undefined ? Buffer.alloc(0) : toBuffer(chunk);
      this.link.pipe.send(FrameKind.HttpWhole, this.id, [head.status, head.headers, chunk === undefined ? 0 : 1, body, hasTrailers, trailerPairs]);
    } else {
      if (chunk !== undefined) this.link.pipe.send(FrameKind.HttpChunk, this.id, [toBuffer(chunk)]);
      this.link.pipe.send(FrameKind.HttpEnd, this.id, [hasTrailers, trailerPairs]);
    }
    // node's response emits 'close' after it finishes too: the handler's signal then aborts alike.
    this.closed();
  }

  onClose(listener: () => void): void {
    if (this.done) listener();
    else this.closeListeners.push(listener);
  }

  writePaused(paused: boolean): void {
    this.clientPaused = paused;
    if (!paused) this.releaseWaiters();
  }

  /** The client went away, or the front end died. */
  closed(): void {
    if (this.done) return;
    this.done = true;
    this.link.httpEnded(this.id);
    if (!this.source.writableEnded) this.source.end();
    this.releaseWaiters();
    const listeners = this.closeListeners;
    this.closeListeners = [];
    for (const listener of listeners) listener();
  }

  /** The handler failed while streaming: the front end drops the connection, as `respond`'s caller does. */
  abort(): void {
    if (this.done) return;
    this.link.pipe.send(FrameKind.Cancel, this.id, [Status.CANCELLED]);
    this.closed();
  }

  private sendHead(): void {
    if (this.headSent) return;
    this.headSent = true;
    const head = this.head ?? { status: 200, headers: [] };
    this.link.pipe.send(FrameKind.HttpHead, this.id, [head.status, head.headers]);
  }

  private async writable(): Promise<void> {
    await this.link.pipe.whenWritable();
    while (this.clientPaused && !this.done) await new Promise<void>((resolve) => this.resumeWaiters.push(resolve));
  }

  private releaseWaiters(): void {
    const waiters = this.resumeWaiters;
    this.resumeWaiters = [];
    for (const resolve of waiters) resolve();
  }
}

function toBuffer(chunk: string | Uint8Array): Buffer {
  if (typeof chunk === "string") return Buffer.from(chunk, "utf8");
  return Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
}

export class FrontEndLink implements PipeCallHost {
  readonly pipe: FramePipe;
  readonly observer: CallObserver | undefined;
  readonly maxSendMessageBytes: number;
  private readonly options: FrontEndLinkOptions;
  private readonly calls = new Map<number, PipeCall>();
  private readonly exchanges = new Map<number, PipeHttp>();

  constructor(socket: Socket, options: FrontEndLinkOptions) {
    this.options = options;
    this.observer = options.observer;
    this.maxSendMessageBytes = options.maxSendMessageBytes;
    this.pipe = new FramePipe(socket, { frame: (frame) => this.onFrame(frame), closed: (error) => this.onClosed(error) });
  }

  /** Calls and exchanges in flight. */
  get inFlight(): number {
    return this.calls.size + this.exchanges.size;
  }

  callEnded(id: number): void {
    this.calls.delete(id);
  }

  httpEnded(id: number): void {
    this.exchanges.delete(id);
  }

  /** Asks the front end to stop: it closes its listeners, lets its calls finish, then exits. */
  close(): void {
    this.pipe.send(FrameKind.Close, 0, []);
  }

  private onFrame(frame: Frame): void {
    switch (frame.kind) {
      case FrameKind.Call: {
        const [path, headerPairs, peer, commonName, deadline, message] = frame.values;
        const registered = this.options.method(path);
        if (registered instanceof GrpcError) {
          this.pipe.send(FrameKind.Status, frame.id, [registered.code, registered.message, []]);
          return;
        }
        const call = new PipeCall(frame.id, this, registered, {
          headers: headersFromPairs(headerPairs),
          peer,
          clientCertCommonName: commonName === "" ? undefined : commonName,
          deadline: deadline === 0 ? undefined : deadline,
        });
        this.calls.set(frame.id, call);
        call.start(message);
        return;
      }
      case FrameKind.Message:
        this.calls.get(frame.id)?.received(frame.values[0]);
        return;
      case FrameKind.HalfClose:
        this.calls.get(frame.id)?.halfClosed();
        return;
      case FrameKind.Cancel: {
        const code = frame.values[0] as Status;
        this.calls.get(frame.id)?.cancelledByClient(code);
        this.exchanges.get(frame.id)?.closed();
        return;
      }
      case FrameKind.WritePause:
      case FrameKind.WriteResume: {
        const paused = frame.kind === FrameKind.WritePause;
        this.calls.get(frame.id)?.writePaused(paused);
        this.exchanges.get(frame.id)?.writePaused(paused);
        return;
      }
      case FrameKind.HttpRequest:
        this.startHttp(frame.id, frame.values);
        return;
      case FrameKind.HttpBody:
        this.exchanges.get(frame.id)?.source.write(frame.values[0]);
        return;
      case FrameKind.HttpBodyEnd:
        this.exchanges.get(frame.id)?.source.end();
        return;
      case FrameKind.Listening:
        this.options.onListening();
        return;
      default:
        // A core → front end kind coming the other way is a bug in one of the two: the pipe closes.
        throw new FrameError(`front end sent frame kind ${frame.kind}, which only the core sends`);
    }
  }

  private startHttp(id: number, values: Extract<Frame, { kind: typeof FrameKind.HttpRequest }>["values"]): void {
    const [method, url, headerPairs, version, host, secure] = values;
    const exchange = new PipeHttp(id, this);
    this.exchanges.set(id, exchange);
    const request = makeRequest(method, url, headersFromPairs(headerPairs), version === 1 ? "1.1" : "2", exchange, { host, secure: secure === 1 });
    respond(exchange, this.options.http, request).catch(() => exchange.abort());
  }

  private onClosed(error: Error | undefined): void {
    // The front end died: its calls end as a closed connection's do, and their handlers let go.
    for (const call of [...this.calls.values()]) call.cancelledByClient(Status.CANCELLED);
    for (const exchange of [...this.exchanges.values()]) exchange.closed();
    this.options.onClosed(error);
  }
}
