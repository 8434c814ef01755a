/**
 * The first moments of every HTTP/2 connection, before nghttp2 owns it: read
 * the client's first request(s) and decide whether nghttp2 may take the raw
 * socket (native, no cost per request) or needs the AuthorityRewriter between
 * them (a client that sends an :authority nghttp2 refuses, see authority.ts).
 *
 * Translating every connection would be correct but measurably slow: bytes
 * through a JS stream into node:http2 (JSStreamSocket) cost ~40% more CPU per
 * request at 100-1,000 clients on this machine. The gate costs a few frames
 * parsed in JS once per connection.
 *
 * Go clients send no request before the server's SETTINGS (the server
 * preface), and nghttp2 sends its SETTINGS only once it owns the socket. So
 * the gate sends a provisional SETTINGS with the very values nghttp2 will
 * announce, and must then remove the client's ACK of it: nghttp2 answers an
 * ACK it did not ask for with GOAWAY(PROTOCOL_ERROR). It also answers the
 * client's PINGs while it holds the connection (idle etcd clients ping), with
 * the server's ping policy (GOAWAY too_many_pings, keepalive.ts).
 * The verdict comes once the ACK is removed and at least one header block is
 * complete; blocks that arrive with the first are checked too.
 *
 * Known limit: a connection whose first requests carry a good authority is
 * handed to nghttp2 natively; a later request on it with a bad authority is
 * still reset. Go and grpc-js clients use one authority per connection.
 */

import type { Socket } from "node:net";
import { isValidAuthority } from "./authority.js";
import { AuthorityRewriter } from "./authority-rewriter.js";
import { DEFAULT_HEADER_TABLE_SIZE, HpackDecoder } from "./hpack.js";
import {
  CLIENT_PREFACE,
  Flag,
  FRAME_HEADER_BYTES,
  FrameType,
  frame,
  headersFragment,
  MAX_FRAME_SIZE,
  readFrameHeader,
  settingsFrame,
} from "./http2-frame.js";
import { type KeepaliveOptions, PingStrikes, TOO_MANY_PINGS } from "./keepalive.js";
import { RewritingStream } from "./rewriting-stream.js";

/** Bytes a client may send before the verdict (its first request, flow control caps DATA at 64 KiB). */
const MAX_GATE_BYTES = 256 * 1024;
const PING_PAYLOAD_BYTES = 8;
const GOAWAY_LINGER_MS = 1000;

export type GateVerdict =
  /** Give nghttp2 the raw socket, these bytes first. */
  | { kind: "native"; bytes: Buffer }
  /** Give nghttp2 an AuthorityRewriter stream, these bytes first. */
  | { kind: "rewrite"; bytes: Buffer }
  /** Close the connection, after sending `goaway` if given: the client broke the protocol or the ping policy. */
  | { kind: "reject"; reason: string; goaway?: Buffer };

export interface ProbeOptions {
  /** The SETTINGS entries nghttp2 will send (node:http2 sends only those set). */
  settings: readonly (readonly [number, number])[];
  /** SETTINGS_HEADER_TABLE_SIZE the server advertises. */
  maxTableSize?: number;
  /** The server's policy on client pings. */
  keepalive: Pick<KeepaliveOptions, "minTimeMs" | "permitWithoutStream">;
  /** Clock for the ping policy (tests). */
  nowMs?: () => number;
}

const ENHANCE_YOUR_CALM = 0xb;

function goawayFrame(errorCode: number, debug: string): Buffer {
  const payload = Buffer.alloc(8 + Buffer.byteLength(debug));
  payload.writeUInt32BE(0, 0);
  payload.writeUInt32BE(errorCode, 4);
  payload.write(debug, 8);
  return frame(FrameType.GOAWAY, 0, 0, payload);
}

/** The gate's decision logic, free of sockets: client bytes in, replies and a verdict out. */
export class FirstRequestProbe {
  private readonly settings: Buffer;
  private readonly decoder: HpackDecoder;
  private readonly pings: PingStrikes;
  private readonly nowMs: () => number;
  private blocksSinceLastPing = 0;
  private pending: Buffer = Buffer.alloc(0);
  private readonly kept: Buffer[] = [];
  private keptBytes = 0;
  private prefaceSeen = false;
  private ackRemoved = false;
  private openBlock: { streamId: number; fragments: Buffer[] } | undefined;
  private blocksSeen = 0;
  private badAuthority = false;
  private undecodable = false;

