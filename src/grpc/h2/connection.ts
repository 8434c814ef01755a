/**
 * Our own server side of one HTTP/2 connection (RFC 9113), for the gRPC client port: the frame
 * reader, HPACK decoding of requests (hpack.ts), SETTINGS, flow control both ways, PING and the
 * keepalive policy of etcd's flags (keepalive.ts), GOAWAY, and the streams (stream.ts). What it
 * is for: node:http2 costs ~35 µs of CPU per unary call on this machine (its Duplex per stream,
 * nghttp2's callbacks into JavaScript, the header objects both ways); this connection parses
 * frames from the socket's chunks directly and writes every frame of an event-loop turn in one
 * socket write (bench/results/own-http2-*.md has the A/B).
 *
 * Errors follow RFC 9113 5.4: a connection error sends GOAWAY with its code and ends the
 * connection; a stream error resets that stream only.
 */

import type { IncomingHttpHeaders } from "node:http2";
import type { Socket } from "node:net";
import { type HeaderField, HpackDecoder, HpackError } from "./hpack.js";
import { CLIENT_PREFACE, FRAME_HEADER_BYTES, Flag, FrameType, Http2ProtocolError, MAX_FRAME_SIZE, SettingsId, headersFragment } from "./http2-frame.js";
import { MalformedRequest, copyRequestHeaders, requestHeaders, responseBlock } from "./header_block.js";
import { type KeepaliveOptions, PingStrikes, TOO_MANY_PINGS } from "./keepalive.js";
import { H2Error, H2Stream, type StreamOwner } from "./stream.js";

/** RFC 9113 6.9.2: the initial window of every stream and of the connection. */
const DEFAULT_WINDOW = 65535;
const MAX_WINDOW = 2 ** 31 - 1;
/** The connection receive window we grant at once (node:http2's server set the same with setLocalWindowSize). */
const CONNECTION_WINDOW = 16 * 1024 * 1024;
/** A stream's consumed bytes are granted back once this many are due (Go clients send 16 KiB frames). */
const STREAM_UPDATE_BYTES = 16 * 1024;
/** Queued output (ours and the socket's) past which writers are told to wait for 'drain'. */
const HIGH_WATER_BYTES = 256 * 1024;
/** Largest header block (HEADERS and its CONTINUATIONs) accepted: bounds what a client can make us buffer. */
const MAX_HEADER_BLOCK_BYTES = 1024 * 1024;
/** A connection that ended with GOAWAY is destroyed this long after, if the client has not closed it. */
const GOAWAY_LINGER_MS = 1000;
const SETTINGS_ENABLE_PUSH = 0x2;
const SETTINGS_INITIAL_WINDOW_SIZE = 0x4;
const SETTINGS_MAX_FRAME_SIZE = 0x5;
const MAX_FRAME_SIZE_LIMIT = 2 ** 24 - 1;

export interface ConnectionOptions {
  /** SETTINGS_MAX_CONCURRENT_STREAMS we announce and enforce (REFUSED_STREAM past it). */
  maxConcurrentStreams: number;
  keepalive: KeepaliveOptions;
  /** How long a PING ACK may wait for other frames to ride with (default PING_ACK_HOLD_MS). */
  pingAckHoldMs?: number;
}

/** What the connection tells the server. */
export interface ConnectionHost {
  /** A request's header block arrived: a new stream (its body follows as 'data' events). */
  onStream(stream: H2Stream, headers: IncomingHttpHeaders): void;
  /** The connection is gone (every stream closed). */
  onConnectionClosed(connection: H2Connection): void;
}

/** A connection error (RFC 9113 5.4.1). */
class ConnectionError extends Error {
  constructor(
    readonly code: number,
    message: string,
  ) {
    super(message);
  }
}

interface HeaderBlockInProgress {
  streamId: number;
  endStream: boolean;
  parts: Buffer[];
  bytes: number;
}

