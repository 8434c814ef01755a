/**
 * A raw HTTP/2 client over a net.Socket for the conformance tests: it writes
 * the frames a test asks for, byte for byte, and logs every frame the server
 * sends (header blocks decoded with our HpackDecoder). It keeps the flow
 * control books of both directions: sendData never exceeds the windows the
 * server granted, and any DATA beyond the windows we granted is recorded in
 * `violations` (tests assert it stays empty).
 */

import net, { type Socket } from "node:net";
import { type HeaderField, HpackDecoder, encodeLiteralBlock } from "../../../src/grpc/h2/hpack.js";
import {
  CLIENT_PREFACE,
  FRAME_HEADER_BYTES,
  Flag,
  FrameType,
  MAX_FRAME_SIZE,
  frame,
  readFrameHeader,
  settingsFrame,
} from "../../../src/grpc/h2/http2-frame.js";

/** RFC 7540 6.5.2 identifiers beyond the two http2-frame.ts names. */
export const Setting = {
  HEADER_TABLE_SIZE: 0x1,
  ENABLE_PUSH: 0x2,
  MAX_CONCURRENT_STREAMS: 0x3,
  INITIAL_WINDOW_SIZE: 0x4,
  MAX_FRAME_SIZE: 0x5,
  MAX_HEADER_LIST_SIZE: 0x6,
} as const;

/** RFC 7540 section 7. */
export const ErrorCode = {
  NO_ERROR: 0x0,
  PROTOCOL_ERROR: 0x1,
  INTERNAL_ERROR: 0x2,
  FLOW_CONTROL_ERROR: 0x3,
  STREAM_CLOSED: 0x5,
  FRAME_SIZE_ERROR: 0x6,
  REFUSED_STREAM: 0x7,
  CANCEL: 0x8,
  COMPRESSION_ERROR: 0x9,
} as const;

const DEFAULT_WINDOW = 65_535;

export interface ReceivedFrame {
  type: number;
  flags: number;
  streamId: number;
  payload: Buffer;
  /** HEADERS only: the decoded block (HEADERS and its CONTINUATIONs), logged at END_HEADERS. */
  headers?: Map<string, string>;
  /** DATA only: the payload without padding. */
  data?: Buffer;
}

export interface RawClientOptions {
  /** SETTINGS sent with the preface. */
  settings?: readonly (readonly [number, number])[];
  /** Give back every received DATA byte at once (connection and stream WINDOW_UPDATE). Default true. */
  autoWindow?: boolean;
  /** Send the preface and SETTINGS and wait for the server's SETTINGS. Default true. */
  handshake?: boolean;
}

export interface HeadersOptions {
  endStream?: boolean;
  /** Split the block into this many fragments: HEADERS + CONTINUATIONs. */
  fragments?: number;
  /** PADDED flag with this many padding octets. */
  padding?: number;
  /** PRIORITY flag with these fields. */
  priority?: { dependsOn: number; weight: number; exclusive: boolean };
}

export interface DataOptions {
  endStream?: boolean;
  /** PADDED flag with this many padding octets (counts against flow control). */
  padding?: number;
}

function fields(headers: Record<string, string>): HeaderField[] {
  return Object.entries(headers).map(([name, value]) => ({ name, value, neverIndexed: false }));
}

export function u32(value: number): Buffer {
  const out = Buffer.alloc(4);
  out.writeUInt32BE(value >>> 0, 0);
  return out;
}

export class RawH2Client {
  readonly socket: Socket;
  readonly log: ReceivedFrame[] = [];
  readonly violations: string[] = [];
  closed = false;
  private syncs = 0;
  private readonly taken = new Set<ReceivedFrame>();
  private readonly decoder = new HpackDecoder();
  private readonly autoWindow: boolean;
  private pending: Buffer = Buffer.alloc(0);
  private openBlock: { frame: ReceivedFrame; fragments: Buffer[] } | undefined;
  private listeners: (() => void)[] = [];
  // Flow control, our sending side: what the server granted.
  private serverInitialWindow = DEFAULT_WINDOW;
  private serverMaxFrameSize = MAX_FRAME_SIZE;
  private connSendWindow = DEFAULT_WINDOW;
  private readonly streamSendWindow = new Map<number, number>();
  // Flow control, the server's sending side: what we granted.
  private ourInitialWindow = DEFAULT_WINDOW;
  private connRecvWindow = DEFAULT_WINDOW;
  private readonly streamRecvWindow = new Map<number, number>();

  private constructor(socket: Socket, options: RawClientOptions) {
    this.socket = socket;
    this.autoWindow = options.autoWindow ?? true;
    socket.on("data", (chunk: Buffer) => this.onData(chunk));
    socket.on("error", () => {});
    socket.on("close", () => {
      this.closed = true;
      this.notify();
    });
  }