  constructor(options: ProbeOptions) {
    this.settings = settingsFrame(options.settings);
    this.decoder = new HpackDecoder({ maxTableSize: options.maxTableSize ?? DEFAULT_HEADER_TABLE_SIZE });
    this.pings = new PingStrikes(options.keepalive);
    this.nowMs = options.nowMs ?? Date.now;
  }

  /** Feeds client bytes; `reply` goes to the client at once, `verdict` ends the gate. */
  push(chunk: Buffer): { reply: Buffer[]; verdict: GateVerdict | undefined } {
    const reply: Buffer[] = [];
    this.pending = this.pending.length === 0 ? chunk : Buffer.concat([this.pending, chunk]);
    if (!this.prefaceSeen) {
      const n = Math.min(this.pending.length, CLIENT_PREFACE.length);
      // Not HTTP/2 after all: nghttp2 will say so; nothing of ours was sent yet.
      if (!this.pending.subarray(0, n).equals(CLIENT_PREFACE.subarray(0, n))) return { reply, verdict: this.native() };
      if (n < CLIENT_PREFACE.length) return { reply, verdict: undefined };
      this.keep(this.pending.subarray(0, n));
      this.pending = this.pending.subarray(n);
      this.prefaceSeen = true;
      reply.push(this.settings);
    }
    while (this.pending.length >= FRAME_HEADER_BYTES) {
      const header = readFrameHeader(this.pending, 0);
      if (header.length > MAX_FRAME_SIZE) return { reply, verdict: this.giveUp(`frame of ${header.length} bytes`) };
      const size = FRAME_HEADER_BYTES + header.length;
      if (this.pending.length < size) break;
      const bytes = this.pending.subarray(0, size);
      this.pending = this.pending.subarray(size);
      const problem = this.onFrame(header.type, header.flags, header.streamId, bytes, reply);
      if (problem === TOO_MANY_PINGS) {
        return { reply, verdict: { kind: "reject", reason: problem, goaway: goawayFrame(ENHANCE_YOUR_CALM, TOO_MANY_PINGS) } };
      }
      if (problem !== undefined) return { reply, verdict: this.giveUp(problem) };
      if (this.keptBytes > MAX_GATE_BYTES) return { reply, verdict: this.giveUp("too many bytes before the first request") };
    }
    if (this.ackRemoved && this.blocksSeen > 0 && !this.openBlock) {
      return { reply, verdict: this.badAuthority && !this.undecodable ? { kind: "rewrite", bytes: this.rest() } : this.native() };
    }
    return { reply, verdict: undefined };
  }

  /** Returns a reason when the frame breaks the protocol. */
  private onFrame(type: number, flags: number, streamId: number, bytes: Buffer, reply: Buffer[]): string | undefined {
    if (this.openBlock && type !== FrameType.CONTINUATION) return `frame type ${type} inside a header block`;
    const payload = bytes.subarray(FRAME_HEADER_BYTES);
    if (type === FrameType.SETTINGS && flags & Flag.ACK && !this.ackRemoved) {
      this.ackRemoved = true;
      return undefined;
    }
    if (type === FrameType.PING && !(flags & Flag.ACK) && payload.length === PING_PAYLOAD_BYTES) {
      const tooMany = this.pings.onPing(this.nowMs(), this.blocksSinceLastPing, this.blocksSeen > 0 ? 1 : 0);
      this.blocksSinceLastPing = 0;
      if (tooMany) return TOO_MANY_PINGS;
      reply.push(frame(FrameType.PING, Flag.ACK, 0, payload));
      return undefined;
    }
    this.keep(bytes);
    if (type === FrameType.HEADERS) {
      let fragment: Buffer;
      try {
        fragment = headersFragment(flags, payload).fragment;
      } catch (err) {
        return (err as Error).message;
      }
      this.openBlock = { streamId, fragments: [fragment] };
    } else if (type === FrameType.CONTINUATION) {
      if (!this.openBlock || this.openBlock.streamId !== streamId) return "CONTINUATION without HEADERS";
      this.openBlock.fragments.push(payload);
    } else {
      return undefined;
    }
    if (flags & Flag.END_HEADERS) {
      this.inspect(Buffer.concat(this.openBlock.fragments));
      this.openBlock = undefined;
    }
    return undefined;
  }

