/**
 * Serves the same handler objects over @grpc/grpc-js, for tests and for the
 * benchmark that compares it with the node:http2 server. Messages go through
 * the same compiled codecs, so only the transport differs.
 */

import type { EventEmitter } from "node:events";
import * as grpc from "@grpc/grpc-js";
import type { ProtoCodecs } from "../../src/pb/codec.js";
import type {
  AnyHandler,
  BidiHandler,
  CallContext,
  ClientStreamHandler,
  ServerReadable,
  ServerStreamHandler,
  ServerWritable,
  UnaryHandler,
} from "../../src/grpc/handler.js";
import { handlerOf, methodKind } from "../../src/grpc/handler.js";
import { type Metadata, RecordMetadata } from "../../src/grpc/metadata.js";
import { loadEtcdCodecs } from "../../src/pb/protos.js";
import { RequestQueue, cancelledError } from "../../src/grpc/request-queue.js";
import { GrpcError, Status, toGrpcError } from "../../src/grpc/status.js";
import { DEFAULT_MAX_REQUEST_BYTES, GRPC_OVERHEAD_BYTES, HTTP2_MAX_CONCURRENT_STREAMS_MAX } from "../../src/grpc/server.js";

export interface GrpcJsServerOptions {
  maxReceiveMessageBytes?: number;
  maxSendMessageBytes?: number;
  maxConcurrentStreams?: number;
  codecs?: ProtoCodecs;
}

type SurfaceCall = grpc.ServerUnaryCall<unknown, unknown> | grpc.ServerReadableStream<unknown, unknown> | WritableCall;

function toServiceError(err: unknown): Partial<grpc.StatusObject> & Error {
  const e = toGrpcError(err);
  const metadata = new grpc.Metadata();
  if (e.trailers) for (const [k, v] of Object.entries(e.trailers)) metadata.set(k, v);
  return Object.assign(new Error(e.message), { code: e.code as number as grpc.status, details: e.message, metadata });
}

class GrpcJsContext implements CallContext {
  readonly method: string;
  private readonly call: SurfaceCall;
  private controller: AbortController | undefined;
  private metadataView: Metadata | undefined;
  private isCancelled = false;

  constructor(call: SurfaceCall) {
    this.call = call;
    this.method = call.getPath();
    (call as EventEmitter).once("cancelled", () => {
      this.isCancelled = true;
      this.controller?.abort(cancelledError("context canceled"));
    });
  }

  get metadata(): Metadata {
    if (!this.metadataView) {
      const entries: Record<string, string[]> = {};
      const map = this.call.metadata.getMap();
      for (const key of Object.keys(map)) {
        entries[key] = this.call.metadata.get(key).map((v) => (Buffer.isBuffer(v) ? v.toString("base64") : v));
      }
      this.metadataView = new RecordMetadata(entries);
    }
    return this.metadataView;
  }

  get signal(): AbortSignal {
    if (!this.controller) {
      this.controller = new AbortController();
      if (this.isCancelled || this.call.cancelled) this.controller.abort(cancelledError("context canceled"));
    }
    return this.controller.signal;
  }

  get deadline(): number | undefined {
    const d = this.call.getDeadline();
    const ms = d instanceof Date ? d.getTime() : d;
    return Number.isFinite(ms) ? ms : undefined;
  }

  get peer(): string {
    return this.call.getPeer();
  }

  get cancelled(): boolean {
    return this.isCancelled || this.call.cancelled;
  }
}

type WritableCall = grpc.ServerWritableStream<unknown, unknown> | grpc.ServerDuplexStream<unknown, unknown>;

class GrpcJsWritable implements ServerWritable<unknown> {
  protected readonly call: WritableCall;
  private done = false;

  constructor(call: WritableCall) {
    this.call = call;
    call.once("cancelled", () => (this.done = true));
  }

  get ended(): boolean {
    return this.done;
  }

  write(message: unknown): boolean {
    if (this.done) return true;
    return this.call.write(message);
  }

  drain(): Promise<void> {
    if (this.done || !this.call.writableNeedDrain) return Promise.resolve();
    return new Promise((resolve) => {
      this.call.once("drain", resolve);
      this.call.once("cancelled", resolve);
    });
  }

  end(): void {
    if (this.done) return;
    this.done = true;
    this.call.end();
  }

  fail(error: GrpcError | Error): void {
    if (this.done) return;
    this.done = true;
    this.call.emit("error", toServiceError(error));
  }
}

type ReadableCall = grpc.ServerReadableStream<unknown, unknown> | grpc.ServerDuplexStream<unknown, unknown>;

function requestQueueOf(call: ReadableCall): RequestQueue<unknown> {
  const queue = new RequestQueue<unknown>(call);
  call.on("data", (m: unknown) => queue.push(m));
  call.once("end", () => queue.end());
  call.once("cancelled", () => queue.destroy(cancelledError("context canceled")));
  call.on("error", () => {});
  return queue;
}

class GrpcJsBidi extends GrpcJsWritable implements ServerReadable<unknown> {
  private readonly queue: RequestQueue<unknown>;

  constructor(call: grpc.ServerDuplexStream<unknown, unknown>) {
    super(call);
    this.queue = requestQueueOf(call);
  }

