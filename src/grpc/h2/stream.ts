/**
 * One HTTP/2 stream of our own server connection (connection.ts), with the part of node:http2's
 * ServerHttp2Stream that the gRPC call (call.ts) and the plain-HTTP exchange (http.ts) use:
 * 'data' / 'end' / 'close' / 'wantTrailers' / 'drain' events, respond(), write(), end(),
 * sendTrailers(), close(code), pause() / resume() and the state getters. Why not node:http2's:
 * its stream is a Duplex over nghttp2 and costs ~35 µs of CPU per unary call on this machine
 * (bench/results/own-http2-*.md); this one is a small state machine whose frames the connection
 * batches into one socket write per event-loop turn.
 *
 * States (RFC 9113 5.1): open → half-closed (remote) when the client's END_STREAM arrives,
 * half-closed (local) once our END_STREAM is queued, closed when both are, or at a reset.
 */

import { EventEmitter } from "node:events";
import type { Socket } from "node:net";

/** What a stream needs from its connection (connection.ts implements it). */
export interface StreamOwner {
  readonly socket: Socket;
  /** Frames the response headers (or trailers) of a stream. */
  sendHeaders(stream: H2Stream, headers: Readonly<Record<string, unknown>>, endStream: boolean): void;
  /** Queues DATA behind the stream's flow-control windows; `endStream` marks the last. */
  sendData(stream: H2Stream, data: Buffer, endStream: boolean): void;
  /** RST_STREAM with a code; the stream is closed. */
  sendReset(stream: H2Stream, code: number): void;
  /** Both sides ended and our last frame is queued: the stream is closed without a reset. */
  finished(stream: H2Stream): void;
  /** The handler consumed `bytes` of the stream's DATA: the window may be granted back. */
  consumed(stream: H2Stream, bytes: number): void;
  /** Whether a writer should wait for 'drain' (the stream's queue or the socket is backed up). */
  backedUp(stream: H2Stream): boolean;
}

export interface RespondOptions {
  endStream?: boolean;
  waitForTrailers?: boolean;
  sendDate?: boolean;
}

/** RFC 9113 7: the codes a server stream is reset with. */
export const H2Error = {
  NO_ERROR: 0x0,
  PROTOCOL_ERROR: 0x1,
  INTERNAL_ERROR: 0x2,
  FLOW_CONTROL_ERROR: 0x3,
  SETTINGS_TIMEOUT: 0x4,
  STREAM_CLOSED: 0x5,
  FRAME_SIZE_ERROR: 0x6,
  REFUSED_STREAM: 0x7,
  CANCEL: 0x8,
  COMPRESSION_ERROR: 0x9,
  CONNECT_ERROR: 0xa,
  ENHANCE_YOUR_CALM: 0xb,
  INADEQUATE_SECURITY: 0xc,
  HTTP_1_1_REQUIRED: 0xd,
} as const;

/**
 * A consumer that takes a stream's request-side events as direct calls (the gRPC call): no
 * listener arrays to fill per call and no megamorphic 'emit' per frame, which together were ~2.5%
 * of the leader's main thread at 1,000 clients (issue 18).
 */
export interface StreamSink {
  onData(chunk: Buffer): void;
  onReadEnd(): void;
  onClose(): void;
  onWantTrailers(): void;
}

