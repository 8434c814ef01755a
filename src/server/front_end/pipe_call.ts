/**
 * A gRPC call forwarded by a front end, as the core's handlers see it: the same CallContext,
 * ServerWritable and ServerReadable as an Http2Call (src/grpc/call.ts), with the same completion
 * rules, but its messages come from and go to a FramePipe as protobuf bytes. The core decodes the
 * request and encodes the responses with the very codecs the single-process server uses, so a
 * handler cannot tell the two apart.
 */
import type { IncomingHttpHeaders } from "node:http2";
import type { CallObserver, RegisteredMethod } from "../../grpc/call.js";
import { type InvokedCall, invokeSingleRequest, invokeStreamingRequest } from "../../grpc/invoke.js";
import { isTransportHeader } from "../../grpc/metadata.js";
import { RequestQueue, cancelledError } from "../../grpc/request-queue.js";
import { ServerCall } from "../../grpc/server_call.js";
import { GrpcError, Status } from "../../grpc/status.js";
import { FrameKind } from "./frame.js";
import type { FramePipe } from "./pipe.js";
import { EncodedMessage } from "../../grpc/encoded_message.js";

/** What a forwarded call needs from the link that carries it. */
export interface PipeCallHost {
  readonly pipe: FramePipe;
  readonly observer: CallObserver | undefined;
  readonly maxSendMessageBytes: number;
  callEnded(id: number): void;
}

/** The Call frame's fields, decoded. */
export interface ForwardedCall {
  readonly headers: IncomingHttpHeaders;
  readonly peer: string;
  readonly clientCertCommonName: string | undefined;
  readonly deadline: number | undefined;
}

const NO_HEADERS: IncomingHttpHeaders = Object.freeze({});

/** Headers forwarded as flat [key, value, ...] pairs; a repeated key becomes an array, as node:http2 gives it. */
export function headersFromPairs(pairs: readonly string[]): IncomingHttpHeaders {
  // Most calls carry no metadata of their own (metadataToPairs): one shared, frozen empty set.
  if (pairs.length === 0) return NO_HEADERS;
  const headers: Record<string, string | string[]> = {};
  for (let i = 0; i < pairs.length; i += 2) {
    const key = pairs[i]!;
    const value = pairs[i + 1]!;
    const seen = headers[key];
    if (seen === undefined) headers[key] = value;
    else if (Array.isArray(seen)) seen.push(value);
    else headers[key] = [seen, value];
  }
  return headers;
}

/** The inverse of headersFromPairs, pseudo-headers left out (no handler reads them). */
export function headersToPairs(headers: Readonly<Record<string, string | string[] | undefined>>): string[] {
  return pairsOf(headers, (key) => key.charCodeAt(0) === 0x3a);
}

/**
 * A call's request metadata as pairs: the transport's headers left out as well (content-type, te,
 * user-agent, grpc-timeout, ...), which the front end has already acted on and no handler in the
 * core reads. Values stay as they came (not split at commas), so the core's metadata reads what
 * a single process reads. Three to four strings fewer to encode, decode and hold per call: the
 * hand-off was 14% of the core's main thread under put load (issue 18).
 */
export function metadataToPairs(headers: Readonly<Record<string, string | string[] | undefined>>): string[] {
  return pairsOf(headers, isTransportHeader);
}

function pairsOf(headers: Readonly<Record<string, string | string[] | undefined>>, skip: (key: string) => boolean): string[] {
  const pairs: string[] = [];
  for (const key of Object.keys(headers)) {
    if (skip(key)) continue;
    const value = headers[key];
    if (value === undefined) continue;
    if (Array.isArray(value)) for (const v of value) pairs.push(key, v);
    else pairs.push(key, value);
  }
  return pairs;
}

export class PipeCall extends ServerCall implements InvokedCall {
  readonly method: string;
  readonly deadline: number | undefined;
  readonly peer: string;
  readonly clientCertCommonName: string | undefined;
  private readonly id: number;
  private readonly host: PipeCallHost;
  private readonly registered: RegisteredMethod;
  protected readonly headers: IncomingHttpHeaders;
  private readonly startedAtMs: number;
  /** The front end's client is backed up (WritePause) until WriteResume. */
  private clientPaused = false;
  private drainWaiters: (() => void)[] | undefined;

  constructor(id: number, host: PipeCallHost, registered: RegisteredMethod, call: ForwardedCall) {
    super();
    this.id = id;
    this.host = host;
    this.registered = registered;
    this.method = registered.descriptor.path;
    this.headers = call.headers;
    this.peer = call.peer;
    this.clientCertCommonName = call.clientCertCommonName;
    this.deadline = call.deadline;
    const observer = host.observer;
    if (observer !== undefined) {
      this.startedAtMs = performance.now();
      const version = call.headers["client-api-version"];
      observer.started(registered.descriptor, typeof version === "string" ? version : undefined);
    } else {
      this.startedAtMs = 0;
    }
  }

