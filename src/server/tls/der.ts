/**
 * The few DER (ASN.1) pieces the TLS code needs: writing a self-signed certificate (auto_tls.ts)
 * and reading a CRL's revoked serial numbers (crl.ts). Node can sign and parse certificates but
 * neither builds one nor parses a CRL, and these two small jobs do not justify a dependency.
 */

export const Tag = {
  BOOLEAN: 0x01,
  INTEGER: 0x02,
  BIT_STRING: 0x03,
  OCTET_STRING: 0x04,
  OID: 0x06,
  UTF8_STRING: 0x0c,
  UTC_TIME: 0x17,
  GENERALIZED_TIME: 0x18,
  SEQUENCE: 0x30,
  SET: 0x31,
} as const;

function lengthBytes(n: number): Buffer {
  if (n < 0x80) return Buffer.from([n]);
  const bytes: number[] = [];
  for (let v = n; v > 0; v = Math.floor(v / 256)) bytes.unshift(v & 0xff);
  return Buffer.from([0x80 | bytes.length, ...bytes]);
}

/** One TLV: tag, DER length, content. */
export function tlv(tag: number, ...content: Buffer[]): Buffer {
  const body = Buffer.concat(content);
  return Buffer.concat([Buffer.from([tag]), lengthBytes(body.length), body]);
}

export const seq = (...items: Buffer[]): Buffer => tlv(Tag.SEQUENCE, ...items);

export function oid(dotted: string): Buffer {
  const parts = dotted.split(".").map(Number);
  const out: number[] = [40 * parts[0]! + parts[1]!];
  for (const p of parts.slice(2)) {
    const chunk: number[] = [p & 0x7f];
    for (let v = Math.floor(p / 128); v > 0; v = Math.floor(v / 128)) chunk.unshift(0x80 | (v & 0x7f));
    out.push(...chunk);
  }
  return tlv(Tag.OID, Buffer.from(out));
}

/** A non-negative INTEGER from big-endian bytes (a 0x00 is prefixed when the top bit is set). */
export function unsignedInteger(bytes: Buffer): Buffer {
  let b = bytes;
  while (b.length > 1 && b[0] === 0 && (b[1]! & 0x80) === 0) b = b.subarray(1);
  return tlv(Tag.INTEGER, (b[0]! & 0x80) !== 0 ? Buffer.concat([Buffer.from([0]), b]) : b);
}

/** UTCTime (years 1950-2049) as RFC 5280 requires, else GeneralizedTime. */
export function time(d: Date): Buffer {
  const iso = d.toISOString().replace(/[-:T]/g, "").slice(0, 14); // YYYYMMDDHHMMSS
  const year = d.getUTCFullYear();
  if (year >= 1950 && year < 2050) return tlv(Tag.UTC_TIME, Buffer.from(`${iso.slice(2)}Z`, "ascii"));
  return tlv(Tag.GENERALIZED_TIME, Buffer.from(`${iso}Z`, "ascii"));
}

/** A parsed TLV: its tag, its content, and where the next one starts. */
export interface Element {
  readonly tag: number;
  readonly content: Buffer;
  readonly end: number;
}

/** Reads the TLV at `offset` of `buf`; throws on a truncated or over-long element. */
export function readElement(buf: Buffer, offset: number): Element {
  if (offset + 2 > buf.length) throw new Error("DER: truncated element");
  const tag = buf[offset]!;
  let len = buf[offset + 1]!;
  let pos = offset + 2;
  if (len & 0x80) {
    const n = len & 0x7f;
    if (n === 0 || n > 4 || pos + n > buf.length) throw new Error("DER: unsupported length");
    len = 0;
    for (let i = 0; i < n; i++) len = len * 256 + buf[pos + i]!;
    pos += n;
  }
  if (pos + len > buf.length) throw new Error("DER: element exceeds its container");
  return { tag, content: buf.subarray(pos, pos + len), end: pos + len };
}

/** The elements inside a constructed element's content, in order. */
export function children(content: Buffer): Element[] {
  const out: Element[] = [];
  for (let pos = 0; pos < content.length; ) {
    const e = readElement(content, pos);
    out.push(e);
    pos = e.end;
  }
  return out;
}
