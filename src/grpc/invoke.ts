/**
 * Running a registered handler for one call, by its kind, with the completion rules of handler.ts:
 * shared by the HTTP/2 call (call.ts) and the call a front end forwards to the member's core
 * (src/server/front_end/pipe_call.ts), so both settle a handler's result the same way.
 */
import type { RegisteredMethod } from "./call.js";
import type { BidiCall, BidiHandler, CallContext, ClientStreamHandler, ServerReadable, ServerStreamHandler, UnaryHandler } from "./handler.js";
import { toGrpcError } from "./status.js";

/** A call as the invocation sees it: the handler's context and call object, and its one-response ending. */
export interface InvokedCall extends CallContext, BidiCall<unknown, unknown> {
  /** Unary and client-streaming: sends the one response message, then OK. */
  respondOnce(response: unknown): void;
}

/** Unary and server-streaming: the handler starts on the one request message. */
export function invokeSingleRequest(registered: RegisteredMethod, request: unknown, call: InvokedCall): void {
  const { kind, handler } = registered;
  let result: unknown;
  try {
    if (kind === "unary") result = (handler as UnaryHandler<unknown, unknown>)(request, call);
    else result = (handler as ServerStreamHandler<unknown, unknown>)(request, call, call);
  } catch (err) {
    call.fail(toGrpcError(err));
    return;
  }
  if (kind === "unary") settleUnary(result, call);
  else settleStreaming(result, call);
}

/** Client-streaming and bidi: the handler starts after the caller's bookkeeping (a microtask later). */
export function invokeStreamingRequest(registered: RegisteredMethod, requests: ServerReadable<unknown>, call: InvokedCall): void {
  const { kind, handler } = registered;
  queueMicrotask(() => {
    if (call.ended) return;
    let result: unknown;
    try {
      if (kind === "clientStream") result = (handler as ClientStreamHandler<unknown, unknown>)(requests, call);
      else result = (handler as BidiHandler<unknown, unknown>)(call, call);
    } catch (err) {
      call.fail(toGrpcError(err));
      return;
    }
    if (kind === "clientStream") settleUnary(result, call);
    else settleStreaming(result, call);
  });
}

function settleUnary(result: unknown, call: InvokedCall): void {
  if (isPromise(result)) {
    result.then(
      (response) => call.respondOnce(response),
      (err: unknown) => call.fail(toGrpcError(err)),
    );
  } else {
    call.respondOnce(result);
  }
}

function settleStreaming(result: unknown, call: InvokedCall): void {
  if (isPromise(result)) {
    result.then(
      () => call.end(),
      (err: unknown) => call.fail(toGrpcError(err)),
    );
  }
}

function isPromise(value: unknown): value is Promise<unknown> {
  return value !== null && typeof value === "object" && typeof (value as Promise<unknown>).then === "function";
}
