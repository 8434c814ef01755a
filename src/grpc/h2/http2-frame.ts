/**
 * HTTP/2 frame layout (RFC 9113 section 4 and 6), for the few places that
 * look at a client's bytes before nghttp2 does (first-request-gate.ts,
 * authority-rewriter.ts).
 */

export const CLIENT_PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "latin1");
export const FRAME_HEADER_BYTES = 9;
/** SETTINGS_MAX_FRAME_SIZE that node:http2 advertises (the protocol default). */
export const MAX_FRAME_SIZE = 16384;

export const FrameType = {
  DATA: 0x0,
  HEADERS: 0x1,
  PRIORITY: 0x2,
  RST_STREAM: 0x3,
  SETTINGS: 0x4,
  PUSH_PROMISE: 0x5,
  PING: 0x6,
  GOAWAY: 0x7,
  WINDOW_UPDATE: 0x8,
  CONTINUATION: 0x9,
} as const;

export const Flag = {
  END_STREAM: 0x1,
  ACK: 0x1,
  END_HEADERS: 0x4,
  PADDED: 0x8,
  PRIORITY: 0x20,
} as const;

export const SettingsId = {
  HEADER_TABLE_SIZE: 0x1,
  MAX_CONCURRENT_STREAMS: 0x3,
} as const;

/** A client that broke the framing rules: fatal to the connection. */
export class Http2ProtocolError extends Error {
  constructor(message: string) {
    super(`HTTP/2: ${message}`);
    this.name = "Http2ProtocolError";
  }
}

export interface FrameHeader {
  length: number;
  type: number;
  flags: number;
  streamId: number;
}

export function readFrameHeader(buf: Uint8Array, at: number): FrameHeader {
  return {
    length: (buf[at]! << 16) | (buf[at + 1]! << 8) | buf[at + 2]!,
    type: buf[at + 3]!,
    flags: buf[at + 4]!,
    streamId: ((buf[at + 5]! & 0x7f) * 2 ** 24) + ((buf[at + 6]! << 16) | (buf[at + 7]! << 8) | buf[at + 8]!),
  };
}

export function writeFrameHeader(out: Buffer, at: number, header: FrameHeader): void {
  out[at] = (header.length >>> 16) & 0xff;
  out[at + 1] = (header.length >>> 8) & 0xff;
  out[at + 2] = header.length & 0xff;
  out[at + 3] = header.type;
  out[at + 4] = header.flags;
  out.writeUInt32BE(header.streamId, at + 5);
}

export function frame(type: number, flags: number, streamId: number, payload: Uint8Array = new Uint8Array(0)): Buffer {
  const out = Buffer.allocUnsafe(FRAME_HEADER_BYTES + payload.length);
  writeFrameHeader(out, 0, { length: payload.length, type, flags, streamId });
  out.set(payload, FRAME_HEADER_BYTES);
  return out;
}

export function settingsFrame(entries: readonly (readonly [number, number])[]): Buffer {
  const payload = Buffer.allocUnsafe(6 * entries.length);
  entries.forEach(([id, value], i) => {
    payload.writeUInt16BE(id, 6 * i);
    payload.writeUInt32BE(value, 6 * i + 2);
  });
  return frame(FrameType.SETTINGS, 0, 0, payload);
}

/** The header block fragment of a HEADERS payload, without padding, and its priority fields if any. */
export function headersFragment(flags: number, payload: Buffer): { fragment: Buffer; priority: Buffer | undefined } {
  let start = 0;
  let end = payload.length;
  if (flags & Flag.PADDED) {
    if (payload.length < 1) throw new Http2ProtocolError("PADDED HEADERS without pad length");
    end -= payload[0]!;
    start = 1;
  }
  let priority: Buffer | undefined;
  if (flags & Flag.PRIORITY) {
    priority = payload.subarray(start, start + 5);
    start += 5;
  }
  if (end < start) throw new Http2ProtocolError("HEADERS padding exceeds the payload");
  return { fragment: payload.subarray(start, end), priority };
}

/**
 * A header block as one HEADERS frame and as many CONTINUATION frames as
 * `maxFrameSize` needs, in one buffer. END_STREAM and the priority fields
 * are those of the original HEADERS; padding is not kept.
 */
export function headerBlockFrames(streamId: number, endStream: boolean, priority: Buffer | undefined, block: Buffer, maxFrameSize = MAX_FRAME_SIZE): Buffer {
  const priorityBytes = priority ? priority.length : 0;
  const firstRoom = maxFrameSize - priorityBytes;
  const firstLength = Math.min(block.length, firstRoom);
  const continuations = Math.ceil((block.length - firstLength) / maxFrameSize);
  const out = Buffer.allocUnsafe(FRAME_HEADER_BYTES * (1 + continuations) + priorityBytes + block.length);
  let flags = (endStream ? Flag.END_STREAM : 0) | (priority ? Flag.PRIORITY : 0) | (continuations === 0 ? Flag.END_HEADERS : 0);
  writeFrameHeader(out, 0, { length: priorityBytes + firstLength, type: FrameType.HEADERS, flags, streamId });
  let at = FRAME_HEADER_BYTES;
  if (priority) at += priority.copy(out, at);
  at += block.copy(out, at, 0, firstLength);
  for (let sent = firstLength, i = 1; sent < block.length; i++) {
    const length = Math.min(block.length - sent, maxFrameSize);
    flags = i === continuations ? Flag.END_HEADERS : 0;
    writeFrameHeader(out, at, { length, type: FrameType.CONTINUATION, flags, streamId });
    at += FRAME_HEADER_BYTES;
    at += block.copy(out, at, sent, sent + length);
    sent += length;
  }
  if (at !== out.length) throw new Error(`header block framing wrote ${at} of ${out.length} bytes`);
  return out;
}
