/**
 * The gateway's streaming methods (watch, lease keep-alive, snapshot, observe) as etcd's
 * grpc-gateway serves them over one long-lived HTTP/1.1 response: each response message is a
 * chunk `{"result":…}` and a newline; a call that fails ends with an error chunk
 * (`{"error":{"grpc_code",…}}`, no newline; before any result its HTTP status is the error's).
 * The response head goes out with the first chunk, or when the call ends: a watch that has said
 * nothing yet has sent nothing yet, as with etcd.
 *
 * Request side of watch and keep-alive: the body is a sequence of JSON messages read as they
 * arrive (Go's json.Decoder: any whitespace or none between them). A first message that does
 * not parse is answered 500 with code 2, as etcd does; a later one ends the request stream
 * (the gateway's CloseSend), which for a watch ends nothing: etcd keeps a half-closed watch.
 */

import { StringDecoder } from "node:string_decoder";
import type { BidiCall, BidiHandler, CallContext, HttpRequest, HttpResponse, ServerStreamHandler } from "../grpc/index.js";
import { GrpcError, Status, toGrpcError } from "../grpc/index.js";
import { RequestQueue } from "../grpc/request-queue.js";
import type { MessageBridge } from "./bridge.js";
import { JSON_HEADERS, METADATA_HEADERS, requestErrorResponse } from "./responses.js";
import { JsonIncomplete, JsonSyntaxError, readJsonValue } from "./go_json.js";
import { httpStatusOf, streamErrorChunk } from "./http_status.js";
import { JsonMappingError } from "./json_mapping.js";

/** Response chunks buffered before write() says "wait for drain". */
const CHUNKS_BUFFERED_MAX = 64;
/** Request bytes buffered but not yet parsed before reading pauses (one message may be this big). */
const PENDING_TEXT_CHARS_MAX = 8 * 1024 * 1024;

function isPromise(x: unknown): x is Promise<unknown> {
  return typeof (x as { then?: unknown } | null)?.then === "function";
}

/** The response side: messages become chunks, consumed by the HTTP response body. */
class ChunkedResponse {
  private readonly chunks: string[] = [];
  private wake: (() => void) | undefined;
  private drainWaiters: Array<() => void> = [];
  private done = false;
  private results = 0;
  private failure: GrpcError | undefined;
  private abandoned = false;
  /** Resolves when the head can go out: the first chunk, or the end of the call. */
  readonly started: Promise<void>;
  private start!: () => void;

  constructor(
    private readonly bridge: MessageBridge,
    private readonly onDone: () => void,
  ) {
    this.started = new Promise((r) => (this.start = r));
  }

  get ended(): boolean {
    return this.done;
  }

  write(message: unknown): boolean {
    if (this.done) return true;
    this.push(`{"result":${this.bridge.response(message)}}\n`);
    this.results++;
    this.start();
    return this.chunks.length < CHUNKS_BUFFERED_MAX;
  }

  drain(): Promise<void> {
    if (this.done || this.chunks.length < CHUNKS_BUFFERED_MAX) return Promise.resolve();
    return new Promise((r) => this.drainWaiters.push(r));
  }

  end(): void {
    if (this.done) return;
    this.done = true;
    this.wakeAll();
    this.onDone();
  }

  fail(error: Error): void {
    if (this.done) return;
    const e = toGrpcError(error);
    this.failure = e;
    this.push(streamErrorChunk(e.code, e.message));
    this.end();
  }

  /** The client went away: nothing more is written. */
  abandon(): void {
    this.chunks.length = 0;
    this.abandoned = true;
    this.end();
  }

  /** The status the call ended with: its failure's, CANCELLED if the client went away, else OK. */
  code(): Status {
    return this.failure?.code ?? (this.abandoned ? Status.CANCELLED : Status.OK);
  }

  private push(chunk: string): void {
    this.chunks.push(chunk);
    const w = this.wake;
    this.wake = undefined;
    w?.();
  }

