/**
 * What every server-side call object has in common, whatever carries it: an HTTP/2 stream
 * (call.ts) or a front end's pipe (src/server/front_end/pipe_call.ts). The context's metadata and
 * cancellation signal, the status endings, and the request stream's side of ServerReadable; the
 * transport supplies `sendStatus` and the rest.
 */
import type { IncomingHttpHeaders } from "node:http2";
import { HeaderMetadata, type Metadata } from "./metadata.js";
import { RequestQueue, cancelledError } from "./request-queue.js";
import { type GrpcError, Status, toGrpcError } from "./status.js";

export abstract class ServerCall {
  abstract readonly method: string;
  /** The request headers the metadata is read from (pseudo-headers are never shown). */
  protected abstract readonly headers: IncomingHttpHeaders;
  /** Set once the status was sent (or the call died): nothing more is written. */
  protected finished = false;
  protected isCancelled = false;
  protected controller: AbortController | undefined;
  /** The request stream of client-streaming and bidi calls. */
  protected requests: RequestQueue<unknown> | undefined;
  private metadataView: HeaderMetadata | undefined;
  /** CallContext.requestBytes: set by the transport on a unary call's one request. */
  requestBytes: Buffer | undefined = undefined;

  /** Ends the call with a status (and extra trailers); the transport's part of end() and fail(). */
  protected abstract sendStatus(code: Status, message: string, extra: Readonly<Record<string, string>> | undefined): void;

  // ---- CallContext ----

  get metadata(): Metadata {
    this.metadataView ??= new HeaderMetadata(this.headers);
    return this.metadataView;
  }

  get signal(): AbortSignal {
    if (!this.controller) {
      this.controller = new AbortController();
      if (this.isCancelled) this.controller.abort(cancelledError("context canceled"));
    }
    return this.controller.signal;
  }

  get cancelled(): boolean {
    return this.isCancelled;
  }

  get ended(): boolean {
    return this.finished;
  }

  // ---- ServerWritable's endings ----

  end(): void {
    if (this.finished) return;
    this.sendStatus(Status.OK, "", undefined);
  }

  fail(error: GrpcError | Error): void {
    if (this.finished) return;
    const e = toGrpcError(error);
    this.sendStatus(e.code === Status.OK ? Status.UNKNOWN : e.code, e.message, e.trailers);
  }

  // ---- ServerReadable (streaming requests) ----

  onMessage(listener: (message: unknown) => void): void {
    this.readable().onMessage(listener);
  }

  onEnd(listener: () => void): void {
    this.readable().onEnd(listener);
  }

  pause(): void {
    this.readable().pause();
  }

  resume(): void {
    this.readable().resume();
  }

  [Symbol.asyncIterator](): AsyncIterator<unknown> {
    return this.readable()[Symbol.asyncIterator]();
  }

  private readable(): RequestQueue<unknown> {
    if (!this.requests) throw new Error(`${this.method} has no request stream`);
    return this.requests;
  }
}
