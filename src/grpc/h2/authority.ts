/**
 * The `:authority` (and `host`) values that nghttp2 accepts, and a repair for
 * the ones it does not.
 *
 * Go gRPC clients dialled with a URL ("http://127.0.0.1:2379", as etcdctl
 * --endpoints and every `--cluster` command send it) put the whole URL into
 * :authority. Go's HTTP/2 server takes it; nghttp2 (node:http2) resets the
 * stream with PROTOCOL_ERROR before the application sees it. etcd ignores the
 * authority, so a repaired value serves the request exactly as etcd would.
 */

/**
 * nghttp2_check_authority (nghttp2 1.61, as in Node 20): non-empty, and only
 * RFC 3986 unreserved, sub-delims, ":", "@", "[", "]" and "%". Checked against
 * node:http2 itself in test/grpc/authority.test.ts.
 */
const VALID = new Uint8Array(128);
for (const c of "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~!$&'()*+,;=:@[]%") VALID[c.charCodeAt(0)] = 1;

export function isValidAuthority(value: string): boolean {
  if (value.length === 0) return false;
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i);
    if (c >= 128 || VALID[c] === 0) return false;
  }
  return true;
}

const SCHEME = /^[A-Za-z][A-Za-z0-9+.-]*:\/\//;
/** What a client that had nothing better to send (e.g. a unix socket target) means. */
const FALLBACK_AUTHORITY = "localhost";

/**
 * The host[:port] a client meant: scheme and path, query or fragment dropped,
 * other characters nghttp2 refuses removed. Always valid.
 */
export function repairAuthority(value: string): string {
  let rest = value.replace(SCHEME, "");
  const end = rest.search(/[/?#]/);
  if (end >= 0) rest = rest.slice(0, end);
  let out = "";
  for (let i = 0; i < rest.length; i++) {
    const c = rest.charCodeAt(i);
    if (c < 128 && VALID[c] === 1) out += rest[i];
  }
  return out.length > 0 ? out : FALLBACK_AUTHORITY;
}
