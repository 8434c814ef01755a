/**
 * HPACK (RFC 7541) as far as the inbound header rewriting needs it: a strict
 * decoder that keeps the peer encoder's dynamic table, and an encoder that
 * writes every field as a literal *without indexing*, so the receiver's
 * dynamic table never gains an entry (see authority-rewriter.ts for why).
 *
 * Names and values are latin1 strings: one char per octet, so re-encoding is
 * byte-exact whatever the octets are.
 */

import { HpackError } from "./hpack-error.js";
import { huffmanDecode } from "./hpack-huffman.js";

export { HpackError } from "./hpack-error.js";

export interface HeaderField {
  name: string;
  value: string;
  /** Sent as "literal never indexed": intermediaries must keep it so. */
  neverIndexed: boolean;
}

/** HTTP/2's initial SETTINGS_HEADER_TABLE_SIZE. */
export const DEFAULT_HEADER_TABLE_SIZE = 4096;

/** The longest block kept to compare the next against: a request's, not a large metadata block. */
const MAX_REPEAT_BYTES = 512;
/** RFC 7541 4.1: every entry costs 32 octets beyond its name and value. */
const ENTRY_OVERHEAD = 32;
/** Integers beyond this are refused (no legitimate length or index comes near). */
const MAX_INTEGER = 2 ** 31 - 1;

/** RFC 7541 Appendix A (index = position + 1). */
export const STATIC_TABLE: readonly (readonly [string, string])[] = [
  [":authority", ""],
  [":method", "GET"],
  [":method", "POST"],
  [":path", "/"],
  [":path", "/index.html"],
  [":scheme", "http"],
  [":scheme", "https"],
  [":status", "200"],
  [":status", "204"],
  [":status", "206"],
  [":status", "304"],
  [":status", "400"],
  [":status", "404"],
  [":status", "500"],
  ["accept-charset", ""],
  ["accept-encoding", "gzip, deflate"],
  ["accept-language", ""],
  ["accept-ranges", ""],
  ["accept", ""],
  ["access-control-allow-origin", ""],
  ["age", ""],
  ["allow", ""],
  ["authorization", ""],
  ["cache-control", ""],
  ["content-disposition", ""],
  ["content-encoding", ""],
  ["content-language", ""],
  ["content-length", ""],
  ["content-location", ""],
  ["content-range", ""],
  ["content-type", ""],
  ["cookie", ""],
  ["date", ""],
  ["etag", ""],
  ["expect", ""],
  ["expires", ""],
  ["from", ""],
  ["host", ""],
  ["if-match", ""],
  ["if-modified-since", ""],
  ["if-none-match", ""],
  ["if-range", ""],
  ["if-unmodified-since", ""],
  ["last-modified", ""],
  ["link", ""],
  ["location", ""],
  ["max-forwards", ""],
  ["proxy-authenticate", ""],
  ["proxy-authorization", ""],
  ["range", ""],
  ["referer", ""],
  ["refresh", ""],
  ["retry-after", ""],
  ["server", ""],
  ["set-cookie", ""],
  ["strict-transport-security", ""],
  ["transfer-encoding", ""],
  ["user-agent", ""],
  ["vary", ""],
  ["via", ""],
  ["www-authenticate", ""],
];

const STATIC_COUNT = STATIC_TABLE.length;
const EMPTY = Buffer.alloc(0);

/** First static index of each name, for name references when encoding. */
const STATIC_NAME_INDEX = new Map<string, number>();
STATIC_TABLE.forEach(([name], i) => {
  if (!STATIC_NAME_INDEX.has(name)) STATIC_NAME_INDEX.set(name, i + 1);
});

interface DynamicEntry {
  /** Shared by every block that refers to the entry (decoded fields are never changed). */
  field: Readonly<HeaderField>;
  size: number;
}

/** The static table as decoded fields, made once: an indexed field allocates nothing. */
const STATIC_FIELDS: ReadonlyArray<Readonly<HeaderField>> = STATIC_TABLE.map(([name, value]) => Object.freeze({ name, value, neverIndexed: false }));

export interface HpackDecoderOptions {
  /** The SETTINGS_HEADER_TABLE_SIZE we advertised: the largest table the peer may ask for. */
  maxTableSize?: number;
  /** Cap on a decoded header list (RFC 7540 size: name + value + 32 per field); guards against HPACK bombs. */
  maxHeaderListBytes?: number;
}

/**
 * Decodes the header blocks of one direction of one connection, in order: the
 * dynamic table carries over from block to block, as the peer's encoder keeps
 * it. Any error leaves the table undefined: the connection must end.
 */