export class H2Connection implements StreamOwner {
  readonly socket: Socket;
  private readonly host: ConnectionHost;
  private readonly options: ConnectionOptions;
  private readonly streams = new Map<number, H2Stream>();
  private readonly decoder = new HpackDecoder();
  /** The decoder's list for the last request block and the header object made from it (see onHeaderBlock). */
  private repeatFields: readonly HeaderField[] | undefined;
  private repeatHeaders: IncomingHttpHeaders | undefined;
  /** Highest stream id the client opened (RFC 9113 5.1.1: ids only grow). */
  private lastStreamId = 0;
  /** After our GOAWAY: streams above this are not processed. */
  private goawayLastId = -1;
  private prefaceLeft = CLIENT_PREFACE.length;
  private input: Buffer | undefined;
  private headerBlock: HeaderBlockInProgress | undefined;
  // Output: every frame of a turn goes into one buffer, written once (flush).
  private out: Buffer = Buffer.allocUnsafe(16 * 1024);
  private outPos = 0;
  private flushScheduled = false;
  // Flow control.
  private sendWindow = DEFAULT_WINDOW;
  private peerInitialWindow = DEFAULT_WINDOW;
  private peerMaxFrameSize = MAX_FRAME_SIZE;
  private recvWindow = CONNECTION_WINDOW;
  private recvUnacked = 0;
  /** Streams with DATA waiting for window, in order. */
  private readonly blocked = new Set<H2Stream>();
  /** Streams whose writer waits for 'drain'. */
  private readonly drainWaiters = new Set<H2Stream>();
  // Lifecycle.
  private dead = false;
  private closing = false;
  private peerGoaway = false;
  // Keepalive (etcd's --grpc-keepalive-* policy, as keepalive.ts's SessionKeepalive on node:http2).
  private readonly strikes: PingStrikes;
  private streamsSinceActivity = 0;
  /** We sent HEADERS or DATA since the client's last PING: like grpc-go, that clears its strikes. */
  private sentSincePing = false;
  private openCalls = 0;
  private pingTimer: NodeJS.Timeout | undefined;
  private ackTimer: NodeJS.Timeout | undefined;
  /** Flushes a PING ACK held for a call's response (see onPingFrame). */
  private pingAckTimer: NodeJS.Timeout | undefined;

  constructor(socket: Socket, initial: Buffer | undefined, options: ConnectionOptions, host: ConnectionHost) {
    this.socket = socket;
    this.options = options;
    this.host = host;
    this.strikes = new PingStrikes(options.keepalive);
    socket.on("data", (chunk: Buffer) => this.onSocketData(chunk));
    socket.on("close", () => this.onSocketClose());
    socket.on("error", () => {});
    socket.on("drain", () => this.releaseDrainWaiters());
    this.writeSettings();
    this.writeWindowUpdate(0, CONNECTION_WINDOW - DEFAULT_WINDOW);
    if (options.keepalive.intervalMs > 0) {
      this.pingTimer = setInterval(() => this.onKeepaliveInterval(), options.keepalive.intervalMs);
      this.pingTimer.unref();
    }
    if (initial !== undefined && initial.length > 0) this.onSocketData(initial);
  }

  get closed(): boolean {
    return this.dead;
  }

  /** Graceful close: GOAWAY with the last stream we took; the connection ends once its streams do. */
  close(): void {
    if (this.dead || this.closing) return;
    this.closing = true;
    this.goawayLastId = this.lastStreamId;
    this.writeGoaway(this.lastStreamId, H2Error.NO_ERROR, "");
    this.endIfIdle();
  }

  destroy(): void {
    this.socket.destroy();
    this.onSocketClose();
  }

  // ---- CallConnection (call.ts): gRPC calls open, for the keepalive policy ----

  streamOpened(): void {
    this.openCalls++;
  }

  streamClosed(): void {
    this.openCalls--;
  }

  // ---- reading ----

  private onSocketData(chunk: Buffer): void {
    if (this.dead) return;
    let buf = this.input === undefined ? chunk : Buffer.concat([this.input, chunk]);
    this.input = undefined;
    let at = 0;
    try {
      if (this.prefaceLeft > 0) {
        at = this.readPreface(buf);
        if (this.prefaceLeft > 0) return;
      }
      while (buf.length - at >= FRAME_HEADER_BYTES) {
        const length = (buf[at]! << 16) | (buf[at + 1]! << 8) | buf[at + 2]!;
        if (length > MAX_FRAME_SIZE) throw new ConnectionError(H2Error.FRAME_SIZE_ERROR, `frame of ${length} bytes above SETTINGS_MAX_FRAME_SIZE`);
        const end = at + FRAME_HEADER_BYTES + length;
        if (end > buf.length) break;
        const type = buf[at + 3]!;
        const flags = buf[at + 4]!;
        const streamId = buf.readUInt32BE(at + 5) & 0x7fffffff;
        this.onFrame(type, flags, streamId, buf.subarray(at + FRAME_HEADER_BYTES, end));
        at = end;
        if (this.dead) return;
      }
    } catch (err) {
      if (err instanceof ConnectionError) this.fail(err.code, err.message);
      else if (err instanceof Http2ProtocolError) this.fail(H2Error.PROTOCOL_ERROR, err.message);
      else {
        // A bug of ours met by one client's frames: that connection ends, the member keeps serving.
        process.emitWarning(`HTTP/2 connection ended on an internal error: ${(err as Error).stack ?? String(err)}`);
        this.fail(H2Error.INTERNAL_ERROR, "internal error");
      }
      return;
    }
    if (at < buf.length) {
      // Keep the partial frame in a buffer of its own, not a view pinning the socket's chunk.
      buf = buf.subarray(at);
      this.input = Buffer.from(buf);
    }
  }