  private wakeAll(): void {
    this.start();
    const w = this.wake;
    this.wake = undefined;
    w?.();
    for (const d of this.drainWaiters.splice(0)) d();
  }

  /** The HTTP status: 200 once a result went out, the failure's before that. */
  status(): number {
    return this.results === 0 && this.failure !== undefined ? httpStatusOf(this.failure.code) : 200;
  }

  async *body(): AsyncGenerator<string> {
    for (;;) {
      const chunk = this.chunks.shift();
      if (chunk !== undefined) {
        if (this.chunks.length < CHUNKS_BUFFERED_MAX / 2) for (const d of this.drainWaiters.splice(0)) d();
        yield chunk;
        continue;
      }
      if (this.done) return;
      await new Promise<void>((r) => (this.wake = r));
    }
  }
}

/** One streaming call: the response chunks plus, for bidi methods, the request queue. */
class GatewayStreamCall implements BidiCall<unknown, unknown> {
  readonly response: ChunkedResponse;
  readonly requests: RequestQueue<unknown>;

  constructor(bridge: MessageBridge, flow: { pause(): void; resume(): void }, onDone: () => void) {
    this.response = new ChunkedResponse(bridge, onDone);
    this.requests = new RequestQueue<unknown>(flow);
  }

  write(message: unknown): boolean {
    return this.response.write(message);
  }
  drain(): Promise<void> {
    return this.response.drain();
  }
  end(): void {
    this.response.end();
  }
  fail(error: GrpcError | Error): void {
    this.response.fail(error);
  }
  get ended(): boolean {
    return this.response.ended;
  }
  onMessage(listener: (message: unknown) => void): void {
    this.requests.onMessage(listener);
  }
  onEnd(listener: () => void): void {
    this.requests.onEnd(listener);
  }
  pause(): void {
    this.requests.pause();
  }
  resume(): void {
    this.requests.resume();
  }
  [Symbol.asyncIterator](): AsyncIterator<unknown> {
    return this.requests[Symbol.asyncIterator]();
  }
}

/**
 * Reads the request body as a stream of JSON messages. `first` resolves with the first one
 * (undefined: the body ended with none) or rejects with its parse error; the rest go to `deliver`
 * until the body ends or one does not parse (then `end`).
 */
class JsonMessageReader {
  private text = "";
  private readonly decoder = new StringDecoder("utf8");
  private bodyEnded = false;
  private stopped = false;
  private seen = 0;
  private readonly flow: { pause(): void; resume(): void };
  private resolveFirst!: (v: Record<string, unknown> | undefined) => void;
  private rejectFirst!: (e: Error) => void;
  readonly first: Promise<Record<string, unknown> | undefined>;
  /** Messages and the end read before attach() (they may share the first message's chunk). */
  private early: Array<Record<string, unknown>> | undefined = [];
  private endedEarly = false;
  private deliver: (json: Record<string, unknown>) => void = (json) => this.early!.push(json);
  private end: () => void = () => (this.endedEarly = true);

  constructor(
    request: HttpRequest,
    private readonly bridge: MessageBridge,
  ) {
    this.first = new Promise((resolve, reject) => {
      this.resolveFirst = resolve;
      this.rejectFirst = reject;
    });
    this.flow = request.readBody(
      (chunk) => {
        if (this.stopped) return;
        this.text += this.decoder.write(chunk);
        this.pump();
      },
      () => {
        this.text += this.decoder.end();
        this.bodyEnded = true;
        this.pump();
      },
    );
  }

  get controls(): { pause(): void; resume(): void } {
    return this.flow;
  }

  /** Where the messages after the first go, and the end; what came before is handed over at once. */
  attach(deliver: (json: Record<string, unknown>) => void, end: () => void): void {
    const early = this.early!;
    this.early = undefined;
    this.deliver = deliver;
    this.end = end;
    for (const json of early) deliver(json);
    if (this.endedEarly) end();
  }