  static async connect(port: number, options: RawClientOptions = {}): Promise<RawH2Client> {
    const socket = net.connect(port, "127.0.0.1");
    socket.setNoDelay(true);
    await new Promise<void>((resolve, reject) => {
      socket.once("connect", resolve);
      socket.once("error", reject);
    });
    const client = new RawH2Client(socket, options);
    if (options.handshake ?? true) {
      client.send(CLIENT_PREFACE);
      client.settings(options.settings ?? []);
      await client.waitFor((f) => f.type === FrameType.SETTINGS && !(f.flags & Flag.ACK), "the server's SETTINGS", { take: false });
    }
    return client;
  }

  send(bytes: Buffer): void {
    if (!this.closed) this.socket.write(bytes);
  }

  /** Runs `send` with the socket corked: every frame it writes leaves in one write (one TCP segment on loopback). */
  together(send: () => void): void {
    this.socket.cork();
    try {
      send();
    } finally {
      this.socket.uncork();
    }
  }

  sendFrame(type: number, flags: number, streamId: number, payload: Uint8Array = new Uint8Array(0)): void {
    this.send(frame(type, flags, streamId, payload));
  }

  settings(entries: readonly (readonly [number, number])[]): void {
    for (const [id, value] of entries) {
      if (id === Setting.INITIAL_WINDOW_SIZE) {
        // RFC 7540 6.9.2: the change applies to every open stream's window.
        const delta = value - this.ourInitialWindow;
        this.ourInitialWindow = value;
        for (const [sid, w] of this.streamRecvWindow) this.streamRecvWindow.set(sid, w + delta);
      }
    }
    this.send(settingsFrame(entries));
  }

  ping(data: Buffer): void {
    this.sendFrame(FrameType.PING, 0, 0, data);
  }

  /** A PING round trip: every frame the server sent before handling it has arrived once this resolves. */
  async sync(): Promise<void> {
    const data = Buffer.from(`sync${String(this.syncs++).padStart(4, "0")}`, "latin1");
    this.ping(data);
    await this.waitFor((f) => f.type === FrameType.PING && (f.flags & Flag.ACK) !== 0 && f.payload.equals(data), "the PING ACK of a sync");
  }

  windowUpdate(streamId: number, increment: number): void {
    if (streamId === 0) this.connRecvWindow += increment;
    else this.streamRecvWindow.set(streamId, (this.streamRecvWindow.get(streamId) ?? this.ourInitialWindow) + increment);
    this.sendFrame(FrameType.WINDOW_UPDATE, 0, streamId, u32(increment));
  }

  rstStream(streamId: number, code: number): void {
    this.sendFrame(FrameType.RST_STREAM, 0, streamId, u32(code));
  }

  /** Sends a header block with the framing options asked for (literal fields, no dynamic table). */
  headers(streamId: number, headers: Record<string, string>, options: HeadersOptions = {}): void {
    this.openStream(streamId);
    const block = encodeLiteralBlock(fields(headers));
    const count = Math.max(1, options.fragments ?? 1);
    const size = Math.ceil(block.length / count);
    const parts: Buffer[] = [];
    for (let i = 0; i < count; i++) parts.push(block.subarray(i * size, Math.min(block.length, (i + 1) * size)));
    let flags = (options.endStream ? Flag.END_STREAM : 0) | (count === 1 ? Flag.END_HEADERS : 0);
    const prefix: Buffer[] = [];
    if (options.padding !== undefined) {
      flags |= Flag.PADDED;
      prefix.push(Buffer.from([options.padding]));
    }
    if (options.priority) {
      flags |= Flag.PRIORITY;
      const p = Buffer.alloc(5);
      p.writeUInt32BE((options.priority.dependsOn | (options.priority.exclusive ? 0x80000000 : 0)) >>> 0, 0);
      p[4] = options.priority.weight - 1;
      prefix.push(p);
    }
    const suffix = Buffer.alloc(options.padding ?? 0);
    this.sendFrame(FrameType.HEADERS, flags, streamId, Buffer.concat([...prefix, parts[0]!, suffix]));
    for (let i = 1; i < count; i++) {
      this.sendFrame(FrameType.CONTINUATION, i === count - 1 ? Flag.END_HEADERS : 0, streamId, parts[i]!);
    }
  }

  /** A gRPC request's headers for `path`. */
  grpcHeaders(path: string, extra: Record<string, string> = {}): Record<string, string> {
    return {
      ":method": "POST",
      ":scheme": "http",
      ":path": path,
      ":authority": `127.0.0.1:${this.socket.remotePort ?? 0}`,
      "content-type": "application/grpc",
      te: "trailers",
      ...extra,
    };
  }