  /** Matches the client preface; returns the offset after what it consumed. */
  private readPreface(buf: Buffer): number {
    const start = CLIENT_PREFACE.length - this.prefaceLeft;
    const take = Math.min(this.prefaceLeft, buf.length);
    if (!buf.subarray(0, take).equals(CLIENT_PREFACE.subarray(start, start + take))) {
      throw new ConnectionError(H2Error.PROTOCOL_ERROR, "bad client preface");
    }
    this.prefaceLeft -= take;
    return take;
  }

  private onFrame(type: number, flags: number, streamId: number, payload: Buffer): void {
    const block = this.headerBlock;
    if (block !== undefined && (type !== FrameType.CONTINUATION || streamId !== block.streamId)) {
      throw new ConnectionError(H2Error.PROTOCOL_ERROR, `frame type ${type} inside the header block of stream ${block.streamId}`);
    }
    switch (type) {
      case FrameType.DATA:
        return this.onDataFrame(flags, streamId, payload);
      case FrameType.HEADERS:
        return this.onHeadersFrame(flags, streamId, payload);
      case FrameType.PRIORITY:
        return this.onPriorityFrame(streamId, payload);
      case FrameType.RST_STREAM:
        return this.onResetFrame(streamId, payload);
      case FrameType.SETTINGS:
        return this.onSettingsFrame(flags, streamId, payload);
      case FrameType.PUSH_PROMISE:
        throw new ConnectionError(H2Error.PROTOCOL_ERROR, "PUSH_PROMISE from a client");
      case FrameType.PING:
        return this.onPingFrame(flags, streamId, payload);
      case FrameType.GOAWAY:
        return this.onGoawayFrame(streamId);
      case FrameType.WINDOW_UPDATE:
        return this.onWindowUpdateFrame(streamId, payload);
      case FrameType.CONTINUATION:
        return this.onContinuationFrame(flags, streamId, payload);
      default:
        // RFC 9113 4.1: frames of unknown types are ignored.
        return;
    }
  }

  private onDataFrame(flags: number, streamId: number, payload: Buffer): void {
    if (streamId === 0) throw new ConnectionError(H2Error.PROTOCOL_ERROR, "DATA on stream 0");
    const length = payload.length;
    this.recvWindow -= length;
    if (this.recvWindow < 0) throw new ConnectionError(H2Error.FLOW_CONTROL_ERROR, "DATA beyond the connection window");
    this.grantConnection(length);
    let data = payload;
    if (flags & Flag.PADDED) {
      if (length < 1 || payload[0]! >= length) throw new ConnectionError(H2Error.PROTOCOL_ERROR, "DATA padding exceeds the payload");
      data = payload.subarray(1, length - payload[0]!);
    }
    const stream = this.streams.get(streamId);
    if (stream === undefined) {
      if (streamId > this.lastStreamId) throw new ConnectionError(H2Error.PROTOCOL_ERROR, `DATA on idle stream ${streamId}`);
      // A stream we closed (or reset): frames the client sent before it knew are dropped (RFC 9113 5.1).
      return;
    }
    if (stream.remoteClosed) {
      this.sendReset(stream, H2Error.STREAM_CLOSED);
      return;
    }
    stream.recvWindow -= length;
    if (stream.recvWindow < 0) {
      this.sendReset(stream, H2Error.FLOW_CONTROL_ERROR);
      return;
    }
    // Padding is consumed at once; the payload once the handler takes it (stream.ts).
    if (length > data.length) this.consumed(stream, length - data.length);
    // A copy: a request's bytes may be kept (raft log, caches) and must not pin the socket's chunk.
    if (data.length > 0) stream.receiveData(Buffer.from(data));
    if (flags & Flag.END_STREAM) stream.receiveEnd();
  }

