/**
 * One gRPC call on one HTTP/2 stream: reads length-prefixed request messages,
 * runs the handler (unary, server-streaming, client-streaming or bidi), writes
 * responses and ends with the status in trailers (or a trailers-only response
 * when nothing was sent yet). The call object is also the handler's context and,
 * for streaming methods, its call object.
 */

import http2, { type IncomingHttpHeaders, type ServerHttp2Stream } from "node:http2";
import type { Socket } from "node:net";
import type { MethodDescriptor } from "../pb/codec.js";
import { MESSAGE_PREFIX_BYTES, type MessageSink, MessageDeframer, messageTooLarge } from "./framing.js";
import type { AnyHandler, MethodKind } from "./handler.js";
import { clientIdentityOfSocket } from "./client_identity.js";
import { RequestQueue, cancelledError } from "./request-queue.js";
import { ServerCall } from "./server_call.js";
import { type InvokedCall, invokeSingleRequest, invokeStreamingRequest } from "./invoke.js";
import { GrpcError, Status, encodeGrpcMessage, toGrpcError } from "./status.js";
import { H2Stream, type StreamSink } from "./h2/stream.js";
import { EncodedMessage } from "./encoded_message.js";

/** A method as registered on the server: its descriptor and handler. */
export interface RegisteredMethod {
  readonly descriptor: MethodDescriptor;
  readonly kind: MethodKind;
  readonly handler: AnyHandler;
}

/**
 * Per-call events for metrics (etcd exports grpc_server_started_total,
 * grpc_server_handled_total{grpc_code}, grpc_server_msg_received_total and
 * grpc_server_msg_sent_total per method). Every call passes here, whatever its kind.
 */
export interface CallObserver {
  /** A method was registered: lets metrics start its series at 0, as go-grpc-prometheus does. */
  registered?(method: MethodDescriptor): void;
  /** `clientApiVersion`: the client's `client-api-version` header (etcd's clientv3 sends one). */
  started(method: MethodDescriptor, clientApiVersion: string | undefined): void;
  /** The status the call ended with (CANCELLED when the client went away first), after `seconds`. */
  handled(method: MethodDescriptor, code: Status, seconds: number): void;
  /** One request message of `bytes` (its protobuf body, without the 5-byte gRPC prefix). */
  received(method: MethodDescriptor, bytes: number): void;
  sent(method: MethodDescriptor, bytes: number): void;
}

/** What a call needs from its server. */
export interface CallHost {
  readonly maxReceiveMessageBytes: number;
  readonly maxSendMessageBytes: number;
  readonly observer: CallObserver | undefined;
  callClosed(call: Http2Call): void;
}

/** Per-connection bookkeeping a call reports to (keepalive's open-stream count). */
export interface CallConnection {
  streamOpened(): void;
  streamClosed(): void;
}

const { NGHTTP2_NO_ERROR } = http2.constants;

/** Like grpc-go, only the content type: every extra header costs HPACK work per call. */
// Frozen: our HTTP/2 engine encodes a frozen header object once (h2/header_block.ts).
const RESPONSE_HEADERS = Object.freeze({
  ":status": 200,
  "content-type": "application/grpc",
});
// No `date` header (node:http2 adds one by default): grpc-go sends none, and a value that changes
// every second costs a string per response and a new HPACK table entry per second per connection.
const RESPOND_OPTIONS = { waitForTrailers: true, sendDate: false };
const OK_TRAILERS: Record<string, string> = Object.freeze({ "grpc-status": "0" });
const END_OPTIONS = { endStream: true, sendDate: false };

const kCall = Symbol("grpc.call");
type CallStream = ServerHttp2Stream & { [kCall]: Http2Call };

// Stream listeners shared by all calls (no closures per call): `this` is the stream.
function onStreamData(this: CallStream, chunk: Buffer): void {
  this[kCall].onData(chunk);
}
function onStreamEnd(this: CallStream): void {
  this[kCall].onReadEnd();
}
function onStreamClose(this: CallStream): void {
  this[kCall].onClose();
}
function onStreamWantTrailers(this: CallStream): void {
  this[kCall].onWantTrailers();
}
function onStreamError(): void {
  // Stream errors (resets, protocol errors) surface as 'close'; nothing to do here.
}

type ReadState = "open" | "ended";

