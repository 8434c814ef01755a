/**
 * Translation of a client's byte stream (client to server only) so that
 * nghttp2 accepts header blocks whose :authority it would refuse (see
 * authority.ts). Frames other than HEADERS and CONTINUATION pass through as
 * they are (slices of the input, no copy); every header block is decoded with
 * the client's HPACK state and re-encoded with all fields as literals without
 * indexing, bad :authority/host values repaired.
 *
 * Why every block and not only the bad ones: the client's encoder refers to
 * its dynamic table, which nghttp2's decoder can only mirror if it saw every
 * block as sent. Once one block is rewritten, the two tables part; re-encoding
 * all blocks without indexing keeps nghttp2's table empty (the first block
 * also sets its size to 0), so nothing forwarded ever depends on it, while our
 * decoder alone follows the client's table from the connection's first byte.
 * A connection is therefore translated from its start or not at all: the
 * first-request gate decides which, before nghttp2 sees a byte.
 *
 * Frame sizes: a rewritten block can be larger than the original (no Huffman,
 * no indexing), so it is split into CONTINUATION frames of at most
 * SETTINGS_MAX_FRAME_SIZE. HEADERS padding does not count against flow
 * control, so dropping it changes nothing else.
 */

import { isValidAuthority, repairAuthority } from "./authority.js";
import { DEFAULT_HEADER_TABLE_SIZE, encodeLiteralBlock, HpackDecoder } from "./hpack.js";
import {
  CLIENT_PREFACE,
  Flag,
  FRAME_HEADER_BYTES,
  type FrameHeader,
  FrameType,
  headerBlockFrames,
  headersFragment,
  Http2ProtocolError,
  MAX_FRAME_SIZE,
  readFrameHeader,
} from "./http2-frame.js";

export interface AuthorityRewriterOptions {
  /** SETTINGS_HEADER_TABLE_SIZE the server advertised (bounds the client's table). */
  maxTableSize?: number;
  /** SETTINGS_MAX_FRAME_SIZE the server advertised (bounds frames in both directions here). */
  maxFrameSize?: number;
  /** Largest encoded header block (HEADERS + CONTINUATION) accepted. */
  maxHeaderBlockBytes?: number;
  /** Largest decoded header list accepted. */
  maxHeaderListBytes?: number;
}

const DEFAULT_MAX_HEADER_BLOCK_BYTES = 256 * 1024;

interface OpenBlock {
  streamId: number;
  endStream: boolean;
  priority: Buffer | undefined;
  fragments: Buffer[];
  bytes: number;
}

interface FrameInCollection {
  header: FrameHeader;
  payload: Buffer;
  filled: number;
}

export class AuthorityRewriter {
  /** Header blocks translated, and :authority/host values repaired among them. */
  blocks = 0;
  repaired = 0;
  private readonly decoder: HpackDecoder;
  private readonly maxFrameSize: number;
  private readonly maxHeaderBlockBytes: number;
  private prefaceLeft = CLIENT_PREFACE.length;
  /** A frame header split across chunks. */
  private readonly head = Buffer.alloc(FRAME_HEADER_BYTES);
  private headFilled = 0;
  /** Payload bytes still to come of a frame that passes through. */
  private passLeft = 0;
  private collecting: FrameInCollection | undefined;
  private block: OpenBlock | undefined;

  constructor(options: AuthorityRewriterOptions = {}) {
    this.decoder = new HpackDecoder({
      maxTableSize: options.maxTableSize ?? DEFAULT_HEADER_TABLE_SIZE,
      maxHeaderListBytes: options.maxHeaderListBytes,
    });
    this.maxFrameSize = options.maxFrameSize ?? MAX_FRAME_SIZE;
    this.maxHeaderBlockBytes = options.maxHeaderBlockBytes ?? DEFAULT_MAX_HEADER_BLOCK_BYTES;
  }