  private onHeadersFrame(flags: number, streamId: number, payload: Buffer): void {
    if (streamId === 0) throw new ConnectionError(H2Error.PROTOCOL_ERROR, "HEADERS on stream 0");
    const { fragment, priority } = headersFragment(flags, payload);
    if (priority !== undefined && (priority.readUInt32BE(0) & 0x7fffffff) === streamId) {
      throw new ConnectionError(H2Error.PROTOCOL_ERROR, `stream ${streamId} depends on itself`);
    }
    const endStream = (flags & Flag.END_STREAM) !== 0;
    if (flags & Flag.END_HEADERS) this.onHeaderBlock(streamId, endStream, fragment);
    else this.headerBlock = { streamId, endStream, parts: [Buffer.from(fragment)], bytes: fragment.length };
  }

  private onContinuationFrame(flags: number, streamId: number, payload: Buffer): void {
    const block = this.headerBlock;
    if (block === undefined) throw new ConnectionError(H2Error.PROTOCOL_ERROR, `CONTINUATION on stream ${streamId} without HEADERS`);
    block.parts.push(Buffer.from(payload));
    block.bytes += payload.length;
    if (block.bytes > MAX_HEADER_BLOCK_BYTES) throw new ConnectionError(H2Error.ENHANCE_YOUR_CALM, `header block above ${MAX_HEADER_BLOCK_BYTES} bytes`);
    if (flags & Flag.END_HEADERS) {
      this.headerBlock = undefined;
      this.onHeaderBlock(block.streamId, block.endStream, Buffer.concat(block.parts, block.bytes));
    }
  }

  private onHeaderBlock(streamId: number, endStream: boolean, block: Buffer): void {
    let fields;
    try {
      fields = this.decoder.decode(block);
    } catch (err) {
      if (err instanceof HpackError) throw new ConnectionError(H2Error.COMPRESSION_ERROR, err.message);
      throw err;
    }
    const existing = this.streams.get(streamId);
    if (existing !== undefined) {
      // Trailers of a request: they must end it (RFC 9113 8.1).
      if (!endStream || existing.remoteClosed) this.sendReset(existing, existing.remoteClosed ? H2Error.STREAM_CLOSED : H2Error.PROTOCOL_ERROR);
      else existing.receiveEnd();
      return;
    }
    if (streamId % 2 === 0) throw new ConnectionError(H2Error.PROTOCOL_ERROR, `client stream id ${streamId} is even`);
    // RFC 9113 5.1.1: ids only grow; a lower one is a PROTOCOL_ERROR (Go's server says the same).
    if (streamId <= this.lastStreamId) throw new ConnectionError(H2Error.PROTOCOL_ERROR, `HEADERS on stream ${streamId} at or below ${this.lastStreamId}`);
    this.lastStreamId = streamId;
    // After our GOAWAY, new streams are not processed (the client retries them elsewhere).
    if (this.goawayLastId >= 0 && streamId > this.goawayLastId) return;
    if (this.streams.size >= this.options.maxConcurrentStreams) {
      this.writeReset(streamId, H2Error.REFUSED_STREAM);
      return;
    }
    let headers: IncomingHttpHeaders;
    if (fields === this.repeatFields) {
      // The decoder's list of the last block again: the same header object, checked already.
      headers = copyRequestHeaders(this.repeatHeaders!);
    } else {
      try {
        headers = requestHeaders(fields);
      } catch (err) {
        if (!(err instanceof MalformedRequest)) throw err;
        this.writeReset(streamId, H2Error.PROTOCOL_ERROR);
        return;
      }
      // Kept apart from the object the call gets, which is the call's to change.
      this.repeatFields = fields;
      this.repeatHeaders = copyRequestHeaders(headers);
    }
    const stream = new H2Stream(this, streamId, this.peerInitialWindow, DEFAULT_WINDOW);
    this.streams.set(streamId, stream);
    this.streamsSinceActivity++;
    this.host.onStream(stream, headers);
    if (endStream) stream.receiveEnd();
  }

  private onPriorityFrame(streamId: number, payload: Buffer): void {
    if (streamId === 0) throw new ConnectionError(H2Error.PROTOCOL_ERROR, "PRIORITY on stream 0");
    if (payload.length !== 5) {
      const stream = this.streams.get(streamId);
      if (stream !== undefined) this.sendReset(stream, H2Error.FRAME_SIZE_ERROR);
      else this.writeReset(streamId, H2Error.FRAME_SIZE_ERROR);
    }
    // Priorities are advisory (RFC 9113 5.3): every stream is served in arrival order.
  }

