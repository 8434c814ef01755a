/** The HTTP/2 engines the conformance suite (conformance.test.ts) runs every test against. */
import type { GrpcServerOptions, Http2Engine } from "../../../src/grpc/server.js";
export type { Http2Engine } from "../../../src/grpc/server.js";
export const HTTP2_ENGINES: readonly Http2Engine[] = ["own", "node"];
/** Server options selecting an HTTP/2 engine: ours (src/grpc/h2/connection.ts) or node:http2's. */
export function engineOptions(engine: Http2Engine): Partial<GrpcServerOptions> {
  return { http2Engine: engine };
}
