/**
 * The front end's side of its pipe to the core: handlers for every method of the client port that
 * forward the call, undecoded, and a plain-HTTP handler that forwards the request. The front end's
 * GrpcServer runs them with raw-bytes codecs (rawServiceTable), so TLS, HTTP/2, HPACK, gRPC framing
 * and the size limits run here, and the protobuf and the member's handlers in the core.
 */
import type { Socket } from "node:net";
import { frameMessage } from "../../grpc/framing.js";
import type { BidiCall, CallContext, ServerReadable, ServerWritable } from "../../grpc/handler.js";
import type { HttpHandler, HttpRequest, HttpResponse } from "../../grpc/http.js";
import { HeaderMetadata } from "../../grpc/metadata.js";
import type { ServiceTable } from "../../grpc/server.js";
import { GrpcError, Status } from "../../grpc/status.js";
import type { MessageCodec, MethodDescriptor } from "../../pb/codec.js";
import { type Frame, FrameError, FrameKind } from "./frame.js";
import { FramePipe } from "./pipe.js";
import { headersToPairs, metadataToPairs } from "./pipe_call.js";

/** A codec that leaves messages as bytes: the front end forwards them, the core decodes. */
const RAW_CODEC: MessageCodec<unknown> = {
  typeName: "bytes",
  decode: (buf: Buffer): unknown => buf,
  encode: (msg: unknown): Buffer => msg as Buffer,
  encodeFramed: (msg: unknown): Buffer => frameMessage(msg as Buffer),
};

/** The services of `codecs` with every message left as bytes. */
export function rawServiceTable(codecs: ServiceTable): ServiceTable {
  const cache = new Map<string, readonly MethodDescriptor[]>();
  return {
    service(name: string): readonly MethodDescriptor[] {
      let methods = cache.get(name);
      if (methods === undefined) {
        methods = codecs.service(name).map((d) => ({ ...d, request: RAW_CODEC, response: RAW_CODEC }));
        cache.set(name, methods);
      }
      return methods;
    },
  };
}

function pairsToRecord(pairs: readonly string[]): Record<string, string> {
  const record: Record<string, string> = {};
  for (let i = 0; i < pairs.length; i += 2) record[pairs[i]!] = pairs[i + 1]!;
  return record;
}

/** A call in flight to the core. */
class ForwardedCall {
  done = false;
  private pauseSent = false;

  constructor(
    private readonly link: CoreLink,
    private readonly id: number,
    private readonly writable: ServerWritable<Buffer> | undefined,
    private readonly readable: ServerReadable<Buffer> | undefined,
    private readonly settle: { resolve(bytes: Buffer): void; reject(error: GrpcError): void } | undefined,
  ) {}

  reply(bytes: Buffer): void {
    this.finish();
    this.settle?.resolve(bytes);
  }

  response(bytes: Buffer): void {
    const writable = this.writable;
    if (writable === undefined || this.done) return;
    if (writable.write(bytes) || this.pauseSent) return;
    // The client is slow: the core stops sending until its HTTP/2 stream has room again.
    this.pauseSent = true;
    this.link.pipe.send(FrameKind.WritePause, this.id, []);
    void writable.drain().then(() => {
      this.pauseSent = false;
      if (!this.done) this.link.pipe.send(FrameKind.WriteResume, this.id, []);
    });
  }

  status(code: number, message: string, trailerPairs: readonly string[]): void {
    this.finish();
    const error = code === Status.OK ? undefined : new GrpcError(code as Status, message, trailerPairs.length === 0 ? undefined : pairsToRecord(trailerPairs));
    if (this.settle !== undefined) {
      if (error !== undefined) this.settle.reject(error);
      else this.settle.reject(new GrpcError(Status.INTERNAL, "the core ended a unary call without a response"));
    } else if (error !== undefined) this.writable?.fail(error);
    else this.writable?.end();
  }

  readPaused(paused: boolean): void {
    if (paused) this.readable?.pause();
    else this.readable?.resume();
  }

  /** The client's side ended first: tell the core, which lets the handler go. */
  clientGone(reason: unknown): void {
    if (this.done) return;
    this.finish();
    this.link.pipe.send(FrameKind.Cancel, this.id, [reason instanceof GrpcError ? reason.code : Status.CANCELLED]);
  }

  private finish(): void {
    this.done = true;
    this.link.forget(this.id);
  }
}

/** A streamed HTTP response body coming from the core; pauses the core when the client lags. */
class ChunkQueue implements AsyncIterable<Uint8Array> {
  private chunks: Buffer[] = [];
  private ended = false;
  private error: Error | undefined;
  private waiter: (() => void) | undefined;
  private pauseSent = false;

  constructor(private readonly onPause: (paused: boolean) => void) {}