  private onResetFrame(streamId: number, payload: Buffer): void {
    if (streamId === 0) throw new ConnectionError(H2Error.PROTOCOL_ERROR, "RST_STREAM on stream 0");
    if (payload.length !== 4) throw new ConnectionError(H2Error.FRAME_SIZE_ERROR, "RST_STREAM of a length other than 4");
    const stream = this.streams.get(streamId);
    if (stream === undefined) {
      if (streamId > this.lastStreamId) throw new ConnectionError(H2Error.PROTOCOL_ERROR, `RST_STREAM on idle stream ${streamId}`);
      return;
    }
    this.forget(stream);
  }

  private onSettingsFrame(flags: number, streamId: number, payload: Buffer): void {
    if (streamId !== 0) throw new ConnectionError(H2Error.PROTOCOL_ERROR, "SETTINGS on a stream");
    if (flags & Flag.ACK) {
      if (payload.length !== 0) throw new ConnectionError(H2Error.FRAME_SIZE_ERROR, "SETTINGS ACK with a payload");
      return;
    }
    if (payload.length % 6 !== 0) throw new ConnectionError(H2Error.FRAME_SIZE_ERROR, "SETTINGS of a length not a multiple of 6");
    for (let at = 0; at < payload.length; at += 6) {
      const id = payload.readUInt16BE(at);
      const value = payload.readUInt32BE(at + 2);
      if (id === SETTINGS_ENABLE_PUSH && value > 1) throw new ConnectionError(H2Error.PROTOCOL_ERROR, `SETTINGS_ENABLE_PUSH ${value}`);
      if (id === SETTINGS_INITIAL_WINDOW_SIZE) this.setPeerInitialWindow(value);
      if (id === SETTINGS_MAX_FRAME_SIZE) {
        if (value < MAX_FRAME_SIZE || value > MAX_FRAME_SIZE_LIMIT) throw new ConnectionError(H2Error.PROTOCOL_ERROR, `SETTINGS_MAX_FRAME_SIZE ${value}`);
        this.peerMaxFrameSize = value;
      }
      // HEADER_TABLE_SIZE: our encoder never indexes; MAX_CONCURRENT_STREAMS: we never push;
      // MAX_HEADER_LIST_SIZE: advisory. Unknown settings are ignored (RFC 9113 6.5.2).
    }
    this.writeFrameHeader(0, FrameType.SETTINGS, Flag.ACK, 0);
    this.drainBlocked();
  }

  /** RFC 9113 6.9.2: a new initial window moves every open stream's window by the difference. */
  private setPeerInitialWindow(value: number): void {
    if (value > MAX_WINDOW) throw new ConnectionError(H2Error.FLOW_CONTROL_ERROR, `SETTINGS_INITIAL_WINDOW_SIZE ${value}`);
    const delta = value - this.peerInitialWindow;
    this.peerInitialWindow = value;
    for (const stream of this.streams.values()) {
      stream.sendWindow += delta;
      if (stream.sendWindow > MAX_WINDOW) throw new ConnectionError(H2Error.FLOW_CONTROL_ERROR, `stream ${stream.id} window above 2^31-1`);
    }
  }

  private onPingFrame(flags: number, streamId: number, payload: Buffer): void {
    if (streamId !== 0) throw new ConnectionError(H2Error.PROTOCOL_ERROR, "PING on a stream");
    if (payload.length !== 8) throw new ConnectionError(H2Error.FRAME_SIZE_ERROR, "PING of a length other than 8");
    if (flags & Flag.ACK) {
      clearTimeout(this.ackTimer);
      this.ackTimer = undefined;
      return;
    }
    // grpc-go resets a client's ping strikes whenever it sends HEADERS or DATA (its BDP
    // estimator pings after every burst of DATA it receives).
    const activity = this.streamsSinceActivity + (this.sentSincePing ? 1 : 0);
    this.sentSincePing = false;
    const tooMany = this.strikes.onPing(Date.now(), activity, this.openCalls);
    this.streamsSinceActivity = 0;
    if (tooMany) {
      this.fail(H2Error.ENHANCE_YOUR_CALM, TOO_MANY_PINGS);
      return;
    }
    // The ACK rides in the next write of other frames (grpc-go's clients ping after every response
    // they read, for their window estimate: with one request in flight that is one PING per request)
    // instead of a socket write and a wake-up of the client of its own, for at most
    // PING_ACK_HOLD_MS. Held whether or not a call is open when the PING is read: the client's next
    // request follows its PING, in the same chunk or a moment later, and the ACK rides with its
    // response (a strace of one client's puts: an ACK written alone for every put, 83 of 300 PINGs
    // read with no call open and 217 in the chunk whose HEADERS opened the next call).
    const at = this.writeFrameHeader(8, FrameType.PING, Flag.ACK, 0, false);
    payload.copy(this.out, at);
    if (!this.flushScheduled) this.pingAckTimer ??= setTimeout(flushConnection, this.options.pingAckHoldMs ?? PING_ACK_HOLD_MS, this);
  }