  /** One DATA frame as given (no flow control wait: for payloads known to fit). */
  dataFrame(streamId: number, data: Buffer, options: DataOptions = {}): void {
    let flags = options.endStream ? Flag.END_STREAM : 0;
    let payload = data;
    if (options.padding !== undefined) {
      flags |= Flag.PADDED;
      payload = Buffer.concat([Buffer.from([options.padding]), data, Buffer.alloc(options.padding)]);
    }
    const cost = payload.length;
    this.connSendWindow -= cost;
    this.streamSendWindow.set(streamId, this.sendWindowOf(streamId) - cost);
    if (this.connSendWindow < 0 || this.sendWindowOf(streamId) < 0) throw new Error(`DATA of ${cost} bytes on stream ${streamId} exceeds the server's window`);
    this.sendFrame(FrameType.DATA, flags, streamId, payload);
  }

  /** Sends `data` in frames no larger than the server allows, waiting for window as needed. */
  async sendData(streamId: number, data: Buffer, options: { endStream?: boolean; timeoutMs?: number } = {}): Promise<void> {
    let at = 0;
    do {
      await this.until(() => this.closed || (this.connSendWindow > 0 && this.sendWindowOf(streamId) > 0) || at === data.length, `send window on stream ${streamId}`, options.timeoutMs);
      if (this.closed) throw new Error("connection closed while sending");
      const n = Math.min(data.length - at, this.serverMaxFrameSize, this.connSendWindow, this.sendWindowOf(streamId));
      const last = at + n === data.length;
      this.dataFrame(streamId, data.subarray(at, at + n), { endStream: last && options.endStream === true });
      at += n;
    } while (at < data.length);
  }

  /**
   * Resolves with the first frame not yet taken that matches (and takes it),
   * or fails naming `what` after `timeoutMs`.
   */
  async waitFor(match: (f: ReceivedFrame) => boolean, what: string, opts: { timeoutMs?: number; take?: boolean } = {}): Promise<ReceivedFrame> {
    let found: ReceivedFrame | undefined;
    await this.until(() => {
      found = this.log.find((f) => !this.taken.has(f) && match(f));
      return found !== undefined;
    }, what, opts.timeoutMs);
    if (opts.take ?? true) this.taken.add(found!);
    return found!;
  }

  /** The server's answer on a stream, complete: its frames up to END_STREAM or RST_STREAM. */
  async response(streamId: number, timeoutMs?: number): Promise<StreamResponse> {
    await this.waitFor(
      (f) => f.streamId === streamId && (f.type === FrameType.RST_STREAM || ((f.type === FrameType.HEADERS || f.type === FrameType.DATA) && (f.flags & Flag.END_STREAM) !== 0)),
      `the end of stream ${streamId}`,
      { timeoutMs, take: false },
    );
    return new StreamResponse(this.log.filter((f) => f.streamId === streamId));
  }

