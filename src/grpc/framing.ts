/**
 * gRPC length-prefixed messages over HTTP/2 DATA frames: each message is
 * 1 byte compressed-flag, 4 bytes big-endian length, then the payload. A message
 * may span many DATA chunks and a chunk may hold many messages. The size limit is
 * checked as soon as the 5-byte prefix is read, before any payload is buffered.
 */

import { GrpcError, Status } from "./status.js";

export const MESSAGE_PREFIX_BYTES = 5;

/** Receives the messages the deframer completes. */
export interface MessageSink {
  onFrame(message: Buffer, compressed: boolean): void;
}

export class MessageDeframer {
  private readonly maxMessageBytes: number;
  /** The prefix of the message in progress, when a chunk ended inside it (allocated on need). */
  private prefix: Buffer | undefined;
  private prefixFill = 0;
  /** Payload parts of the message in progress (bounded by maxMessageBytes). */
  private parts: Buffer[] | undefined;
  private partsBytes = 0;
  private bodyBytes = -1;
  private compressed = false;

  constructor(maxMessageBytes: number) {
    this.maxMessageBytes = maxMessageBytes;
  }

  /** True when the stream ended in the middle of a message. */
  get partial(): boolean {
    return this.prefixFill !== 0 || this.bodyBytes >= 0;
  }

  /**
   * Feeds one DATA chunk. Complete messages go to the sink (zero-copy views when a
   * message lies within one chunk). Throws RESOURCE_EXHAUSTED for an oversized message.
   */
  push(chunk: Buffer, sink: MessageSink): void {
    let pos = 0;
    const n = chunk.length;
    if (this.prefixFill !== 0 || this.bodyBytes >= 0) {
      pos = this.continuePartial(chunk, sink);
      if (pos < 0) return;
    }
    // Fast path: whole messages inside this chunk.
    while (n - pos >= MESSAGE_PREFIX_BYTES) {
      const compressed = chunk[pos] !== 0;
      const len = chunk.readUInt32BE(pos + 1);
      this.checkSize(len);
      const start = pos + MESSAGE_PREFIX_BYTES;
      if (n - start >= len) {
        pos = start + len;
        sink.onFrame(chunk.subarray(start, pos), compressed);
        continue;
      }
      this.compressed = compressed;
      this.bodyBytes = len;
      this.parts = n > start ? [chunk.subarray(start)] : [];
      this.partsBytes = n - start;
      return;
    }
    if (pos < n) {
      this.prefix ??= Buffer.allocUnsafe(MESSAGE_PREFIX_BYTES);
      chunk.copy(this.prefix, 0, pos, n);
      this.prefixFill = n - pos;
    }
  }

  /** Completes the message in progress; returns the next offset, or -1 if the chunk was used up. */
  private continuePartial(chunk: Buffer, sink: MessageSink): number {
    let pos = 0;
    const n = chunk.length;
    if (this.prefixFill !== 0) {
      const prefix = this.prefix!;
      const take = Math.min(MESSAGE_PREFIX_BYTES - this.prefixFill, n);
      chunk.copy(prefix, this.prefixFill, 0, take);
      this.prefixFill += take;
      pos = take;
      if (this.prefixFill < MESSAGE_PREFIX_BYTES) return -1;
      this.prefixFill = 0;
      this.compressed = prefix[0] !== 0;
      const len = prefix.readUInt32BE(1);
      this.checkSize(len);
      this.bodyBytes = len;
      this.parts = [];
      this.partsBytes = 0;
    }
    const parts = this.parts!;
    const need = this.bodyBytes - this.partsBytes;
    if (n - pos < need) {
      if (n > pos) parts.push(chunk.subarray(pos));
      this.partsBytes += n - pos;
      return -1;
    }
    if (need > 0) parts.push(chunk.subarray(pos, pos + need));
    const message = parts.length === 1 ? parts[0]! : Buffer.concat(parts, this.bodyBytes);
    this.parts = undefined;
    this.partsBytes = 0;
    this.bodyBytes = -1;
    sink.onFrame(message, this.compressed);
    return pos + need;
  }

  private checkSize(len: number): void {
    if (len > this.maxMessageBytes) throw messageTooLarge(len, this.maxMessageBytes);
  }
}

/** grpc-go's status for a received message above the limit. */
export function messageTooLarge(len: number, maxMessageBytes: number): GrpcError {
  return new GrpcError(Status.RESOURCE_EXHAUSTED, `grpc: received message larger than max (${len} vs. ${maxMessageBytes})`);
}

/** Prefixes an encoded message (uncompressed) for sending. */
export function frameMessage(message: Uint8Array): Buffer {
  const out = Buffer.allocUnsafe(MESSAGE_PREFIX_BYTES + message.length);
  out[0] = 0;
  out.writeUInt32BE(message.length, 1);
  out.set(message, MESSAGE_PREFIX_BYTES);
  return out;
}