  private onGoawayFrame(streamId: number): void {
    if (streamId !== 0) throw new ConnectionError(H2Error.PROTOCOL_ERROR, "GOAWAY on a stream");
    // The client opens no more streams; the ones open finish, then the connection ends.
    this.peerGoaway = true;
    this.endIfIdle();
  }

  private onWindowUpdateFrame(streamId: number, payload: Buffer): void {
    if (payload.length !== 4) throw new ConnectionError(H2Error.FRAME_SIZE_ERROR, "WINDOW_UPDATE of a length other than 4");
    const increment = payload.readUInt32BE(0) & 0x7fffffff;
    if (streamId === 0) {
      if (increment === 0) throw new ConnectionError(H2Error.PROTOCOL_ERROR, "WINDOW_UPDATE of 0 on the connection");
      this.sendWindow += increment;
      if (this.sendWindow > MAX_WINDOW) throw new ConnectionError(H2Error.FLOW_CONTROL_ERROR, "connection window above 2^31-1");
      this.drainBlocked();
      return;
    }
    const stream = this.streams.get(streamId);
    if (stream === undefined) {
      if (streamId > this.lastStreamId) throw new ConnectionError(H2Error.PROTOCOL_ERROR, `WINDOW_UPDATE on idle stream ${streamId}`);
      return;
    }
    if (increment === 0) {
      this.sendReset(stream, H2Error.PROTOCOL_ERROR);
      return;
    }
    stream.sendWindow += increment;
    if (stream.sendWindow > MAX_WINDOW) {
      this.sendReset(stream, H2Error.FLOW_CONTROL_ERROR);
      return;
    }
    if (this.blocked.has(stream)) this.drainBlocked();
  }

  // ---- StreamOwner: what streams send ----

  sendHeaders(stream: H2Stream, headers: Readonly<Record<string, unknown>>, endStream: boolean): void {
    if (!this.streams.has(stream.id)) return;
    this.writeHeaderBlock(stream.id, responseBlock(headers), endStream);
  }

  sendData(stream: H2Stream, data: Buffer, endStream: boolean): void {
    if (!this.streams.has(stream.id)) return;
    if (stream.pendingBytes > 0 || stream.pendingEnd) {
      this.hold(stream, data, endStream);
      return;
    }
    const sent = this.writeData(stream, data, 0, endStream);
    if (sent < data.length) this.hold(stream, data.subarray(sent), endStream);
  }

  sendReset(stream: H2Stream, code: number): void {
    if (!this.streams.has(stream.id)) return;
    this.writeReset(stream.id, code);
    this.forget(stream);
  }

  finished(stream: H2Stream): void {
    if (this.streams.has(stream.id)) this.forget(stream);
  }

  consumed(stream: H2Stream, bytes: number): void {
    if (stream.remoteClosed) return;
    stream.unacked += bytes;
    if (stream.unacked < STREAM_UPDATE_BYTES) return;
    this.writeWindowUpdate(stream.id, stream.unacked);
    stream.recvWindow += stream.unacked;
    stream.unacked = 0;
  }

  backedUp(stream: H2Stream): boolean {
    const backed = stream.pendingBytes > 0 || this.outPos + this.socket.writableLength > HIGH_WATER_BYTES;
    if (backed) this.drainWaiters.add(stream);
    return backed;
  }

  // ---- flow control of what we send ----

  private hold(stream: H2Stream, data: Buffer, endStream: boolean): void {
    if (data.length > 0) {
      stream.pending.push(data);
      stream.pendingBytes += data.length;
    }
    if (endStream) stream.pendingEnd = true;
    this.blocked.add(stream);
  }

  /** Writes DATA from `data[offset..]` as the windows allow; returns the offset reached. */
  private writeData(stream: H2Stream, data: Buffer, offset: number, endStream: boolean): number {
    if (data.length === offset) {
      if (endStream) this.writeDataFrame(stream.id, data, offset, 0, true);
      return offset;
    }
    while (offset < data.length) {
      const n = Math.min(data.length - offset, stream.sendWindow, this.sendWindow, this.peerMaxFrameSize);
      if (n <= 0) break;
      const last = offset + n === data.length;
      this.writeDataFrame(stream.id, data, offset, n, endStream && last);
      stream.sendWindow -= n;
      this.sendWindow -= n;
      offset += n;
    }
    return offset;
  }