export class Http2Call extends ServerCall implements InvokedCall, MessageSink, StreamSink {
  readonly method: string;
  readonly deadline: number | undefined;
  private readonly stream: CallStream;
  protected readonly headers: IncomingHttpHeaders;
  private readonly registered: RegisteredMethod;
  private readonly host: CallHost;
  private readonly connection: CallConnection | undefined;
  /** Created on the first request chunk that is not exactly one whole message (see onData). */
  private deframer: MessageDeframer | undefined;
  private readState: ReadState = "open";
  private received = 0;
  private closed = false;
  private trailers: Record<string, string> = OK_TRAILERS;
  /** performance.now() at the start, for the observer's handling time (0 without an observer). */
  private readonly startedAtMs: number;
  private timer: NodeJS.Timeout | undefined;
  private drainWaiters: (() => void)[] | undefined;

  constructor(
    stream: ServerHttp2Stream,
    headers: IncomingHttpHeaders,
    registered: RegisteredMethod,
    host: CallHost,
    timeoutMs: number | undefined,
    connection: CallConnection | undefined,
  ) {
    super();
    this.connection = connection;
    connection?.streamOpened();
    this.stream = stream as CallStream;
    this.stream[kCall] = this;
    this.headers = headers;
    this.registered = registered;
    this.host = host;
    this.method = registered.descriptor.path;
    const observer = host.observer;
    if (observer !== undefined) {
      this.startedAtMs = performance.now();
      const version = headers["client-api-version"];
      observer.started(registered.descriptor, typeof version === "string" ? version : undefined);
    } else {
      this.startedAtMs = 0;
    }
    const own: unknown = stream;
    if (own instanceof H2Stream) {
      // Our engine's stream calls the call directly (it never emits 'error': resets are 'close').
      own.attach(this);
    } else {
      stream.on("data", onStreamData);
      stream.on("end", onStreamEnd);
      stream.on("close", onStreamClose);
      stream.on("error", onStreamError);
      stream.on("wantTrailers", onStreamWantTrailers);
    }
    if (timeoutMs !== undefined) {
      this.deadline = Date.now() + timeoutMs;
      this.timer = setTimeout(() => this.onDeadline(), timeoutMs);
    }
    const kind = registered.kind;
    if (kind === "clientStream" || kind === "bidi") {
      this.requests = new RequestQueue<unknown>(stream);
      this.startStreamingRequestHandler();
    }
  }

  // ---- CallContext ----

  get peer(): string {
    const socket = this.stream.session?.socket;
    if (!socket) return "unknown";
    // A rewritten connection's socket is node:http2's wrapper of our stream (rewriting-stream.ts).
    const peer = socket.remoteAddress !== undefined ? socket : ((socket as { stream?: Partial<Socket> }).stream ?? socket);
    return `${peer.remoteAddress}:${peer.remotePort}`;
  }

  get clientCertCommonName(): string | undefined {
    return clientIdentityOfSocket(this.stream.session?.socket)?.commonName;
  }

  // ---- transport events ----

  onData(chunk: Buffer): void {
    if (this.finished) return; // discard: the call is over, never buffer
    try {
      // Fast path: a unary request usually arrives as one DATA chunk holding exactly one message.
      const bodyBytes = chunk.length - MESSAGE_PREFIX_BYTES;
      if (this.deframer === undefined && bodyBytes >= 0 && chunk.readUInt32BE(1) === bodyBytes) {
        if (bodyBytes > this.host.maxReceiveMessageBytes) throw messageTooLarge(bodyBytes, this.host.maxReceiveMessageBytes);
        this.onFrame(chunk.subarray(MESSAGE_PREFIX_BYTES), chunk[0] !== 0);
        return;
      }
      this.deframer ??= new MessageDeframer(this.host.maxReceiveMessageBytes);
      this.deframer.push(chunk, this);
    } catch (err) {
      this.fail(toGrpcError(err));
    }
  }

  onFrame(message: Buffer, compressed: boolean): void {
    if (this.finished) return;
    if (compressed) {
      const encoding = this.headers["grpc-encoding"];
      if (encoding === undefined || encoding === "identity") {
        throw new GrpcError(Status.INTERNAL, "grpc: compressed flag set with identity or empty encoding");
      }
      throw new GrpcError(Status.UNIMPLEMENTED, `grpc: Decompressor is not installed for grpc-encoding "${String(encoding)}"`);
    }
    let request: unknown;
    try {
      request = this.registered.descriptor.request.decode(message);
    } catch (err) {
      throw new GrpcError(Status.INTERNAL, `grpc: error unmarshalling request: ${(err as Error).message}`);
    }
    this.received++;
    this.host.observer?.received(this.registered.descriptor, message.length);
    if (this.requests) {
      this.requests.push(request);
    } else if (this.received === 1) {
      // Unary and server-streaming: the handler starts on the one request message;
      // like grpc-go, later messages are ignored.
      if (this.registered.kind === "unary") this.requestBytes = message;
      this.startSingleRequestHandler(request);
    }
  }

