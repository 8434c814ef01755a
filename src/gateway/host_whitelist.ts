/**
 * etcd 3.4's --host-whitelist (etcdserver/api/v2http's AccessController.IsHostWhitelisted, checked
 * by embed/serve.go's accessController): an HTTP request that did not come over TLS is served only
 * if the host part of its Host header is in the list, so a page in a browser cannot reach the
 * member through a rebound DNS name (DNS rebinding). Empty or `*` allows every host; TLS requests
 * are never checked. A refused request gets 421 and etcd's explanation, as etcd answers it.
 */
import type { HttpRequest, HttpResponse } from "../grpc/index.js";

export interface HostWhitelist {
  /** Allowed host names; empty: all. */
  readonly hosts: ReadonlySet<string>;
}

/** The flag as etcd reads it: comma-separated names ("" and "*" allow all, as its usage says). */
export function parseHostWhitelist(flag: string): HostWhitelist {
  return { hosts: new Set(flag.split(",").filter((h) => h !== "")) };
}

/** Go's httputil.GetHostname: net.SplitHostPort's host, or the whole value when that fails. */
export function hostnameOf(host: string): string {
  if (host.startsWith("[")) {
    const end = host.indexOf("]");
    // "[::1]:2379" splits; "[::1]" (no port) does not, and Go hands back the whole value.
    if (end > 0 && host[end + 1] === ":" && host.indexOf(":", end + 2) < 0) return host.slice(1, end);
    return host;
  }
  const colon = host.indexOf(":");
  // No port, or more than one colon (an unbracketed IPv6 address): SplitHostPort fails.
  if (colon < 0 || host.indexOf(":", colon + 1) >= 0) return host;
  return host.slice(0, colon);
}

export function isHostWhitelisted(w: HostWhitelist, host: string): boolean {
  return w.hosts.size === 0 || w.hosts.has("*") || w.hosts.has(host);
}

/** etcd's answer to a refused Host (embed/serve.go: http.Error with its text, 421 Misdirected Request). */
export function invalidHost(hostname: string): HttpResponse {
  const body = `
etcd received your request, but the Host header was unrecognized.

To fix this, choose one of the following options:
- Enable TLS, then any HTTPS request will be allowed.
- Add the hostname you want to use to the whitelist in settings.
  - e.g. etcd --host-whitelist "${hostname}"

This requirement has been added to help prevent "DNS Rebinding" attacks (CVE-2018-5702).
`;
  const text = `${body}\n`;
  return {
    status: 421,
    headers: { "content-type": "text/plain; charset=utf-8", "x-content-type-options": "nosniff", "content-length": String(Buffer.byteLength(text)) },
    body: text,
  };
}

/** The refusal for `request`, or undefined when it may be served. */
export function hostRefusal(w: HostWhitelist, request: HttpRequest): HttpResponse | undefined {
  if (request.secure) return undefined;
  const hostname = hostnameOf(request.host);
  return isHostWhitelisted(w, hostname) ? undefined : invalidHost(hostname);
}
