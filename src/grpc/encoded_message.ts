/**
 * A response message its handler encoded itself: the gRPC layers send its bytes as they are,
 * without the method's codec. For an answer too large to build as objects first (a Range over
 * millions of keys is encoded as it is read, src/server/range_encoding.ts); every other answer is
 * an object the codec encodes.
 */
import { MESSAGE_PREFIX_BYTES } from "./framing.js";

export class EncodedMessage {
  /**
   * `framed`: the 5-byte gRPC message prefix (uncompressed, the message's length), then the
   * message's protobuf bytes.
   */
  constructor(readonly framed: Buffer) {
    if (framed.length < MESSAGE_PREFIX_BYTES || framed[0] !== 0 || framed.readUInt32BE(1) !== framed.length - MESSAGE_PREFIX_BYTES) {
      throw new Error(`encoded message: prefix does not frame its ${framed.length - MESSAGE_PREFIX_BYTES} bytes`);
    }
  }

  /** The message's protobuf bytes, without the prefix. */
  get bytes(): Buffer {
    return this.framed.subarray(MESSAGE_PREFIX_BYTES);
  }
}