export class HpackDecoder {
  private readonly tableSizeLimit: number;
  private readonly maxHeaderListBytes: number;
  /** Oldest first; index 62 is the newest (the last element). */
  private readonly dynamic: DynamicEntry[] = [];
  private tableSize = 0;
  private tableSizeMax: number;
  private pos = 0;
  private block: Buffer = EMPTY;
  /**
   * The last block, copied, when decoding it left the dynamic table as it was, and what it
   * decoded to. A client's encoder sends the same block for every call once its headers are in
   * its table (grpc-go: one short run of indexed fields per request), and an unchanged table
   * decodes the same bytes to the same fields, so a repeat is one compare instead of a decode.
   */
  private repeatBlock: Buffer | undefined;
  private repeatFields: readonly Readonly<HeaderField>[] = [];

  constructor(options: HpackDecoderOptions = {}) {
    this.tableSizeLimit = options.maxTableSize ?? DEFAULT_HEADER_TABLE_SIZE;
    this.tableSizeMax = this.tableSizeLimit;
    this.maxHeaderListBytes = options.maxHeaderListBytes ?? 256 * 1024;
  }

  /** Current dynamic table: number of entries and size in RFC octets (for tests). */
  get table(): { entries: number; size: number; maxSize: number } {
    return { entries: this.dynamic.length, size: this.tableSize, maxSize: this.tableSizeMax };
  }

  /**
   * Decodes one complete header block (HEADERS + CONTINUATION fragments joined). Indexed fields are
   * the table's own frozen objects, shared by every block that refers to them: replace a field,
   * never change it.
   */
  decode(block: Buffer): readonly Readonly<HeaderField>[] {
    const repeat = this.repeatBlock;
    if (repeat !== undefined && repeat.length === block.length && repeat.equals(block)) return this.repeatFields;
    // Cleared first: a block that changes the table (or fails) leaves no repeat behind.
    this.repeatBlock = undefined;
    const fields = this.decodeFields(block);
    if (!this.tableChanged && block.length <= MAX_REPEAT_BYTES) {
      this.repeatBlock = Buffer.from(block);
      this.repeatFields = fields;
    }
    return fields;
  }

  private tableChanged = false;

  private decodeFields(block: Buffer): HeaderField[] {
    this.block = block;
    this.pos = 0;
    this.tableChanged = false;
    const fields: HeaderField[] = [];
    let listBytes = 0;
    while (this.pos < block.length) {
      const first = block[this.pos]!;
      let field: HeaderField;
      if (first & 0x80) {
        // 6.1 Indexed header field.
        const index = this.readInteger(7);
        if (index === 0) throw new HpackError("index 0");
        field = this.lookup(index);
      } else if (first & 0x40) {
        // 6.2.1 Literal with incremental indexing.
        field = this.readLiteral(6, false);
        this.insert(field.name, field.value);
      } else if (first & 0x20) {
        // 6.3 Dynamic table size update: only before the first field of a block.
        if (fields.length > 0) throw new HpackError("table size update after a header field");
        const size = this.readInteger(5);
        if (size > this.tableSizeLimit) throw new HpackError(`table size ${size} above the advertised ${this.tableSizeLimit}`);
        this.tableSizeMax = size;
        this.tableChanged = true;
        this.evict(0);
        continue;
      } else {
        // 6.2.2 without indexing (0000) / 6.2.3 never indexed (0001).
        field = this.readLiteral(4, (first & 0x10) !== 0);
      }
      listBytes += field.name.length + field.value.length + ENTRY_OVERHEAD;
      if (listBytes > this.maxHeaderListBytes) throw new HpackError(`header list above ${this.maxHeaderListBytes} bytes`);
      fields.push(field);
    }
    this.block = EMPTY;
    return fields;
  }

  private lookup(index: number): Readonly<HeaderField> {
    if (index <= STATIC_COUNT) return STATIC_FIELDS[index - 1]!;
    const entry = this.dynamic[this.dynamic.length - 1 - (index - STATIC_COUNT - 1)];
    if (!entry) throw new HpackError(`index ${index} beyond the table (${STATIC_COUNT + this.dynamic.length} entries)`);
    return entry.field;
  }

  private readLiteral(prefixBits: number, neverIndexed: boolean): HeaderField {
    const nameIndex = this.readInteger(prefixBits);
    const name = nameIndex === 0 ? this.readString() : this.lookup(nameIndex).name;
    const value = this.readString();
    return { name, value, neverIndexed };
  }

