/**
 * What a service implementation sees: handler signatures and call objects, with
 * no dependency on the transport, so the same handler objects run on the
 * node:http2 server and on @grpc/grpc-js (see test/grpc/grpc-js-adapter.ts).
 *
 * Completion rule for streaming handlers: if the handler returns a Promise, its
 * settlement ends the call (resolve → OK, reject → its status) unless the call was
 * already ended with `end()`/`fail()`; if it returns nothing, the call stays open
 * until the handler calls `end()` or `fail()`, or the client goes away.
 */

import type { Metadata } from "./metadata.js";
import type { GrpcError } from "./status.js";
import type { EncodedMessage } from "./encoded_message.js";

/** Per-call information shared by all handler kinds. */
export interface CallContext {
  /** The full method path, e.g. "/etcdserverpb.KV/Range". */
  readonly method: string;
  /** Request metadata (e.g. `token`, `hasleader`). */
  readonly metadata: Metadata;
  /**
   * Aborted when the call can no longer complete: deadline expiry, client
   * cancellation or disconnect, server shutdown. Created on first access.
   */
  readonly signal: AbortSignal;
  /** Absolute deadline in Date.now() milliseconds, if the client set one. */
  readonly deadline: number | undefined;
  /** Remote address "ip:port". */
  readonly peer: string;
  /** CN of the client's verified TLS certificate (client_identity.ts); undefined without one. */
  readonly clientCertCommonName?: string | undefined;
  /** True once the call was cancelled (deadline, client, shutdown). */
  readonly cancelled: boolean;
  /**
   * A unary call's request message as it arrived (protobuf), which the handler's request was
   * decoded from: a write proposes these bytes instead of encoding the request again. Undefined
   * for streams and for calls that did not come as protobuf (the JSON gateway).
   */
  readonly requestBytes?: Buffer | undefined;
}

/** The sending side of a streaming response. */
export interface ServerWritable<Res> {
  /**
   * Queues one response message. Returns false when the transport buffer is
   * full: wait for `drain()` before writing more. A no-op once the call ended.
   */
  write(message: Res): boolean;
  /** Resolves when the transport buffer has room again (or the call ended). */
  drain(): Promise<void>;
  /** Ends the call with OK. Idempotent; later writes are ignored. */
  end(): void;
  /** Ends the call with an error status. */
  fail(error: GrpcError | Error): void;
  /** True once the call ended (by either side). */
  readonly ended: boolean;
}

/** The receiving side of a streaming request: iterate it, or listen to it. */
export interface ServerReadable<Req> extends AsyncIterable<Req> {
  /**
   * Event style: every message is passed to `listener` as it arrives (exclusive
   * with iteration). Messages received before this call are delivered first.
   */
  onMessage(listener: (message: Req) => void): void;
  /** Called once when the client half-closes its side (no more messages). */
  onEnd(listener: () => void): void;
  /** Stops reading from the client (HTTP/2 flow control pushes back). */
  pause(): void;
  resume(): void;
}

export interface BidiCall<Req, Res> extends ServerReadable<Req>, ServerWritable<Res> {}

/** A unary handler answers with the response, or with it already encoded (encoded_message.ts). */
export type UnaryHandler<Req, Res> = (request: Req, ctx: CallContext) => Promise<Res | EncodedMessage> | Res | EncodedMessage;
export type ServerStreamHandler<Req, Res> = (
  request: Req,
  call: ServerWritable<Res>,
  ctx: CallContext,
) => Promise<void> | void;
export type ClientStreamHandler<Req, Res> = (call: ServerReadable<Req>, ctx: CallContext) => Promise<Res> | Res;
export type BidiHandler<Req, Res> = (call: BidiCall<Req, Res>, ctx: CallContext) => Promise<void> | void;

/** Any handler, as stored by the server; the proto decides which kind it is called as. */
export type AnyHandler = (...args: never[]) => unknown;

export type MethodKind = "unary" | "serverStream" | "clientStream" | "bidi";

export function methodKind(requestStream: boolean, responseStream: boolean): MethodKind {
  if (requestStream) return responseStream ? "bidi" : "clientStream";
  return responseStream ? "serverStream" : "unary";
}

/** Reads the handler functions of a service object by method name (own or prototype methods). */
export function handlerOf(handlers: object, name: string): AnyHandler | undefined {
  const fn = (handlers as Record<string, unknown>)[name];
  if (fn === undefined) return undefined;
  if (typeof fn !== "function") throw new TypeError(`handler ${name} is not a function`);
  return (fn as AnyHandler).bind(handlers);
}