  onReadEnd(): void {
    this.readState = "ended";
    if (this.finished) return;
    // grpc-go (etcd) answers a request stream that ends early with the reader's error: a unary
    // call converts it as is (UNKNOWN "unexpected EOF" mid-message, UNKNOWN "EOF" with no message);
    // a streaming call's RecvMsg turns "unexpected EOF" into INTERNAL.
    if (this.deframer?.partial === true) {
      this.fail(new GrpcError(this.registered.kind === "unary" ? Status.UNKNOWN : Status.INTERNAL, "unexpected EOF"));
      return;
    }
    if (this.requests) this.requests.end();
    else if (this.received === 0) this.fail(new GrpcError(Status.UNKNOWN, "EOF"));
  }

  onClose(): void {
    if (this.closed) return;
    this.closed = true;
    this.clearTimer();
    if (!this.finished) {
      // The client reset the stream or the connection died before the status went out.
      this.finished = true;
      this.host.observer?.handled(this.registered.descriptor, Status.CANCELLED, this.elapsedSeconds());
      this.cancel(cancelledError("context canceled"));
    } else if (this.controller !== undefined && !this.controller.signal.aborted) {
      // The call ended (OK or an error status) and its stream is gone: a handler still holding
      // resources for it (a watch stream, a keep-alive loop) learns here that it can let go.
      this.controller.abort(cancelledError("call ended"));
    }
    this.releaseDrainWaiters();
    this.connection?.streamClosed();
    this.host.callClosed(this);
  }

  onWantTrailers(): void {
    const trailers = this.trailers;
    this.stream.sendTrailers(trailers);
    // A unary client has half-closed by now; only a failed or streaming call may still be sending.
    if (trailers !== OK_TRAILERS || this.registered.kind !== "unary") this.closeReadSide();
  }

  private onDeadline(): void {
    this.timer = undefined;
    if (this.finished) return;
    // etcd's two bidi handlers (Watch, LeaseKeepAlive) wait on the stream's context and return its
    // error as it is, a plain Go error that grpc-go sends as UNKNOWN; every other call ends as
    // grpc-go's own deadline error (or etcd's mapping of it) does.
    const code = this.registered.kind === "bidi" ? Status.UNKNOWN : Status.DEADLINE_EXCEEDED;
    const error = new GrpcError(code, "context deadline exceeded");
    this.sendStatus(error.code, error.message, undefined);
    this.cancel(error);
  }

  /** Server shutdown: end the call with UNAVAILABLE and abort its handler. */
  shutdown(): void {
    if (this.finished) return;
    const error = new GrpcError(Status.UNAVAILABLE, "transport is closing");
    this.sendStatus(error.code, error.message, undefined);
    this.cancel(error);
  }

  private cancel(error: GrpcError): void {
    this.isCancelled = true;
    this.controller?.abort(error);
    this.requests?.destroy(error);
  }

  // ---- handler invocation ----

  private startSingleRequestHandler(request: unknown): void {
    // A deadline already past when the request came (grpc-timeout "0m", or "-1S", which grpc-go
    // takes as negative): the handler never starts, as etcd's handlers give up on a context that is
    // done (a linearizable read, a write's proposal), rather than whenever the timer gets its turn.
    if (this.deadline !== undefined && Date.now() >= this.deadline) {
      this.onDeadline();
      return;
    }
    invokeSingleRequest(this.registered, request, this);
  }

  private startStreamingRequestHandler(): void {
    invokeStreamingRequest(this.registered, this.requests!, this);
  }

  /** Unary and client-streaming: one response message, then OK. */
  respondOnce(response: unknown): void {
    if (this.finished) return;
    const frame = this.encode(response);
    if (!frame) return;
    this.finished = true;
    this.clearTimer();
    const observer = this.host.observer;
    if (observer) {
      observer.sent(this.registered.descriptor, frame.length - MESSAGE_PREFIX_BYTES);
      observer.handled(this.registered.descriptor, Status.OK, this.elapsedSeconds());
    }
    const stream = this.stream;
    if (stream.destroyed) return;
    stream.respond(RESPONSE_HEADERS, RESPOND_OPTIONS);
    stream.end(frame);
  }