  onMessage(listener: (message: unknown) => void): void {
    this.queue.onMessage(listener);
  }
  onEnd(listener: () => void): void {
    this.queue.onEnd(listener);
  }
  pause(): void {
    this.queue.pause();
  }
  resume(): void {
    this.queue.resume();
  }
  [Symbol.asyncIterator](): AsyncIterator<unknown> {
    return this.queue[Symbol.asyncIterator]();
  }
}

function settle<T>(run: () => T | Promise<T>, ok: (value: T) => void, fail: (err: unknown) => void): void {
  let result: T | Promise<T>;
  try {
    result = run();
  } catch (err) {
    fail(err);
    return;
  }
  if (result instanceof Promise) result.then(ok, fail);
  else ok(result);
}

function wrap(kind: ReturnType<typeof methodKind>, handler: AnyHandler): grpc.UntypedHandleCall {
  switch (kind) {
    case "unary":
      return (call: grpc.ServerUnaryCall<unknown, unknown>, callback: grpc.sendUnaryData<unknown>) => {
        const ctx = new GrpcJsContext(call);
        settle(
          () => (handler as UnaryHandler<unknown, unknown>)(call.request, ctx),
          (res) => callback(null, res),
          (err) => callback(toServiceError(err)),
        );
      };
    case "serverStream":
      return (call: grpc.ServerWritableStream<unknown, unknown>) => {
        const ctx = new GrpcJsContext(call);
        const writable = new GrpcJsWritable(call);
        runStreaming(() => (handler as ServerStreamHandler<unknown, unknown>)(call.request, writable, ctx), writable);
      };
    case "clientStream":
      return (call: grpc.ServerReadableStream<unknown, unknown>, callback: grpc.sendUnaryData<unknown>) => {
        const ctx = new GrpcJsContext(call);
        const queue = requestQueueOf(call);
        settle(
          () => (handler as ClientStreamHandler<unknown, unknown>)(queue, ctx),
          (res) => callback(null, res),
          (err) => callback(toServiceError(err)),
        );
      };
    case "bidi":
      return (call: grpc.ServerDuplexStream<unknown, unknown>) => {
        const ctx = new GrpcJsContext(call);
        const bidi = new GrpcJsBidi(call);
        runStreaming(() => (handler as BidiHandler<unknown, unknown>)(bidi, ctx), bidi);
      };
  }
}

/** Applies the completion rule of handler.ts to a streaming handler's result. */
function runStreaming(run: () => Promise<void> | void, writable: ServerWritable<unknown>): void {
  let result: Promise<void> | void;
  try {
    result = run();
  } catch (err) {
    writable.fail(toGrpcError(err));
    return;
  }
  if (result instanceof Promise) {
    result.then(
      () => writable.end(),
      (err: unknown) => writable.fail(toGrpcError(err)),
    );
  }
}

/** The same services on a @grpc/grpc-js server. */
export class GrpcJsServer {
  private readonly server: grpc.Server;
  private readonly codecs: ProtoCodecs;

  constructor(options: GrpcJsServerOptions = {}) {
    this.codecs = options.codecs ?? loadEtcdCodecs();
    this.server = new grpc.Server({
      "grpc.max_receive_message_length": options.maxReceiveMessageBytes ?? DEFAULT_MAX_REQUEST_BYTES + GRPC_OVERHEAD_BYTES,
      "grpc.max_send_message_length": options.maxSendMessageBytes ?? 2 ** 31 - 1,
      "grpc.max_concurrent_streams": Math.min(
        options.maxConcurrentStreams ?? HTTP2_MAX_CONCURRENT_STREAMS_MAX,
        2 ** 31 - 1,
      ),
    });
  }

  addService<T extends object>(serviceName: string, handlers: T): void {
    const definition: Record<string, grpc.MethodDefinition<unknown, unknown>> = {};
    const implementation: grpc.UntypedServiceImplementation = {};
    for (const d of this.codecs.service(serviceName)) {
      definition[d.name] = {
        path: d.path,
        requestStream: d.requestStream,
        responseStream: d.responseStream,
        requestSerialize: (v: unknown) => d.request.encode(v),
        requestDeserialize: (b: Buffer) => d.request.decode(b),
        responseSerialize: (v: unknown) => d.response.encode(v),
        responseDeserialize: (b: Buffer) => d.response.decode(b),
        originalName: d.name,
      };
      const handler = handlerOf(handlers, d.name);
      if (handler) implementation[d.name] = wrap(methodKind(d.requestStream, d.responseStream), handler);
    }
    this.server.addService(definition, implementation);
  }

  listen(port: number, host = "127.0.0.1"): Promise<number> {
    return new Promise((resolve, reject) => {
      this.server.bindAsync(`${host}:${port}`, grpc.ServerCredentials.createInsecure(), (err, bound) =>
        err ? reject(err) : resolve(bound),
      );
    });
  }

  close(): Promise<void> {
    return new Promise((resolve) => {
      this.server.tryShutdown(() => resolve());
    });
  }

  forceClose(): void {
    this.server.forceShutdown();
  }
}

export { GrpcError, Status };
