/**
 * The client port's plain HTTP as etcd serves it: the access controller (CORS, /v3beta/) in
 * front of the JSON gateway and the member's other routes (/metrics, /health, /version).
 */

import type { HttpHandler } from "../grpc/index.js";
import { ETCD_API_FILES, PROTO_DIR } from "../pb/protos.js";
import { accessController, parseCors } from "./access.js";
import { parseHostWhitelist } from "./host_whitelist.js";
import { jsonGateway, type MethodTable } from "./gateway.js";
import { JsonMapping } from "./json_mapping.js";

export { gatewayPaths } from "./routes.js";
export type { MethodTable } from "./gateway.js";

let mapping: JsonMapping | undefined;

/** The JSON mapping of etcd's API messages, built once per process. */
export function loadGatewayMapping(): JsonMapping {
  mapping ??= JsonMapping.load(PROTO_DIR, ETCD_API_FILES);
  return mapping;
}

export interface ClientHttpOptions {
  /** The client port's gRPC methods (its GrpcServer): the gateway calls the same handlers. */
  methods: MethodTable;
  /** The member's other HTTP routes; undefined for a path they do not serve. */
  routes: HttpHandler;
  /** --cors */
  cors: string;
  /** --host-whitelist ("*" when not given) */
  hostWhitelist?: string;
  /** --enable-grpc-gateway (true when not given): false leaves /v3/ to the routes, which answer 404 as etcd does. */
  gateway?: boolean;
}

export function clientHttp(o: ClientHttpOptions): HttpHandler {
  const hosts = parseHostWhitelist(o.hostWhitelist ?? "*");
  if (o.gateway === false) return accessController(parseCors(o.cors), o.routes, hosts);
  const gateway = jsonGateway({ methods: o.methods, mapping: loadGatewayMapping() });
  return accessController(parseCors(o.cors), async (request) => (await gateway(request)) ?? o.routes(request), hosts);
}
