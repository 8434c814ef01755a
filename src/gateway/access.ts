/**
 * etcd's access controller in front of everything HTTP on the client port (embed/serve.go):
 * `/v3beta/` is served as `/v3/`; CORS headers go on every answer whose origin `--cors` allows
 * (no list or `*`: every origin, answered `*`); `OPTIONS` is answered 200 at once, on any path.
 * A path nothing serves gets Go's 404, with the CORS headers too. Before all that, a plaintext
 * request whose Host --host-whitelist does not name is refused (host_whitelist.ts).
 */

import type { HttpHandler, HttpRequest, HttpResponse } from "../grpc/index.js";
import { hostRefusal, parseHostWhitelist, type HostWhitelist } from "./host_whitelist.js";

/** etcd's --cors: a comma-separated list of origins; empty or `*` allows all. */
export interface CorsPolicy {
  readonly origins: ReadonlySet<string>;
}

export function parseCors(flag: string): CorsPolicy {
  return { origins: new Set(flag.split(",").map((s) => s.trim()).filter((s) => s !== "")) };
}

function originAllowed(p: CorsPolicy, origin: string): boolean {
  return p.origins.size === 0 || p.origins.has("*") || p.origins.has(origin);
}

/** etcd's addCORSHeader. */
function corsHeaders(origin: string): Record<string, string> {
  return {
    "access-control-allow-methods": "POST, GET, OPTIONS, PUT, DELETE",
    "access-control-allow-origin": origin,
    "access-control-allow-headers": "accept, content-type, authorization",
  };
}

const NOT_FOUND: HttpResponse = {
  status: 404,
  headers: { "content-type": "text/plain; charset=utf-8", "x-content-type-options": "nosniff", "content-length": "19" },
  body: "404 page not found\n",
};

function header(request: HttpRequest, name: string): string | undefined {
  const v = request.headers[name];
  return Array.isArray(v) ? v[0] : v;
}

export function accessController(policy: CorsPolicy, inner: HttpHandler, hosts: HostWhitelist = parseHostWhitelist("*")): HttpHandler {
  return async (request) => {
    // etcd checks the Host of a plaintext request first: a refusal carries no CORS headers.
    const refused = hostRefusal(hosts, request);
    if (refused !== undefined) return refused;
    let cors: Record<string, string> | undefined;
    if (originAllowed(policy, "*")) cors = corsHeaders("*");
    else {
      const origin = header(request, "origin");
      if (origin !== undefined && originAllowed(policy, origin)) cors = corsHeaders(origin);
    }
    if (request.method === "OPTIONS") return { status: 200, headers: { ...cors, "content-length": "0" }, body: "" };
    const path = request.url.split("?")[0]!;
    const routed: HttpRequest = path.startsWith("/v3beta/") ? { ...bind(request), url: "/v3/" + request.url.slice("/v3beta/".length) } : request;
    const response = (await inner(routed)) ?? NOT_FOUND;
    return cors === undefined ? response : { ...response, headers: { ...cors, ...response.headers } };
  };
}

/** A copy of a request whose getters and methods still read the original. */
function bind(request: HttpRequest): HttpRequest {
  return {
    method: request.method,
    url: request.url,
    headers: request.headers,
    httpVersion: request.httpVersion,
    host: request.host,
    secure: request.secure,
    get signal() {
      return request.signal;
    },
    body: (limit) => request.body(limit),
    readBody: (onChunk, onEnd) => request.readBody(onChunk, onEnd),
  };
}