  /** Sends what window updates allow of every blocked stream, in order. */
  private drainBlocked(): void {
    for (const stream of this.blocked) {
      if (this.sendWindow <= 0) break;
      this.drainStream(stream);
    }
    this.releaseDrainWaiters();
  }

  private drainStream(stream: H2Stream): void {
    const pending = stream.pending;
    // An END_STREAM queued behind nothing (all DATA already out) goes alone.
    if (pending.length === 0 && stream.pendingEnd) this.writeDataFrame(stream.id, EMPTY, 0, 0, true);
    while (pending.length > 0) {
      const chunk = pending[0]!;
      const sent = this.writeData(stream, chunk, 0, pending.length === 1 && stream.pendingEnd);
      stream.pendingBytes -= sent;
      if (sent < chunk.length) {
        pending[0] = chunk.subarray(sent);
        return;
      }
      pending.shift();
    }
    this.blocked.delete(stream);
    stream.pendingEnd = false;
    const trailers = stream.pendingTrailers;
    stream.pendingTrailers = undefined;
    if (trailers !== undefined) this.writeHeaderBlock(stream.id, responseBlock(trailers), true);
    stream.localDone();
  }

  private releaseDrainWaiters(): void {
    if (this.drainWaiters.size === 0) return;
    if (this.outPos + this.socket.writableLength > HIGH_WATER_BYTES) return;
    for (const stream of [...this.drainWaiters]) {
      if (stream.pendingBytes > 0 && !stream.closed) continue;
      this.drainWaiters.delete(stream);
      if (stream.needDrain) {
        stream.needDrain = false;
        stream.emit("drain");
      }
    }
  }

  /** Grants the connection window back in large steps (DATA is buffered per stream, bounded by its window). */
  private grantConnection(bytes: number): void {
    this.recvUnacked += bytes;
    if (this.recvUnacked < CONNECTION_WINDOW / 4) return;
    this.writeWindowUpdate(0, this.recvUnacked);
    this.recvWindow += this.recvUnacked;
    this.recvUnacked = 0;
  }

  // ---- lifecycle ----

  /** Stream closed either way: it leaves the table; 'close' follows on the stream. */
  private forget(stream: H2Stream): void {
    this.streams.delete(stream.id);
    this.blocked.delete(stream);
    this.drainWaiters.delete(stream);
    stream.closeNow();
    this.endIfIdle();
    // The connection's last open call is answered: its frames leave now instead of at the end of
    // the turn (setImmediate), which waits out a whole loop iteration (the flush is scheduled from
    // the check phase, where the raft loop applies) and whatever poll work falls into it. With one
    // call per connection at a time (etcdctl, a client with one request in flight) that was 15 µs
    // at the median and 42 on average of a ~1 ms put, and a p90 of 78 µs
    // (bench/results/one-client-timeline-2026-12-07.txt). A connection with calls still open
    // keeps the end-of-turn flush, so answers of one turn still share a write.
    if (this.streams.size === 0 && this.flushScheduled) this.flush();
  }

  private endIfIdle(): void {
    if ((this.closing || this.peerGoaway) && this.streams.size === 0 && !this.dead) {
      this.flush();
      this.socket.end();
      this.lingerThenDestroy();
    }
  }

  /** A connection error: GOAWAY with its code, then the connection ends (RFC 9113 5.4.1). */
  private fail(code: number, debug: string): void {
    if (this.dead) return;
    this.writeGoaway(this.lastStreamId, code, debug);
    this.flush();
    this.socket.end();
    this.lingerThenDestroy();
    this.onSocketClose();
  }

  private lingerThenDestroy(): void {
    setTimeout(() => this.socket.destroy(), GOAWAY_LINGER_MS).unref();
  }

  private onSocketClose(): void {
    if (this.dead) return;
    this.dead = true;
    clearInterval(this.pingTimer);
    clearTimeout(this.ackTimer);
    clearTimeout(this.pingAckTimer);
    for (const stream of this.streams.values()) stream.closeNow();
    this.streams.clear();
    this.blocked.clear();
    this.drainWaiters.clear();
    this.host.onConnectionClosed(this);
  }

  /** etcd's --grpc-keepalive-interval / -timeout: ping an idle client, drop it if no ACK comes. */
  private onKeepaliveInterval(): void {
    if (this.streamsSinceActivity > 0 || this.ackTimer !== undefined || this.dead) {
      this.streamsSinceActivity = 0;
      return;
    }
    this.ackTimer = setTimeout(() => this.destroy(), this.options.keepalive.timeoutMs);
    this.ackTimer.unref();
    this.writeFrameHeader(8, FrameType.PING, 0, 0);
    this.out.fill(0, this.outPos - 8, this.outPos);
  }