export class H2Stream extends EventEmitter {
  readonly id: number;
  /** node:http2's `stream.session`: the call reads its socket (peer address, client certificate). */
  readonly session: { readonly socket: Socket };
  /** Flow control of what we send: the peer's window for this stream (may go negative: RFC 9113 6.9.2). */
  sendWindow: number;
  /** DATA waiting for window, in order (the connection drains it). */
  pending: Buffer[] = [];
  pendingBytes = 0;
  /** END_STREAM goes with the last pending DATA (or alone). */
  pendingEnd = false;
  /** Trailers to send once the pending DATA is out. */
  pendingTrailers: Readonly<Record<string, unknown>> | undefined;
  /** Flow control of what we receive: what the client may still send on this stream. */
  recvWindow: number;
  /** Bytes the handler consumed since the last stream WINDOW_UPDATE. */
  unacked = 0;
  /** A writer is waiting for 'drain'. */
  needDrain = false;
  private readonly owner: StreamOwner;
  private remoteEnded = false;
  private localEnded = false;
  private isClosed = false;
  private sentHeaders = false;
  private waitForTrailers = false;
  /**
   * A new stream holds its DATA until a 'data' listener comes (as a Readable does in paused mode):
   * a plain-HTTP handler may read the body a few turns after the headers.
   */
  private paused = true;
  private autoResume = true;
  /** DATA that arrived while paused (bounded by the stream window we stop granting). */
  private held: Buffer[] | undefined;
  private endHeld = false;
  private endEmitted = false;
  /** When set, 'data', 'end', 'close' and 'wantTrailers' go to it instead of to listeners. */
  private sink: StreamSink | undefined;

  constructor(owner: StreamOwner, id: number, sendWindow: number, recvWindow: number) {
    super();
    this.owner = owner;
    this.id = id;
    this.sendWindow = sendWindow;
    this.recvWindow = recvWindow;
    this.session = owner;
  }

  get destroyed(): boolean {
    return this.isClosed;
  }

  get closed(): boolean {
    return this.isClosed;
  }

  get headersSent(): boolean {
    return this.sentHeaders;
  }

  /** The client's side ended and every byte of it was delivered. */
  get readableEnded(): boolean {
    return this.endEmitted;
  }

  /** The client may send no more (END_STREAM received, or the stream is gone). */
  get remoteClosed(): boolean {
    return this.remoteEnded || this.isClosed;
  }

  /** Whoever finds the stream backed up waits for 'drain' (call.ts's drain()), so it is promised one. */
  get writableNeedDrain(): boolean {
    if (this.isClosed || !this.owner.backedUp(this)) return false;
    this.needDrain = true;
    return true;
  }

  // ---- the response side ----

  respond(headers: Readonly<Record<string, unknown>>, options?: RespondOptions): void {
    if (this.isClosed) return;
    if (this.sentHeaders) throw new Error(`stream ${this.id}: headers already sent`);
    this.sentHeaders = true;
    const endStream = options?.endStream === true;
    this.waitForTrailers = options?.waitForTrailers === true;
    if (endStream) this.localEnded = true;
    this.owner.sendHeaders(this, headers, endStream);
    if (endStream) this.maybeClose();
  }

  /** Queues a chunk; false when the writer should wait for 'drain'. */
  write(chunk: Buffer | Uint8Array | string): boolean {
    if (this.isClosed || this.localEnded) return true;
    if (!this.sentHeaders) throw new Error(`stream ${this.id}: write before respond`);
    const bytes = asBuffer(chunk);
    if (bytes.length > 0) this.owner.sendData(this, bytes, false);
    if (this.owner.backedUp(this)) {
      this.needDrain = true;
      return false;
    }
    return true;
  }

  /**
   * Ends our side: with waitForTrailers, 'wantTrailers' asks for the trailers (at once: they are
   * queued behind the DATA, so the order on the wire is kept); otherwise END_STREAM on the last DATA.
   */
  end(body?: Buffer | Uint8Array | string): void {
    if (this.isClosed || this.localEnded) return;
    if (!this.sentHeaders) this.respond({ ":status": 200 });
    const chunk = body === undefined ? undefined : asBuffer(body);
    if (this.waitForTrailers) {
      if (chunk !== undefined && chunk.length > 0) this.owner.sendData(this, chunk, false);
      if (this.sink !== undefined) this.sink.onWantTrailers();
      else this.emit("wantTrailers");
      if (!this.localEnded) this.sendTrailers({});
      return;
    }
    this.localEnded = true;
    this.owner.sendData(this, chunk ?? EMPTY, true);
    this.maybeClose();
  }