  push(chunk: Buffer): void {
    this.chunks.push(chunk);
    if (this.chunks.length >= CHUNKS_QUEUED_MAX && !this.pauseSent) {
      this.pauseSent = true;
      this.onPause(true);
    }
    this.wake();
  }

  end(error?: Error): void {
    this.ended = true;
    this.error = error;
    this.wake();
  }

  private wake(): void {
    const waiter = this.waiter;
    this.waiter = undefined;
    waiter?.();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<Uint8Array> {
    for (;;) {
      const chunk = this.chunks.shift();
      if (chunk !== undefined) {
        if (this.chunks.length === 0 && this.pauseSent) {
          this.pauseSent = false;
          this.onPause(false);
        }
        yield chunk;
        continue;
      }
      if (this.error !== undefined) throw this.error;
      if (this.ended) return;
      await new Promise<void>((resolve) => (this.waiter = resolve));
    }
  }
}

/** Chunks of a streamed HTTP response held for a slow client before the core is paused. */
const CHUNKS_QUEUED_MAX = 16;

/** A plain HTTP exchange in flight to the core. */
class ForwardedHttp {
  done = false;
  private response: HttpResponse | undefined;
  private body: ChunkQueue | undefined;

  constructor(
    private readonly link: CoreLink,
    private readonly id: number,
    private readonly resolve: (response: HttpResponse) => void,
    private readonly reject: (error: Error) => void,
  ) {}

  whole(values: Extract<Frame, { kind: typeof FrameKind.HttpWhole }>["values"]): void {
    const [status, headers, hasBody, body, hasTrailers, trailers] = values;
    this.finish();
    this.resolve({ status, headers: pairsToRecord(headers), body: hasBody === 1 ? body : undefined, trailers: hasTrailers === 1 ? pairsToRecord(trailers) : undefined });
  }

  head(status: number, headers: readonly string[]): void {
    const link = this.link;
    const id = this.id;
    this.body = new ChunkQueue((paused) => link.pipe.send(paused ? FrameKind.WritePause : FrameKind.WriteResume, id, []));
    this.response = { status, headers: pairsToRecord(headers), body: this.body };
    this.resolve(this.response);
  }

  chunk(bytes: Buffer): void {
    this.body?.push(bytes);
  }

  end(hasTrailers: number, trailers: readonly string[]): void {
    this.finish();
    if (this.response !== undefined && hasTrailers === 1) this.response.trailers = pairsToRecord(trailers);
    this.body?.end();
  }

  /** The core gave up on the response (its handler failed mid-body), or the core is gone. */
  aborted(): void {
    this.finish();
    const error = new Error("the member's core ended the response");
    if (this.body !== undefined) this.body.end(error);
    else this.reject(error);
  }

  clientGone(): void {
    if (this.done) return;
    this.finish();
    this.body?.end();
    this.link.pipe.send(FrameKind.Cancel, this.id, [Status.CANCELLED]);
  }

  private finish(): void {
    this.done = true;
    this.link.forget(this.id);
  }
}

export interface CoreLinkEvents {
  /** The core asked this front end to stop. */
  close(): void;
  /** The pipe to the core closed (the core exited or died), or a frame was malformed. */
  lost(error: Error | undefined): void;
}

/** Ids of calls and exchanges are u32 and wrap; one in flight that long is never reused (the map is checked). */
const ID_MAX = 2 ** 32 - 1;

export class CoreLink {
  readonly pipe: FramePipe;
  private readonly inFlight = new Map<number, ForwardedCall | ForwardedHttp>();
  private lastId = 0;

  constructor(socket: Socket, private readonly events: CoreLinkEvents) {
    this.pipe = new FramePipe(socket, { frame: (frame) => this.onFrame(frame), closed: (error) => this.onLost(error) });
  }

  forget(id: number): void {
    this.inFlight.delete(id);
  }

  /** Handlers for every method of `service` in `table`, forwarding each call by its kind. */
  forwardingHandlers(table: ServiceTable, service: string): Record<string, (...args: never[]) => unknown> {
    const handlers: Record<string, (...args: never[]) => unknown> = {};
    for (const method of table.service(service)) {
      if (!method.requestStream && !method.responseStream) {
        handlers[method.name] = (request: Buffer, ctx: CallContext) =>
          new Promise<Buffer>((resolve, reject) => this.start(ctx, request, undefined, undefined, { resolve, reject }));
      } else if (!method.requestStream) {
        handlers[method.name] = (request: Buffer, call: ServerWritable<Buffer>, ctx: CallContext) => void this.start(ctx, request, call, undefined, undefined);
      } else if (!method.responseStream) {
        handlers[method.name] = (call: ServerReadable<Buffer>, ctx: CallContext) =>
          new Promise<Buffer>((resolve, reject) => this.streamRequests(call, this.start(ctx, EMPTY, undefined, call, { resolve, reject })));
      } else {
        handlers[method.name] = (call: BidiCall<Buffer, Buffer>, ctx: CallContext) => this.streamRequests(call, this.start(ctx, EMPTY, call, call, undefined));
      }
    }
    return handlers;
  }