  // ---- writing ----

  private writeSettings(): void {
    const at = this.writeFrameHeader(6, FrameType.SETTINGS, 0, 0);
    this.out.writeUInt16BE(SettingsId.MAX_CONCURRENT_STREAMS, at);
    this.out.writeUInt32BE(this.options.maxConcurrentStreams, at + 2);
  }

  private writeWindowUpdate(streamId: number, increment: number): void {
    const at = this.writeFrameHeader(4, FrameType.WINDOW_UPDATE, 0, streamId);
    this.out.writeUInt32BE(increment, at);
  }

  private writeReset(streamId: number, code: number): void {
    const at = this.writeFrameHeader(4, FrameType.RST_STREAM, 0, streamId);
    this.out.writeUInt32BE(code, at);
  }

  private writeGoaway(lastStreamId: number, code: number, debug: string): void {
    const debugBytes = Buffer.byteLength(debug, "latin1");
    const at = this.writeFrameHeader(8 + debugBytes, FrameType.GOAWAY, 0, 0);
    this.out.writeUInt32BE(lastStreamId, at);
    this.out.writeUInt32BE(code, at + 4);
    this.out.write(debug, at + 8, "latin1");
  }

  private writeHeaderBlock(streamId: number, block: Buffer, endStream: boolean): void {
    const max = this.peerMaxFrameSize;
    let offset = 0;
    let type: number = FrameType.HEADERS;
    this.sentSincePing = true;
    do {
      const n = Math.min(block.length - offset, max);
      const last = offset + n === block.length;
      const flags = (type === FrameType.HEADERS && endStream ? Flag.END_STREAM : 0) | (last ? Flag.END_HEADERS : 0);
      const at = this.writeFrameHeader(n, type, flags, streamId);
      block.copy(this.out, at, offset, offset + n);
      offset += n;
      type = FrameType.CONTINUATION;
    } while (offset < block.length);
  }

  private writeDataFrame(streamId: number, data: Buffer, offset: number, length: number, endStream: boolean): void {
    this.sentSincePing = true;
    const at = this.writeFrameHeader(length, FrameType.DATA, endStream ? Flag.END_STREAM : 0, streamId);
    if (length > 0) data.copy(this.out, at, offset, offset + length);
  }

  /** Reserves a frame in the output buffer and writes its header; returns the payload's offset. */
  private writeFrameHeader(length: number, type: number, flags: number, streamId: number, flushSoon = true): number {
    const need = FRAME_HEADER_BYTES + length;
    if (this.outPos + need > this.out.length) this.grow(need);
    const out = this.out;
    const at = this.outPos;
    out[at] = (length >>> 16) & 0xff;
    out[at + 1] = (length >>> 8) & 0xff;
    out[at + 2] = length & 0xff;
    out[at + 3] = type;
    out[at + 4] = flags;
    out.writeUInt32BE(streamId, at + 5);
    this.outPos = at + need;
    if (flushSoon && !this.flushScheduled) {
      this.flushScheduled = true;
      setImmediate(flushConnection, this);
    }
    return at + FRAME_HEADER_BYTES;
  }

  private grow(need: number): void {
    const next = Buffer.allocUnsafe(Math.max(this.out.length * 2, this.outPos + need));
    this.out.copy(next, 0, 0, this.outPos);
    this.out = next;
  }

  /** Writes every frame queued this turn in one socket write. */
  flush(): void {
    this.flushScheduled = false;
    if (this.pingAckTimer !== undefined) {
      clearTimeout(this.pingAckTimer);
      this.pingAckTimer = undefined;
    }
    if (this.outPos === 0 || this.socket.destroyed) {
      this.outPos = 0;
      return;
    }
    const written = this.outPos;
    this.outPos = 0;
    this.socket.write(this.out.subarray(0, written));
    // Written through at once (the usual case: the socket's Writable called back, nothing is
    // buffered): the buffer is ours again. Else the socket holds it until sent, and the next
    // turn's frames go into a new one.
    if (this.socket.writableLength !== 0) this.out = Buffer.allocUnsafe(Math.max(16 * 1024, Math.min(written, 1024 * 1024)));
    this.releaseDrainWaiters();
  }
}

const EMPTY = Buffer.alloc(0);

/** How long a PING ACK may wait for the frames of an open call (RFC 9113 6.7: "SHOULD" be prompt). */
const PING_ACK_HOLD_MS = 5;

function flushConnection(connection: H2Connection): void {
  connection.flush();
}
