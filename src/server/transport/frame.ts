/**
 * Framing of the peer protocol: every unit on a peer connection is a frame
 *
 *   length:u32  crc:u32  body[length]       body = kind:u8 payload
 *
 * where `crc` is the CRC-32 (IEEE, zlib's) of the body. A frame longer than the receiver's
 * maximum, of length 0, or with a wrong CRC is a protocol error: the connection is closed, since
 * after one bad frame the byte stream can no longer be trusted to be aligned.
 */
import { crc32 } from "node:zlib";

export const FRAME_HEADER_BYTES = 8;
/** Default hard maximum of one frame's body (16 MiB): above any batch or snapshot chunk we send. */
export const DEFAULT_MAX_FRAME_BYTES = 16 * 1024 * 1024;

export enum FrameKind {
  /** Dialer → listener: who I am, what I want (see handshake.ts). */
  Hello = 1,
  HelloOk = 2,
  HelloReject = 3,
  /** A batch of Raft messages. */
  Messages = 4,
  /** Snapshot transfer: header message, then chunks, then the end with the whole-data CRC. */
  SnapBegin = 5,
  SnapChunk = 6,
  SnapEnd = 7,
  /** Receiver → sender: snapshot delivered (or why not). */
  SnapAck = 8,
  /** Listener → dialer of a "members" connection: the cluster id and its members (JSON). */
  MembersInfo = 9,
  /** Dialer → listener of a "snapshot base" connection: what does your backend hold (issue 19)? */
  SnapBaseRequest = 10,
  /** Listener → dialer: its backend's base (JSON), or none. */
  SnapBase = 11,
}

const MAX_KIND = FrameKind.SnapBase;

export class FrameError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "FrameError";
  }
}

export interface Frame {
  kind: FrameKind;
  /** The payload (after the kind byte). A view into the receive buffer: copy what you keep. */
  payload: Buffer;
}

/** Allocates a frame for a payload of `payloadBytes`; the caller fills `buf` from `payloadOffset`. */
export function allocFrame(kind: FrameKind, payloadBytes: number, into?: Buffer): { buf: Buffer; payloadOffset: number } {
  const bodyBytes = 1 + payloadBytes;
  const size = FRAME_HEADER_BYTES + bodyBytes;
  if (into !== undefined && into.length < size) throw new FrameError(`frame of ${size} bytes does not fit the ${into.length} given`);
  const buf = into === undefined ? Buffer.allocUnsafe(size) : into.subarray(0, size);
  buf.writeUInt32BE(bodyBytes, 0);
  buf[FRAME_HEADER_BYTES] = kind;
  return { buf, payloadOffset: FRAME_HEADER_BYTES + 1 };
}

/** Computes the CRC of a frame whose payload has been filled in. */
export function sealFrame(buf: Buffer): Buffer {
  buf.writeUInt32BE(crc32(buf.subarray(FRAME_HEADER_BYTES)), 4);
  return buf;
}

export function encodeFrame(kind: FrameKind, payload: Uint8Array): Buffer {
  const { buf, payloadOffset } = allocFrame(kind, payload.byteLength);
  buf.set(payload, payloadOffset);
  return sealFrame(buf);
}

/**
 * Reassembles frames from the chunks of a byte stream. `push` returns the complete frames in the
 * data seen so far; it throws FrameError on a frame that is too large, empty, of unknown kind or
 * corrupt. Memory held is at most one partial frame (≤ maxFrameBytes + header).
 */
export class FrameDecoder {
  private chunks: Buffer[] = [];
  private bufferedBytes = 0;

  /** Mutable: a connection accepts only small frames until its handshake is done. */
  constructor(public maxFrameBytes: number = DEFAULT_MAX_FRAME_BYTES) {}

  push(chunk: Buffer): Frame[] {
    this.chunks.push(chunk);
    this.bufferedBytes += chunk.byteLength;
    const frames: Frame[] = [];
    while (this.bufferedBytes >= FRAME_HEADER_BYTES) {
      const header = this.peek(FRAME_HEADER_BYTES);
      const bodyBytes = header.readUInt32BE(0);
      if (bodyBytes === 0) throw new FrameError("empty frame");
      if (bodyBytes > this.maxFrameBytes) {
        throw new FrameError(`frame of ${bodyBytes} bytes exceeds the maximum of ${this.maxFrameBytes}`);
      }
      if (this.bufferedBytes < FRAME_HEADER_BYTES + bodyBytes) break;
      const expectedCrc = header.readUInt32BE(4);
      this.consume(FRAME_HEADER_BYTES);
      const body = this.consume(bodyBytes);
      const actualCrc = crc32(body);
      if (actualCrc !== expectedCrc) throw new FrameError(`frame checksum mismatch (${actualCrc} != ${expectedCrc})`);
      const kind = body[0]!;
      if (kind < FrameKind.Hello || kind > MAX_KIND) throw new FrameError(`unknown frame kind ${kind}`);
      frames.push({ kind, payload: body.subarray(1) });
    }
    return frames;
  }

  /** Bytes received but not yet part of a complete frame. */
  pendingBytes(): number {
    return this.bufferedBytes;
  }

  private peek(n: number): Buffer {
    const first = this.chunks[0]!;
    if (first.byteLength >= n) return first.subarray(0, n);
    return Buffer.concat(this.chunks, n);
  }

  private consume(n: number): Buffer {
    const first = this.chunks[0]!;
    let out: Buffer;
    if (first.byteLength > n) {
      out = first.subarray(0, n);
      this.chunks[0] = first.subarray(n);
    } else if (first.byteLength === n) {
      out = first;
      this.chunks.shift();
    } else {
      out = Buffer.concat(this.chunks, n);
      let left = n;
      while (left > 0) {
        const c = this.chunks[0]!;
        if (c.byteLength <= left) {
          left -= c.byteLength;
          this.chunks.shift();
        } else {
          this.chunks[0] = c.subarray(left);
          left = 0;
        }
      }
    }
    this.bufferedBytes -= n;
    return out;
  }
}