  private inspect(block: Buffer): void {
    this.blocksSeen++;
    this.blocksSinceLastPing++;
    // An undecodable block is nghttp2's to refuse (COMPRESSION_ERROR), as it would without us.
    if (this.undecodable) return;
    try {
      for (const field of this.decoder.decode(block)) {
        if ((field.name === ":authority" || field.name === "host") && !isValidAuthority(field.value)) this.badAuthority = true;
      }
    } catch {
      this.undecodable = true;
    }
  }

  private keep(bytes: Buffer): void {
    this.kept.push(bytes);
    this.keptBytes += bytes.length;
  }

  private rest(): Buffer {
    return Buffer.concat([...this.kept, this.pending]);
  }

  private native(): GateVerdict {
    return { kind: "native", bytes: this.rest() };
  }

  /**
   * Protocol trouble before the verdict: nghttp2 may judge it, unless the
   * client's ACK of our SETTINGS is still to come (nghttp2 would take that
   * ACK for its own and fail the connection over the next one).
   */
  private giveUp(reason: string): GateVerdict {
    return this.ackRemoved || !this.prefaceSeen ? this.native() : { kind: "reject", reason };
  }
}

export interface GateHandlers {
  /** nghttp2 takes the socket (unread bytes already put back) or the rewriting stream. */
  deliver(stream: Socket | RewritingStream): void;
  /** The gate ended without a verdict (client closed or broke the protocol). */
  closed(): void;
}

/**
 * Holds one HTTP/2 connection until the probe's verdict. `initial` holds the
 * bytes already read from the socket (the HTTP/1-or-2 sniff).
 */
export class FirstRequestGate {
  private readonly probe: FirstRequestProbe;
  private done = false;
  private readonly onData = (chunk: Buffer): void => this.feed(chunk);
  private readonly onEnd = (): void => this.abandon();

  constructor(
    private readonly socket: Socket,
    options: ProbeOptions,
    private readonly handlers: GateHandlers,
  ) {
    this.probe = new FirstRequestProbe(options);
  }

  start(initial: Buffer | undefined): void {
    this.socket.on("data", this.onData);
    this.socket.once("end", this.onEnd);
    this.socket.once("close", this.onEnd);
    if (initial && initial.length > 0) this.feed(initial);
    if (!this.done) this.socket.resume();
  }

  /** Ends a gated connection (server shutdown). */
  destroy(): void {
    this.abandon();
  }

  private feed(chunk: Buffer): void {
    if (this.done) return;
    const { reply, verdict } = this.probe.push(chunk);
    for (const bytes of reply) this.socket.write(bytes);
    if (!verdict) return;
    this.detach();
    const socket = this.socket;
    if (verdict.kind === "reject") {
      if (verdict.goaway) {
        socket.end(verdict.goaway);
        // The client closes on GOAWAY; one that does not is cut off.
        setTimeout(() => socket.destroy(), GOAWAY_LINGER_MS).unref();
      } else {
        socket.destroy();
      }
      this.handlers.closed();
    } else if (verdict.kind === "native") {
      socket.pause();
      if (verdict.bytes.length > 0) socket.unshift(verdict.bytes);
      this.handlers.deliver(socket);
    } else {
      const rewriter = new AuthorityRewriter({ maxTableSize: DEFAULT_HEADER_TABLE_SIZE, maxFrameSize: MAX_FRAME_SIZE });
      this.handlers.deliver(new RewritingStream(socket, rewriter, verdict.bytes));
    }
  }

  private abandon(): void {
    if (this.done) return;
    this.detach();
    this.socket.destroy();
    this.handlers.closed();
  }

  private detach(): void {
    this.done = true;
    this.socket.removeListener("data", this.onData);
    this.socket.removeListener("end", this.onEnd);
    this.socket.removeListener("close", this.onEnd);
  }
}