  /** The handler of plain HTTP requests: forwarded whole or streamed, as the core's handler answers. */
  readonly http: HttpHandler = (request: HttpRequest) =>
    new Promise<HttpResponse>((resolve, reject) => {
      const id = this.nextId();
      const exchange = new ForwardedHttp(this, id, resolve, reject);
      this.inFlight.set(id, exchange);
      const pipe = this.pipe;
      pipe.send(FrameKind.HttpRequest, id, [request.method, request.url, headersToPairs(request.headers), request.httpVersion === "1.1" ? 1 : 2, request.host, request.secure ? 1 : 0]);
      request.readBody(
        (chunk) => {
          if (!exchange.done) pipe.send(FrameKind.HttpBody, id, [chunk]);
        },
        () => {
          if (!exchange.done) pipe.send(FrameKind.HttpBodyEnd, id, []);
        },
      );
      request.signal.addEventListener("abort", () => exchange.clientGone(), { once: true });
    });

  private start(
    ctx: CallContext,
    message: Buffer,
    writable: ServerWritable<Buffer> | undefined,
    readable: ServerReadable<Buffer> | undefined,
    settle: { resolve(bytes: Buffer): void; reject(error: GrpcError): void } | undefined,
  ): number {
    const id = this.nextId();
    const call = new ForwardedCall(this, id, writable, readable, settle);
    this.inFlight.set(id, call);
    const metadata = ctx.metadata;
    const headers = metadata instanceof HeaderMetadata ? metadataToPairs(metadata.rawHeaders) : flatten(metadata.toRecord());
    this.pipe.send(FrameKind.Call, id, [ctx.method, headers, ctx.peer, ctx.clientCertCommonName ?? "", ctx.deadline ?? 0, message]);
    const signal = ctx.signal;
    if (signal.aborted) call.clientGone(signal.reason);
    else signal.addEventListener("abort", () => call.clientGone(signal.reason), { once: true });
    return id;
  }

  private streamRequests(call: ServerReadable<Buffer>, id: number): void {
    const pipe = this.pipe;
    call.onMessage((message) => {
      if (this.inFlight.has(id)) pipe.send(FrameKind.Message, id, [message]);
    });
    call.onEnd(() => {
      if (this.inFlight.has(id)) pipe.send(FrameKind.HalfClose, id, []);
    });
  }

  private nextId(): number {
    do this.lastId = this.lastId === ID_MAX ? 1 : this.lastId + 1;
    while (this.inFlight.has(this.lastId));
    return this.lastId;
  }

  private onFrame(frame: Frame): void {
    if (frame.kind === FrameKind.Close) {
      this.events.close();
      return;
    }
    const target = this.inFlight.get(frame.id);
    if (target === undefined) return; // the client went away and the core's answer crossed our Cancel
    if (target instanceof ForwardedCall) {
      switch (frame.kind) {
        case FrameKind.Reply:
          return target.reply(frame.values[0]);
        case FrameKind.Response:
          return target.response(frame.values[0]);
        case FrameKind.Status:
          return target.status(frame.values[0], frame.values[1], frame.values[2]);
        case FrameKind.ReadPause:
        case FrameKind.ReadResume:
          return target.readPaused(frame.kind === FrameKind.ReadPause);
      }
    } else {
      switch (frame.kind) {
        case FrameKind.HttpWhole:
          return target.whole(frame.values);
        case FrameKind.HttpHead:
          return target.head(frame.values[0], frame.values[1]);
        case FrameKind.HttpChunk:
          return target.chunk(frame.values[0]);
        case FrameKind.HttpEnd:
          return target.end(frame.values[0], frame.values[1]);
        case FrameKind.Cancel:
          return target.aborted();
      }
    }
    throw new FrameError(`frame kind ${frame.kind} does not fit ${target instanceof ForwardedCall ? "a gRPC call" : "an HTTP exchange"}`);
  }

  private onLost(error: Error | undefined): void {
    for (const target of [...this.inFlight.values()]) {
      if (target instanceof ForwardedCall) target.status(Status.UNAVAILABLE, "transport is closing", []);
      else target.aborted();
    }
    this.events.lost(error);
  }
}

const EMPTY = Buffer.alloc(0);

function flatten(record: Record<string, string[]>): string[] {
  const pairs: string[] = [];
  for (const key of Object.keys(record)) for (const v of record[key]!) pairs.push(key, v);
  return pairs;
}