  /** Starts the handler: on the first message (unary, server-streaming), or at once with a request stream. */
  start(firstMessage: Buffer): void {
    const kind = this.registered.kind;
    if (kind === "unary" || kind === "serverStream") {
      const request = this.decode(firstMessage);
      if (request === undefined) return;
      if (kind === "unary") this.requestBytes = firstMessage;
      invokeSingleRequest(this.registered, request, this);
      return;
    }
    const host = this.host;
    const id = this.id;
    this.requests = new RequestQueue<unknown>({
      pause: () => host.pipe.send(FrameKind.ReadPause, id, []),
      resume: () => host.pipe.send(FrameKind.ReadResume, id, []),
    });
    invokeStreamingRequest(this.registered, this.requests, this);
  }

  // ---- frames from the front end ----

  /** A request message of a streaming call. */
  received(bytes: Buffer): void {
    if (this.finished) return;
    const request = this.decode(bytes);
    if (request !== undefined) this.requests?.push(request);
  }

  halfClosed(): void {
    if (!this.finished) this.requests?.end();
  }

  /** The client's side ended first (cancel, deadline, disconnect, the front end died): the handler lets go. */
  cancelledByClient(code: Status): void {
    if (this.finished) return;
    this.finished = true;
    this.host.observer?.handled(this.registered.descriptor, code, this.elapsedSeconds());
    const error = code === Status.DEADLINE_EXCEEDED ? new GrpcError(code, "context deadline exceeded") : cancelledError("context canceled");
    this.isCancelled = true;
    this.controller?.abort(error);
    this.requests?.destroy(error);
    this.releaseDrainWaiters();
    this.host.callEnded(this.id);
  }

  writePaused(paused: boolean): void {
    this.clientPaused = paused;
    if (!paused) this.maybeReleaseDrainWaiters();
  }

  // ---- ServerWritable ----

  write(message: unknown): boolean {
    if (this.finished) return true;
    const bytes = this.encode(message);
    if (bytes === undefined) return true;
    this.host.observer?.sent(this.registered.descriptor, bytes.length);
    this.host.pipe.send(FrameKind.Response, this.id, [bytes]);
    return !this.clientPaused && !this.host.pipe.backedUp;
  }

  drain(): Promise<void> {
    if (this.finished || (!this.clientPaused && !this.host.pipe.backedUp)) return Promise.resolve();
    const wasWaiting = this.drainWaiters !== undefined;
    const promise = new Promise<void>((resolve) => (this.drainWaiters ??= []).push(resolve));
    if (!wasWaiting && this.host.pipe.backedUp) void this.host.pipe.whenWritable().then(() => this.maybeReleaseDrainWaiters());
    return promise;
  }

  private decode(bytes: Buffer): unknown {
    try {
      const request = this.registered.descriptor.request.decode(bytes);
      this.host.observer?.received(this.registered.descriptor, bytes.length);
      return request;
    } catch (err) {
      this.fail(new GrpcError(Status.INTERNAL, `grpc: error unmarshalling request: ${(err as Error).message}`));
      return undefined;
    }
  }

  private encode(response: unknown): Buffer | undefined {
    let bytes: Buffer;
    try {
      bytes = response instanceof EncodedMessage ? response.bytes : this.registered.descriptor.response.encode(response);
    } catch (err) {
      this.fail(new GrpcError(Status.INTERNAL, `grpc: error while marshaling: ${(err as Error).message}`));
      return undefined;
    }
    const max = this.host.maxSendMessageBytes;
    if (bytes.length > max) {
      this.fail(new GrpcError(Status.RESOURCE_EXHAUSTED, `grpc: trying to send message larger than max (${bytes.length} vs. ${max})`));
      return undefined;
    }
    return bytes;
  }

  respondOnce(response: unknown): void {
    if (this.finished) return;
    const bytes = this.encode(response);
    if (bytes === undefined) return;
    this.finished = true;
    const observer = this.host.observer;
    if (observer) {
      observer.sent(this.registered.descriptor, bytes.length);
      observer.handled(this.registered.descriptor, Status.OK, this.elapsedSeconds());
    }
    this.host.pipe.send(FrameKind.Reply, this.id, [bytes]);
    this.closed();
  }

  protected sendStatus(code: Status, message: string, extra: Readonly<Record<string, string>> | undefined): void {
    this.finished = true;
    this.host.observer?.handled(this.registered.descriptor, code, this.elapsedSeconds());
    this.requests?.destroy(cancelledError("call ended"));
    const trailers: string[] = [];
    if (extra) for (const key of Object.keys(extra)) trailers.push(key, extra[key]!);
    this.host.pipe.send(FrameKind.Status, this.id, [code, message, trailers]);
    this.closed();
  }

  /** The status went out: as an Http2Call's stream closing does, a handler still holding resources learns it may let go. */
  private closed(): void {
    if (this.controller !== undefined && !this.controller.signal.aborted) this.controller.abort(cancelledError("call ended"));
    this.releaseDrainWaiters();
    this.host.callEnded(this.id);
  }

  private maybeReleaseDrainWaiters(): void {
    if (this.clientPaused) return;
    if (this.host.pipe.backedUp) {
      void this.host.pipe.whenWritable().then(() => this.maybeReleaseDrainWaiters());
      return;
    }
    this.releaseDrainWaiters();
  }

  private releaseDrainWaiters(): void {
    const waiters = this.drainWaiters;
    this.drainWaiters = undefined;
    if (waiters) for (const resolve of waiters) resolve();
  }

  private elapsedSeconds(): number {
    return (performance.now() - this.startedAtMs) / 1000;
  }
}