  /** Waits until `done` holds, re-checked on every frame and on close. */
  until(done: () => boolean, what: string, timeoutMs = 5000): Promise<void> {
    if (done()) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.listeners = this.listeners.filter((l) => l !== check);
        reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what}; frames received: ${this.describe()}`));
      }, timeoutMs);
      const check = (): void => {
        if (!done()) return;
        clearTimeout(timer);
        this.listeners = this.listeners.filter((l) => l !== check);
        resolve();
      };
      this.listeners.push(check);
    });
  }

  waitClosed(timeoutMs = 2000): Promise<void> {
    return this.until(() => this.closed, "the connection to close", timeoutMs);
  }

  close(): void {
    this.socket.destroy();
  }

  /** Frames received, for failure messages. */
  describe(): string {
    const names = ["DATA", "HEADERS", "PRIORITY", "RST_STREAM", "SETTINGS", "PUSH_PROMISE", "PING", "GOAWAY", "WINDOW_UPDATE", "CONTINUATION"];
    return this.log.map((f) => `${names[f.type] ?? f.type}(s${f.streamId},f${f.flags},${f.payload.length})`).join(" ") + (this.closed ? " [closed]" : "");
  }

  private sendWindowOf(streamId: number): number {
    return this.streamSendWindow.get(streamId) ?? this.serverInitialWindow;
  }

  private openStream(streamId: number): void {
    if (!this.streamSendWindow.has(streamId)) this.streamSendWindow.set(streamId, this.serverInitialWindow);
    if (!this.streamRecvWindow.has(streamId)) this.streamRecvWindow.set(streamId, this.ourInitialWindow);
  }

  private notify(): void {
    for (const listener of [...this.listeners]) listener();
  }

  private onData(chunk: Buffer): void {
    this.pending = this.pending.length === 0 ? chunk : Buffer.concat([this.pending, chunk]);
    while (this.pending.length >= FRAME_HEADER_BYTES) {
      const header = readFrameHeader(this.pending, 0);
      if (this.pending.length < FRAME_HEADER_BYTES + header.length) break;
      const payload = Buffer.from(this.pending.subarray(FRAME_HEADER_BYTES, FRAME_HEADER_BYTES + header.length));
      this.pending = this.pending.subarray(FRAME_HEADER_BYTES + header.length);
      this.onFrame({ type: header.type, flags: header.flags, streamId: header.streamId, payload });
    }
    this.notify();
  }

  private onFrame(f: ReceivedFrame): void {
    // We announce no SETTINGS_MAX_FRAME_SIZE: the default bounds every frame (RFC 7540 4.2).
    if (f.payload.length > MAX_FRAME_SIZE) this.violations.push(`frame type ${f.type} of ${f.payload.length} bytes`);
    switch (f.type) {
      case FrameType.SETTINGS:
        if (!(f.flags & Flag.ACK)) {
          for (let i = 0; i + 6 <= f.payload.length; i += 6) {
            const id = f.payload.readUInt16BE(i);
            const value = f.payload.readUInt32BE(i + 2);
            if (id === Setting.INITIAL_WINDOW_SIZE) {
              const delta = value - this.serverInitialWindow;
              this.serverInitialWindow = value;
              for (const [sid, w] of this.streamSendWindow) this.streamSendWindow.set(sid, w + delta);
            } else if (id === Setting.MAX_FRAME_SIZE) {
              this.serverMaxFrameSize = value;
            }
          }
          this.sendFrame(FrameType.SETTINGS, Flag.ACK, 0);
        }
        break;
      case FrameType.WINDOW_UPDATE: {
        const increment = f.payload.readUInt32BE(0) & 0x7fffffff;
        if (f.streamId === 0) this.connSendWindow += increment;
        else this.streamSendWindow.set(f.streamId, this.sendWindowOf(f.streamId) + increment);
        break;
      }
      case FrameType.DATA: {
        const padded = (f.flags & Flag.PADDED) !== 0;
        f.data = padded ? f.payload.subarray(1, f.payload.length - f.payload[0]!) : f.payload;
        const cost = f.payload.length;
        this.connRecvWindow -= cost;
        const streamWindow = (this.streamRecvWindow.get(f.streamId) ?? this.ourInitialWindow) - cost;
        this.streamRecvWindow.set(f.streamId, streamWindow);
        if (this.connRecvWindow < 0) this.violations.push(`DATA on stream ${f.streamId} overran the connection window by ${-this.connRecvWindow}`);
        if (streamWindow < 0) this.violations.push(`DATA on stream ${f.streamId} overran its window by ${-streamWindow}`);
        if (this.autoWindow && cost > 0) {
          this.windowUpdate(0, cost);
          if (!(f.flags & Flag.END_STREAM)) this.windowUpdate(f.streamId, cost);
        }
        break;
      }
      case FrameType.HEADERS:
      case FrameType.CONTINUATION: {
        if (f.type === FrameType.HEADERS) {
          let start = 0;
          let end = f.payload.length;
          if (f.flags & Flag.PADDED) {
            start = 1;
            end -= f.payload[0]!;
          }
          if (f.flags & Flag.PRIORITY) start += 5;
          this.openBlock = { frame: f, fragments: [f.payload.subarray(start, end)] };
        } else {
          this.openBlock?.fragments.push(f.payload);
        }
        if (f.flags & Flag.END_HEADERS && this.openBlock) {
          const block = this.openBlock;
          this.openBlock = undefined;
          block.frame.headers = new Map(this.decoder.decode(Buffer.concat(block.fragments)).map((h) => [h.name, h.value]));
          this.log.push(block.frame);
        }
        if (f.type === FrameType.CONTINUATION) this.log.push(f);
        return;
      }
    }
    this.log.push(f);
  }
}

/** One stream's frames from the server, with the gRPC-level reading of them. */
export class StreamResponse {
  constructor(readonly frames: ReceivedFrame[]) {}

  get headerFrames(): ReceivedFrame[] {
    return this.frames.filter((f) => f.type === FrameType.HEADERS);
  }

  get dataFrames(): ReceivedFrame[] {
    return this.frames.filter((f) => f.type === FrameType.DATA);
  }

  get body(): Buffer {
    return Buffer.concat(this.dataFrames.map((f) => f.data!));
  }

  get rst(): number | undefined {
    const f = this.frames.find((g) => g.type === FrameType.RST_STREAM);
    return f?.payload.readUInt32BE(0);
  }

  /** The gRPC messages of the body (5-byte prefix each). */
  get messages(): Buffer[] {
    const out: Buffer[] = [];
    const body = this.body;
    for (let at = 0; at + 5 <= body.length; ) {
      const length = body.readUInt32BE(at + 1);
      out.push(body.subarray(at + 5, at + 5 + length));
      at += 5 + length;
    }
    return out;
  }
}
