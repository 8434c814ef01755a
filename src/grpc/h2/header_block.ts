/**
 * Header blocks of our own HTTP/2 connection (connection.ts): a request's decoded fields as the
 * header object node:http2 hands its handlers (pseudo-headers included, names lower case), with
 * the checks RFC 9113 8.2-8.3 asks of a server (nghttp2 makes the same ones), and a response's
 * header object as an HPACK block. Responses are literals without indexing (hpack.ts): the
 * client's dynamic table never grows, and the blocks every gRPC call sends (`:status 200` with
 * the content type, `grpc-status 0`) are frozen constants in call.ts, encoded once here.
 */

import type { IncomingHttpHeaders } from "node:http2";
import { type HeaderField, encodeLiteralBlock } from "./hpack.js";

/** RFC 9113 8.2.2: headers that belong to one HTTP/1.1 connection and are malformed in HTTP/2. */
const CONNECTION_SPECIFIC = new Set(["connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade"]);
const REQUEST_PSEUDO = new Set([":method", ":scheme", ":authority", ":path"]);

/** A malformed request (RFC 9113 8.1.1): a stream error of type PROTOCOL_ERROR. */
export class MalformedRequest extends Error {}

/**
 * A request's header object: no inherited keys (its prototype has a null prototype, so a header
 * named "constructor" or "__proto__" is an own property like any other, as with
 * Object.create(null)), but built by a constructor, so V8 keeps its properties in fast mode with a
 * hidden class shared by every request of the same header order. An Object.create(null) object is
 * a hash dictionary from its first property: ~900 bytes per request on the leader's heap.
 */
function RequestHeaders(this: object): void {}
RequestHeaders.prototype = Object.create(null) as object;
const RequestHeadersCtor = RequestHeaders as unknown as new () => object;

/**
 * The request's header object, as node:http2 builds it: a repeated field's values joined with
 * ", " (set-cookie kept as a list, cookie joined with "; ").
 */
export function requestHeaders(fields: readonly HeaderField[]): IncomingHttpHeaders {
  const headers = new RequestHeadersCtor() as Record<string, string | string[]>;
  let regularSeen = false;
  for (const { name, value } of fields) {
    if (name.charCodeAt(0) === 0x3a) {
      if (regularSeen) throw new MalformedRequest(`pseudo-header ${name} after a regular header`);
      if (!REQUEST_PSEUDO.has(name)) throw new MalformedRequest(`unknown pseudo-header ${name}`);
      if (headers[name] !== undefined) throw new MalformedRequest(`repeated pseudo-header ${name}`);
      headers[name] = value;
      continue;
    }
    regularSeen = true;
    if (hasUpperCase(name)) throw new MalformedRequest(`header name ${name} is not lower case`);
    if (CONNECTION_SPECIFIC.has(name)) throw new MalformedRequest(`connection-specific header ${name}`);
    if (name === "te" && value !== "trailers") throw new MalformedRequest(`te: ${value}`);
    const before = headers[name];
    if (before === undefined) headers[name] = name === "set-cookie" ? [value] : value;
    else if (Array.isArray(before)) before.push(value);
    else headers[name] = before + (name === "cookie" ? "; " : ", ") + value;
  }
  if (headers[":method"] === undefined) throw new MalformedRequest("no :method");
  if (headers[":method"] !== "CONNECT" && (headers[":path"] === undefined || headers[":scheme"] === undefined)) {
    throw new MalformedRequest("no :path or :scheme");
  }
  return headers as IncomingHttpHeaders;
}

/**
 * A new header object equal to one requestHeaders built (a repeated block's, whose checks it
 * passed): the same properties in the same order, so the same hidden class, without the checks.
 */
export function copyRequestHeaders(headers: IncomingHttpHeaders): IncomingHttpHeaders {
  const copy = new RequestHeadersCtor() as Record<string, string | string[]>;
  for (const name in headers) {
    const value = headers[name]!;
    copy[name] = typeof value === "string" ? value : value.slice();
  }
  return copy as IncomingHttpHeaders;
}

function hasUpperCase(name: string): boolean {
  for (let i = 0; i < name.length; i++) {
    const c = name.charCodeAt(i);
    if (c >= 0x41 && c <= 0x5a) return true;
  }
  return false;
}

/** Encoded blocks of frozen header objects (the per-call constants), by identity. */
const frozenBlocks = new WeakMap<object, Buffer>();

/** A response header (or trailer) object as an HPACK block: pseudo-headers first, names lower-cased. */
export function responseBlock(headers: Readonly<Record<string, unknown>>): Buffer {
  const cached = frozenBlocks.get(headers);
  if (cached !== undefined) return cached;
  const fields: HeaderField[] = [];
  const status = headers[":status"];
  if (status !== undefined) fields.push({ name: ":status", value: String(status), neverIndexed: false });
  for (const key of Object.keys(headers)) {
    if (key === ":status") continue;
    const value = headers[key];
    if (value === undefined) continue;
    const name = key.toLowerCase();
    if (Array.isArray(value)) for (const v of value) fields.push({ name, value: String(v), neverIndexed: false });
    else fields.push({ name, value: String(value), neverIndexed: false });
  }
  const block = encodeLiteralBlock(fields);
  if (Object.isFrozen(headers)) frozenBlocks.set(headers, block);
  return block;
}
