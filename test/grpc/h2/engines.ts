/** The HTTP/2 engines the conformance suite (conformance.test.ts) runs every test against. */
import type { GrpcServerOptions } from "../../../src/grpc/server.js";
export const HTTP2_ENGINES = ["node"] as const;
export type Http2Engine = (typeof HTTP2_ENGINES)[number];
/** Server options selecting an HTTP/2 engine (node:http2 is the default, so none). */
export function engineOptions(_engine: Http2Engine): Partial<GrpcServerOptions> { return {}; }
