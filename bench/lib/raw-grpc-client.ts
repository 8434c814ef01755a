/**
 * The lightest load driver: unary gRPC calls written as raw HTTP/2 frames on a
 * TCP socket (a pre-encoded HEADERS + DATA pair per call, stream id patched in),
 * responses parsed frame by frame with our HPACK decoder, writes coalesced per
 * tick. It spends a fraction of what a node:http2 or grpc-js client spends per
 * call, so one driver CPU can saturate a server on another CPU: the measured
 * throughput is then the server's, not the generator's.
 *
 * It is a benchmark client, not a general one: no request bodies above one
 * frame, no server push, no priorities; anything unexpected fails the call
 * (counted as an error) rather than being worked around.
 */

import net, { type Socket } from "node:net";
import { HpackDecoder, encodeLiteralBlock } from "../../src/grpc/h2/hpack.js";
import { CLIENT_PREFACE, FRAME_HEADER_BYTES, Flag, FrameType, frame, headersFragment, settingsFrame } from "../../src/grpc/h2/http2-frame.js";

/** Called once per call: undefined on grpc-status 0, else a description of the failure. */
export type CallDone = (error: string | undefined) => void;

const SETTINGS_ENABLE_PUSH = 0x2;
const SETTINGS_INITIAL_WINDOW_SIZE = 0x4;
const WINDOW_MAX = 2 ** 31 - 1;
/** The connection window the server starts with (RFC 9113 6.9.2). */
const DEFAULT_WINDOW = 65_535;
/** Replenish our connection receive window once this much of it was used. */
const WINDOW_REFILL_BYTES = 2 ** 30;
/** Stream ids are 31-bit and odd from a client. */
const STREAM_ID_MAX = 2 ** 31 - 1;

interface PendingCall {
  done: CallDone;
  status: string | undefined;
}

export class RawGrpcConnection {
  private readonly socket: Socket;
  /** HEADERS (END_HEADERS) + DATA (END_STREAM) of one call; bytes 5..8 and 9+h+5..8 hold the stream id. */
  private readonly template: Buffer;
  private readonly dataFrameAt: number;
  private readonly decoder = new HpackDecoder();
  private readonly calls = new Map<number, PendingCall>();
  private nextStreamId = 1;
  private sendWindow = DEFAULT_WINDOW;
  private readonly requestBytes: number;
  private receivedSinceRefill = 0;
  private out: Buffer[] = [];
  private flushScheduled = false;
  private inbox: Buffer | undefined;
  /** Header block fragments of a HEADERS frame awaiting its CONTINUATIONs. */
  private continuation: { streamId: number; endStream: boolean; parts: Buffer[] } | undefined;
  private dead: string | undefined;

  constructor(host: string, port: number, path: string, framedRequest: Buffer) {
    const block = encodeLiteralBlock([
      { name: ":method", value: "POST", neverIndexed: false },
      { name: ":scheme", value: "http", neverIndexed: false },
      { name: ":path", value: path, neverIndexed: false },
      { name: ":authority", value: `${host}:${port}`, neverIndexed: false },
      { name: "content-type", value: "application/grpc", neverIndexed: false },
      { name: "te", value: "trailers", neverIndexed: false },
    ]);
    const headers = frame(FrameType.HEADERS, Flag.END_HEADERS, 1, block);
    const data = frame(FrameType.DATA, Flag.END_STREAM, 1, framedRequest);
    this.template = Buffer.concat([headers, data]);
    this.dataFrameAt = headers.length;
    this.requestBytes = framedRequest.length;
    this.socket = net.connect({ host, port, noDelay: true });
    this.socket.on("data", (chunk: Buffer) => this.onData(chunk));
    this.socket.on("error", (e) => this.fail(`socket: ${e.message}`));
    this.socket.on("close", () => this.fail("connection closed"));
    this.enqueue(
      Buffer.concat([
        CLIENT_PREFACE,
        settingsFrame([
          [SETTINGS_ENABLE_PUSH, 0],
          [SETTINGS_INITIAL_WINDOW_SIZE, WINDOW_MAX],
        ]),
        windowUpdate(0, WINDOW_MAX - DEFAULT_WINDOW),
      ]),
    );
  }

  /** Starts one unary call. */
  call(done: CallDone): void {
    if (this.dead !== undefined) {
      done(this.dead);
      return;
    }
    if (this.nextStreamId > STREAM_ID_MAX) {
      done("stream ids exhausted");
      return;
    }
    if (this.sendWindow < this.requestBytes) {
      // The server's connection window is refilled as it reads; a benchmark never gets here.
      done("connection send window exhausted");
      return;
    }
    this.sendWindow -= this.requestBytes;
    const id = this.nextStreamId;
    this.nextStreamId += 2;
    const frames = Buffer.allocUnsafe(this.template.length);
    this.template.copy(frames);
    frames.writeUInt32BE(id, 5);
    frames.writeUInt32BE(id, this.dataFrameAt + 5);
    this.calls.set(id, { done, status: undefined });
    this.enqueue(frames);
  }