  private encode(response: unknown): Buffer | undefined {
    let frame: Buffer;
    try {
      frame = response instanceof EncodedMessage ? response.framed : this.registered.descriptor.response.encodeFramed(response);
    } catch (err) {
      this.fail(new GrpcError(Status.INTERNAL, `grpc: error while marshaling: ${(err as Error).message}`));
      return undefined;
    }
    const size = frame.length - MESSAGE_PREFIX_BYTES;
    if (size > this.host.maxSendMessageBytes) {
      this.fail(
        new GrpcError(
          Status.RESOURCE_EXHAUSTED,
          `grpc: trying to send message larger than max (${size} vs. ${this.host.maxSendMessageBytes})`,
        ),
      );
      return undefined;
    }
    return frame;
  }

  // ---- ServerWritable ----

  write(message: unknown): boolean {
    if (this.finished) return true;
    const frame = this.encode(message);
    if (!frame) return true;
    const stream = this.stream;
    if (stream.destroyed) return true;
    if (!stream.headersSent) stream.respond(RESPONSE_HEADERS, RESPOND_OPTIONS);
    this.host.observer?.sent(this.registered.descriptor, frame.length - MESSAGE_PREFIX_BYTES);
    return stream.write(frame);
  }

  drain(): Promise<void> {
    if (this.finished || !this.stream.writableNeedDrain) return Promise.resolve();
    return new Promise((resolve) => {
      if (!this.drainWaiters) {
        this.drainWaiters = [];
        this.stream.once("drain", () => this.releaseDrainWaiters());
      }
      this.drainWaiters.push(resolve);
    });
  }

  private releaseDrainWaiters(): void {
    const waiters = this.drainWaiters;
    this.drainWaiters = undefined;
    if (waiters) for (const resolve of waiters) resolve();
  }

  protected sendStatus(code: Status, message: string, extra: Readonly<Record<string, string>> | undefined): void {
    this.finished = true;
    this.host.observer?.handled(this.registered.descriptor, code, this.elapsedSeconds());
    this.clearTimer();
    this.requests?.destroy(cancelledError("call ended"));
    const stream = this.stream;
    // stream.closed comes before its 'close' event (this.closed): respond() would throw ERR_HTTP2_INVALID_STREAM.
    if (stream.destroyed || stream.closed || this.closed) return;
    const trailers: Record<string, string> = code === Status.OK && !message && !extra ? OK_TRAILERS : { "grpc-status": String(code) };
    if (message) trailers["grpc-message"] = encodeGrpcMessage(message);
    if (extra) Object.assign(trailers, extra);
    if (!stream.headersSent) {
      // Trailers-only response: one HEADERS frame with END_STREAM.
      stream.respond({ ...RESPONSE_HEADERS, ...trailers }, END_OPTIONS);
      this.closeReadSide();
      return;
    }
    this.trailers = trailers;
    stream.end();
  }

  /**
   * After the status, a client still sending gets RST_STREAM(NO_ERROR), as grpc-go
   * does. Deferred a turn: a reset submitted right after the trailers can overtake them.
   */
  private closeReadSide(): void {
    if (this.readState !== "open" || this.stream.destroyed) return;
    setImmediate(closeIfStillReading, this.stream);
  }

  private elapsedSeconds(): number {
    return (performance.now() - this.startedAtMs) / 1000;
  }

  private clearTimer(): void {
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
  }
}

/** Answers a stream that never becomes a call (unknown method, bad header) with a trailers-only status. */
export function respondTrailersOnly(stream: ServerHttp2Stream, code: Status, message: string): void {
  stream.on("error", onStreamError);
  if (stream.destroyed) return;
  stream.respond({ ...RESPONSE_HEADERS, "grpc-status": String(code), "grpc-message": encodeGrpcMessage(message) }, END_OPTIONS);
  // Drain whatever the client still sends, then reset its side like grpc-go does.
  stream.resume();
  setImmediate(closeIfStillReading, stream);
}

function closeIfStillReading(stream: ServerHttp2Stream): void {
  if (!stream.destroyed && !stream.readableEnded) stream.close(NGHTTP2_NO_ERROR);
}