  /**
   * Consumes the next bytes from the client; returns the bytes to give nghttp2
   * in their place (possibly none yet: a header block is held until complete).
   * Throws Http2ProtocolError or HpackError when the client breaks the
   * protocol: the connection must then end.
   */
  push(chunk: Buffer): Buffer[] {
    const out: Buffer[] = [];
    const n = chunk.length;
    let i = 0;
    /** chunk[passFrom, i) passes through once flushed. */
    let passFrom = 0;
    const flush = (to: number): void => {
      if (to > passFrom) out.push(passFrom === 0 && to === n ? chunk : chunk.subarray(passFrom, to));
    };
    while (i < n) {
      if (this.prefaceLeft > 0) {
        const k = Math.min(this.prefaceLeft, n - i);
        i += k;
        this.prefaceLeft -= k;
        continue;
      }
      if (this.passLeft > 0) {
        const k = Math.min(this.passLeft, n - i);
        i += k;
        this.passLeft -= k;
        continue;
      }
      const collecting = this.collecting;
      if (collecting) {
        const k = Math.min(collecting.payload.length - collecting.filled, n - i);
        chunk.copy(collecting.payload, collecting.filled, i, i + k);
        collecting.filled += k;
        i += k;
        passFrom = i;
        if (collecting.filled === collecting.payload.length) {
          this.collecting = undefined;
          this.onHeaderFrame(collecting.header, collecting.payload, out);
        }
        continue;
      }
      // A frame boundary.
      let header: FrameHeader;
      const headerStart = i;
      let headerInChunk: boolean;
      if (this.headFilled === 0 && n - i >= FRAME_HEADER_BYTES) {
        header = readFrameHeader(chunk, i);
        i += FRAME_HEADER_BYTES;
        headerInChunk = true;
      } else {
        flush(i);
        const k = Math.min(FRAME_HEADER_BYTES - this.headFilled, n - i);
        chunk.copy(this.head, this.headFilled, i, i + k);
        this.headFilled += k;
        i += k;
        passFrom = i;
        if (this.headFilled < FRAME_HEADER_BYTES) continue;
        this.headFilled = 0;
        header = readFrameHeader(this.head, 0);
        headerInChunk = false;
      }
      if (this.block && header.type !== FrameType.CONTINUATION) {
        throw new Http2ProtocolError(`frame type ${header.type} inside the header block of stream ${this.block.streamId}`);
      }
      if (header.type === FrameType.HEADERS || header.type === FrameType.CONTINUATION) {
        if (header.length > this.maxFrameSize) throw new Http2ProtocolError(`header frame of ${header.length} bytes`);
        if (headerInChunk) flush(headerStart);
        passFrom = i;
        const payload = Buffer.allocUnsafe(header.length);
        if (header.length === 0) this.onHeaderFrame(header, payload, out);
        else this.collecting = { header, payload, filled: 0 };
      } else {
        if (!headerInChunk) out.push(Buffer.from(this.head));
        this.passLeft = header.length;
      }
    }
    flush(n);
    return out;
  }

  private onHeaderFrame(header: FrameHeader, payload: Buffer, out: Buffer[]): void {
    if (header.streamId === 0) throw new Http2ProtocolError("header frame on stream 0");
    let block = this.block;
    if (header.type === FrameType.HEADERS) {
      const { fragment, priority } = headersFragment(header.flags, payload);
      block = {
        streamId: header.streamId,
        endStream: (header.flags & Flag.END_STREAM) !== 0,
        priority,
        fragments: [fragment],
        bytes: fragment.length,
      };
      this.block = block;
    } else {
      if (!block || block.streamId !== header.streamId) throw new Http2ProtocolError(`CONTINUATION of stream ${header.streamId} without HEADERS`);
      block.fragments.push(payload);
      block.bytes += payload.length;
    }
    if (block.bytes > this.maxHeaderBlockBytes) throw new Http2ProtocolError(`header block above ${this.maxHeaderBlockBytes} bytes`);
    if (header.flags & Flag.END_HEADERS) {
      this.block = undefined;
      out.push(this.translate(block));
    }
  }

  private translate(block: OpenBlock): Buffer {
    const encoded = block.fragments.length === 1 ? block.fragments[0]! : Buffer.concat(block.fragments, block.bytes);
    // A copy: the decoder hands back a repeated block's list itself, shared with the next repeat.
    const fields = this.decoder.decode(encoded).slice();
    for (let i = 0; i < fields.length; i++) {
      const field = fields[i]!;
      if ((field.name === ":authority" || field.name === "host") && !isValidAuthority(field.value)) {
        // A new field: the decoded ones may be the decoder's shared table entries.
        fields[i] = { ...field, value: repairAuthority(field.value) };
        this.repaired++;
      }
    }
    // The first block empties nghttp2's table for good (see the file comment).
    const literal = encodeLiteralBlock(fields, this.blocks === 0 ? 0 : undefined);
    this.blocks++;
    return headerBlockFrames(block.streamId, block.endStream, block.priority, literal, this.maxFrameSize);
  }
}