  close(): void {
    this.dead ??= "closed by the driver";
    this.socket.destroy();
  }

  private enqueue(bytes: Buffer): void {
    this.out.push(bytes);
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    // Calls started while handling one read go out in one write.
    process.nextTick(() => this.flush());
  }

  private flush(): void {
    this.flushScheduled = false;
    const out = this.out;
    this.out = [];
    if (this.dead === undefined && out.length > 0) this.socket.write(out.length === 1 ? out[0]! : Buffer.concat(out));
  }

  private fail(reason: string): void {
    if (this.dead === undefined) this.dead = reason;
    const calls = [...this.calls.values()];
    this.calls.clear();
    for (const c of calls) c.done(reason);
  }

  private onData(chunk: Buffer): void {
    let buf = chunk;
    if (this.inbox) {
      buf = Buffer.concat([this.inbox, chunk]);
      this.inbox = undefined;
    }
    let at = 0;
    try {
      while (buf.length - at >= FRAME_HEADER_BYTES) {
        const length = (buf[at]! << 16) | (buf[at + 1]! << 8) | buf[at + 2]!;
        if (buf.length - at - FRAME_HEADER_BYTES < length) break;
        const type = buf[at + 3]!;
        const flags = buf[at + 4]!;
        const streamId = buf.readUInt32BE(at + 5) & 0x7fffffff;
        const payload = buf.subarray(at + FRAME_HEADER_BYTES, at + FRAME_HEADER_BYTES + length);
        at += FRAME_HEADER_BYTES + length;
        this.onFrame(type, flags, streamId, payload);
      }
    } catch (e) {
      this.fail(`protocol: ${(e as Error).message}`);
      this.socket.destroy();
      return;
    }
    if (at < buf.length) this.inbox = buf.subarray(at);
  }

  private onFrame(type: number, flags: number, streamId: number, payload: Buffer): void {
    if (this.continuation && type !== FrameType.CONTINUATION) throw new Error("CONTINUATION expected");
    switch (type) {
      case FrameType.DATA:
        this.receivedSinceRefill += payload.length;
        if (this.receivedSinceRefill >= WINDOW_REFILL_BYTES) {
          this.enqueue(windowUpdate(0, this.receivedSinceRefill));
          this.receivedSinceRefill = 0;
        }
        if (flags & Flag.END_STREAM) this.finish(streamId, "response ended without trailers");
        return;
      case FrameType.HEADERS: {
        const { fragment } = headersFragment(flags, payload);
        const endStream = (flags & Flag.END_STREAM) !== 0;
        if (flags & Flag.END_HEADERS) this.onHeaderBlock(streamId, endStream, fragment);
        else this.continuation = { streamId, endStream, parts: [Buffer.from(fragment)] };
        return;
      }
      case FrameType.CONTINUATION: {
        const c = this.continuation;
        if (!c || c.streamId !== streamId) throw new Error("unexpected CONTINUATION");
        c.parts.push(Buffer.from(payload));
        if (flags & Flag.END_HEADERS) {
          this.continuation = undefined;
          this.onHeaderBlock(streamId, c.endStream, Buffer.concat(c.parts));
        }
        return;
      }
      case FrameType.RST_STREAM:
        this.finish(streamId, `reset (code ${payload.readUInt32BE(0)})`);
        return;
      case FrameType.SETTINGS:
        if (!(flags & Flag.ACK)) this.enqueue(frame(FrameType.SETTINGS, Flag.ACK, 0));
        return;
      case FrameType.PING:
        if (!(flags & Flag.ACK)) this.enqueue(frame(FrameType.PING, Flag.ACK, 0, payload));
        return;
      case FrameType.GOAWAY:
        this.fail(`GOAWAY (code ${payload.readUInt32BE(4)})`);
        return;
      case FrameType.WINDOW_UPDATE:
        if (streamId === 0) this.sendWindow += payload.readUInt32BE(0) & 0x7fffffff;
        return;
      default:
        return;
    }
  }

  /** Every block is decoded, in order, to keep the HPACK dynamic table in step with the server's encoder. */
  private onHeaderBlock(streamId: number, endStream: boolean, block: Buffer): void {
    const fields = this.decoder.decode(block);
    const call = this.calls.get(streamId);
    if (call) {
      for (const f of fields) if (f.name === "grpc-status") call.status = f.value;
    }
    if (endStream) this.finish(streamId, undefined);
  }

  private finish(streamId: number, error: string | undefined): void {
    const call = this.calls.get(streamId);
    if (!call) return;
    this.calls.delete(streamId);
    if (error !== undefined) call.done(error);
    else call.done(call.status === "0" ? undefined : `grpc-status ${call.status ?? "missing"}`);
  }
}

function windowUpdate(streamId: number, increment: number): Buffer {
  const payload = Buffer.allocUnsafe(4);
  payload.writeUInt32BE(increment, 0);
  return frame(FrameType.WINDOW_UPDATE, 0, streamId, payload);
}