  /** RFC 7541 4.4: an entry larger than the table empties it and is not added. */
  private insert(name: string, value: string): void {
    this.tableChanged = true;
    const size = name.length + value.length + ENTRY_OVERHEAD;
    this.evict(size);
    if (size <= this.tableSizeMax) {
      this.dynamic.push({ field: Object.freeze({ name, value, neverIndexed: false }), size });
      this.tableSize += size;
    }
  }

  /** Evicts oldest entries until `room` more octets fit. */
  private evict(room: number): void {
    let drop = 0;
    while (drop < this.dynamic.length && this.tableSize + room > this.tableSizeMax) {
      this.tableSize -= this.dynamic[drop]!.size;
      drop++;
    }
    if (drop > 0) this.dynamic.splice(0, drop);
    if (this.tableSize < 0 || (this.dynamic.length === 0 && this.tableSize !== 0)) {
      throw new Error(`HPACK table size accounting broken: ${this.tableSize}`);
    }
  }

  /** RFC 7541 5.1 with an N-bit prefix. */
  private readInteger(prefixBits: number): number {
    const block = this.block;
    const mask = (1 << prefixBits) - 1;
    let value = block[this.pos++]! & mask;
    if (value < mask) return value;
    let multiplier = 1;
    for (;;) {
      if (this.pos >= block.length) throw new HpackError("truncated integer");
      const octet = block[this.pos++]!;
      value += (octet & 0x7f) * multiplier;
      if (value > MAX_INTEGER) throw new HpackError("integer too large");
      if ((octet & 0x80) === 0) return value;
      multiplier *= 128;
    }
  }

  /** RFC 7541 5.2: H bit, 7-bit-prefix length, octets (Huffman-coded if H). */
  private readString(): string {
    const block = this.block;
    if (this.pos >= block.length) throw new HpackError("truncated string");
    const huffman = (block[this.pos]! & 0x80) !== 0;
    const length = this.readInteger(7);
    const start = this.pos;
    const end = start + length;
    if (end > block.length) throw new HpackError("string beyond the block");
    this.pos = end;
    return huffman ? huffmanDecode(block, start, end) : block.toString("latin1", start, end);
  }
}

function integerBytes(value: number, prefixBits: number): number {
  const mask = (1 << prefixBits) - 1;
  if (value < mask) return 1;
  let n = 2;
  for (let rest = value - mask; rest >= 128; rest = Math.floor(rest / 128)) n++;
  return n;
}

function writeInteger(out: Buffer, pos: number, value: number, prefixBits: number, flags: number): number {
  const mask = (1 << prefixBits) - 1;
  if (value < mask) {
    out[pos++] = flags | value;
    return pos;
  }
  out[pos++] = flags | mask;
  let rest = value - mask;
  while (rest >= 128) {
    out[pos++] = (rest % 128) | 0x80;
    rest = Math.floor(rest / 128);
  }
  out[pos++] = rest;
  return pos;
}

/**
 * Encodes fields as literals without indexing (or never indexed, as marked),
 * names by static index where the static table has them, strings raw (no
 * Huffman). The receiving decoder's dynamic table stays as it was.
 * `tableSizeUpdate` prefixes a dynamic table size update.
 */
export function encodeLiteralBlock(fields: readonly HeaderField[], tableSizeUpdate?: number): Buffer {
  let size = tableSizeUpdate === undefined ? 0 : integerBytes(tableSizeUpdate, 5);
  for (const field of fields) {
    const nameIndex = STATIC_NAME_INDEX.get(field.name) ?? 0;
    size += integerBytes(nameIndex, 4);
    if (nameIndex === 0) size += integerBytes(field.name.length, 7) + field.name.length;
    size += integerBytes(field.value.length, 7) + field.value.length;
  }
  const out = Buffer.allocUnsafe(size);
  let pos = 0;
  if (tableSizeUpdate !== undefined) pos = writeInteger(out, pos, tableSizeUpdate, 5, 0x20);
  for (const field of fields) {
    const nameIndex = STATIC_NAME_INDEX.get(field.name) ?? 0;
    pos = writeInteger(out, pos, nameIndex, 4, field.neverIndexed ? 0x10 : 0x00);
    if (nameIndex === 0) {
      pos = writeInteger(out, pos, field.name.length, 7, 0);
      pos += out.write(field.name, pos, "latin1");
    }
    pos = writeInteger(out, pos, field.value.length, 7, 0);
    pos += out.write(field.value, pos, "latin1");
  }
  if (pos !== size) throw new Error(`HPACK literal block size mismatch: wrote ${pos}, computed ${size}`);
  return out;
}