  private stop(error: Error | undefined): void {
    if (this.stopped) return;
    this.stopped = true;
    this.text = "";
    if (this.seen === 0) {
      if (error) this.rejectFirst(error);
      else this.resolveFirst(undefined);
    }
    this.end();
  }

  private pump(): void {
    let pos = 0;
    while (!this.stopped) {
      let r: ReturnType<typeof readJsonValue>;
      try {
        // A number ending the buffer may continue in the next chunk; at the body's end it is complete.
        r = readJsonValue(this.bodyEnded ? this.text + " " : this.text, pos);
      } catch (e) {
        if (e instanceof JsonIncomplete) {
          if (this.bodyEnded) this.stop(new JsonMappingError("unexpected EOF"));
          break;
        }
        if (e instanceof JsonSyntaxError) {
          this.stop(new JsonMappingError(e.message));
          break;
        }
        throw e;
      }
      if (r === undefined) {
        if (this.bodyEnded) this.stop(undefined);
        pos = this.text.length;
        break;
      }
      pos = r.end;
      let json: Record<string, unknown>;
      try {
        json = this.bridge.requestFromJson(r.value);
      } catch (e) {
        this.stop(e as Error);
        break;
      }
      if (this.seen++ === 0) this.resolveFirst(json);
      else this.deliver(json);
    }
    if (!this.stopped) {
      this.text = this.text.slice(pos);
      if (this.text.length > PENDING_TEXT_CHARS_MAX) this.stop(new JsonMappingError("request message too large"));
    }
  }
}

/**
 * Serves a streaming method. For a server-streaming one `request` is the parsed body; for a
 * bidi one the body is read as a stream of messages.
 */
export async function serveStream(
  bridge: MessageBridge,
  http: HttpRequest,
  ctx: CallContext,
  request?: Record<string, unknown>,
): Promise<HttpResponse> {
  const kind = bridge.registered.kind;
  let reader: JsonMessageReader | undefined;
  let first: Record<string, unknown> | undefined = request;
  if (kind === "bidi") {
    reader = new JsonMessageReader(http, bridge);
    try {
      first = await reader.first;
    } catch (e) {
      // grpc-gateway returns the first message's decode error as is: code 2 (Unknown).
      return requestErrorResponse(Status.UNKNOWN, (e as Error).message);
    }
  }
  bridge.started();
  const call = new GatewayStreamCall(bridge, reader?.controls ?? { pause() {}, resume() {} }, () => {
    call.requests.end();
    bridge.handled(call.response.code());
  });
  const onAbort = (): void => {
    call.requests.destroy(new GrpcError(Status.CANCELLED, "context canceled"));
    call.response.abandon();
  };
  if (http.signal.aborted) onAbort();
  else http.signal.addEventListener("abort", onAbort, { once: true });

  let result: unknown;
  try {
    if (kind === "bidi") {
      const deliver = (json: Record<string, unknown>): void => {
        try {
          call.requests.push(bridge.request(json));
        } catch (e) {
          call.fail(e as Error);
        }
      };
      if (first !== undefined) deliver(first);
      reader!.attach(deliver, () => call.requests.end());
      result = (bridge.registered.handler as BidiHandler<unknown, unknown>)(call, ctx);
    } else {
      const message = bridge.request(first ?? {});
      result = (bridge.registered.handler as ServerStreamHandler<unknown, unknown>)(message, call, ctx);
    }
  } catch (e) {
    call.fail(e as Error);
  }
  if (isPromise(result)) {
    result.then(
      () => call.end(),
      (e: unknown) => call.fail(toGrpcError(e)),
    );
  }
  await call.response.started;
  const headers = first !== undefined || kind !== "bidi" ? METADATA_HEADERS : JSON_HEADERS;
  return { status: call.response.status(), headers, body: call.response.body() };
}