  sendTrailers(trailers: Readonly<Record<string, unknown>>): void {
    if (this.isClosed || this.localEnded) return;
    this.localEnded = true;
    if (this.pendingBytes > 0 || this.pendingEnd) this.pendingTrailers = trailers;
    else this.owner.sendHeaders(this, trailers, true);
    this.maybeClose();
  }

  /** RST_STREAM with `code` (node's stream.close). */
  close(code: number = H2Error.NO_ERROR): void {
    if (this.isClosed) return;
    this.owner.sendReset(this, code);
  }

  destroy(): void {
    this.close(H2Error.INTERNAL_ERROR);
  }

  // ---- the request side ----

  override on(event: string | symbol, listener: Parameters<EventEmitter["on"]>[1]): this {
    super.on(event, listener);
    if (event === "data" && this.autoResume) this.resume();
    return this;
  }

  /** Takes the request-side events as direct calls (see StreamSink); starts the flow as a 'data' listener does. */
  attach(sink: StreamSink): void {
    this.sink = sink;
    if (this.autoResume) this.resume();
  }

  pause(): this {
    this.autoResume = false;
    this.paused = true;
    return this;
  }

  resume(): this {
    this.autoResume = false;
    if (!this.paused) return this;
    this.paused = false;
    const held = this.held;
    this.held = undefined;
    if (held) for (const chunk of held) this.deliver(chunk);
    if (this.endHeld && !this.paused) this.emitEnd();
    return this;
  }

  /** Connection side: a DATA payload (padding removed). */
  receiveData(chunk: Buffer): void {
    if (this.isClosed) return;
    if (this.paused) {
      (this.held ??= []).push(chunk);
      return;
    }
    this.deliver(chunk);
  }

  /** Connection side: the client's END_STREAM. */
  receiveEnd(): void {
    if (this.remoteEnded) return;
    this.remoteEnded = true;
    if (this.paused) this.endHeld = true;
    else this.emitEnd();
    this.maybeClose();
  }

  /** Connection side: the stream is gone (a reset either way, or the connection closed). */
  closeNow(): void {
    if (this.isClosed) return;
    this.isClosed = true;
    this.pending = [];
    this.pendingBytes = 0;
    this.pendingTrailers = undefined;
    this.held = undefined;
    process.nextTick(emitClose, this);
  }

  /** Connection side: our END_STREAM (DATA or trailers) left the queue. */
  localDone(): void {
    this.maybeClose();
  }

  private deliver(chunk: Buffer): void {
    if (this.sink !== undefined) this.sink.onData(chunk);
    else this.emit("data", chunk);
    this.owner.consumed(this, chunk.length);
  }

  private emitEnd(): void {
    this.endHeld = false;
    if (this.endEmitted) return;
    this.endEmitted = true;
    if (this.sink !== undefined) this.sink.onReadEnd();
    else this.emit("end");
  }

  /** 'close' goes to the sink and to any listener (a writer waiting for 'drain' may be one). */
  emitClose(): void {
    this.sink?.onClose();
    if (this.listenerCount("close") > 0) this.emit("close");
  }

  private maybeClose(): void {
    if (this.isClosed || !this.remoteEnded || !this.localEnded) return;
    if (this.pendingBytes > 0 || this.pendingEnd || this.pendingTrailers !== undefined) return;
    this.owner.finished(this);
  }
}

const EMPTY = Buffer.alloc(0);

/** Plain-HTTP bodies come as strings or Uint8Arrays; gRPC frames are Buffers already. */
function asBuffer(chunk: Buffer | Uint8Array | string): Buffer {
  if (Buffer.isBuffer(chunk)) return chunk;
  if (typeof chunk === "string") return Buffer.from(chunk);
  return Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
}

function emitClose(stream: H2Stream): void {
  stream.emitClose();
}
