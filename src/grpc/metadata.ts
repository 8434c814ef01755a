/**
 * Request metadata: the HTTP/2 request headers of a call, minus the pseudo-headers
 * and the gRPC transport headers. Keys are lower-case; keys ending in `-bin`
 * carry base64 values and are returned decoded.
 */

import type { IncomingHttpHeaders } from "node:http2";

/** Headers that belong to the transport, not to the application's metadata. */
const RESERVED = new Set([
  "content-type",
  "te",
  "grpc-timeout",
  "grpc-encoding",
  "grpc-accept-encoding",
  "user-agent",
  "content-length",
]);

/** True for a header that is the transport's (a pseudo-header or one of RESERVED), not the application's metadata. */
export function isTransportHeader(key: string): boolean {
  return key.charCodeAt(0) === 0x3a || RESERVED.has(key);
}

export interface Metadata {
  /** First value of `key` (lower-case), or undefined. */
  get(key: string): string | undefined;
  /** All values of `key`. */
  getAll(key: string): string[];
  /** Decoded value of a binary (`-bin`) key. */
  getBinary(key: string): Buffer | undefined;
  /** All application entries, for logging and forwarding. */
  toRecord(): Record<string, string[]>;
}

function valuesOf(v: string | string[] | undefined): string[] {
  if (v === undefined) return [];
  if (Array.isArray(v)) return v;
  // A header repeated on the wire may arrive comma-joined.
  return v.split(",").map((s) => s.trim());
}

/** Metadata read lazily from an HTTP/2 header object (no copy on the hot path). */
export class HeaderMetadata implements Metadata {
  private readonly headers: IncomingHttpHeaders;

  constructor(headers: IncomingHttpHeaders) {
    this.headers = headers;
  }

  get(key: string): string | undefined {
    const v = this.headers[key];
    if (v === undefined || key.charCodeAt(0) === 0x3a) return undefined;
    return Array.isArray(v) ? v[0] : v;
  }

  /** The headers this view reads (a front end forwards them to the core as they came). */
  get rawHeaders(): Readonly<IncomingHttpHeaders> {
    return this.headers;
  }

  getAll(key: string): string[] {
    if (key.charCodeAt(0) === 0x3a) return [];
    return valuesOf(this.headers[key]);
  }

  getBinary(key: string): Buffer | undefined {
    const v = this.get(key);
    return v === undefined ? undefined : Buffer.from(v, "base64");
  }

  toRecord(): Record<string, string[]> {
    const out: Record<string, string[]> = {};
    for (const key of Object.keys(this.headers)) {
      if (isTransportHeader(key)) continue;
      out[key] = valuesOf(this.headers[key]);
    }
    return out;
  }
}

/** Metadata from a plain record (the grpc-js adapter and tests). */
export class RecordMetadata implements Metadata {
  private readonly entries: Record<string, string[]>;

  constructor(entries: Record<string, string[]>) {
    this.entries = entries;
  }

  get(key: string): string | undefined {
    return this.entries[key]?.[0];
  }

  getAll(key: string): string[] {
    return this.entries[key] ?? [];
  }

  getBinary(key: string): Buffer | undefined {
    const v = this.get(key);
    return v === undefined ? undefined : Buffer.from(v, "base64");
  }

  toRecord(): Record<string, string[]> {
    return { ...this.entries };
  }
}
