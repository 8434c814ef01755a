/**
 * etcd's JSON gateway on the client port: `POST /v3/<path>` with a JSON body calls the gRPC
 * method the path names (routes.ts), through the very handler a gRPC call runs (looked up in the
 * client port's GrpcServer), and answers as etcd 3.4's grpc-gateway does: the response message
 * as JSON (json_mapping.ts), a failed call as `{"error","message","code"}` with grpc-gateway's
 * HTTP status, streaming methods as newline-delimited `{"result":…}` chunks (streams.ts).
 *
 * Each message crosses the member codecs on its way (JSON → message → wire bytes → message, and
 * back): the handler sees exactly what a gRPC call would decode, the receive limit applies to
 * the same bytes, and the JSON shows exactly what the wire carries (an absent message stays
 * absent, an empty one is `{}`).
 */

import { type CallObserver, GrpcError, type HttpHandler, type RegisteredMethod, Status, toGrpcError, type UnaryHandler } from "../grpc/index.js";
import { messageTooLarge } from "../grpc/framing.js";
import { gatewayContext, MessageBridge } from "./bridge.js";
import { type JsonMapping, JsonMappingError } from "./json_mapping.js";
import { callErrorResponse, jsonResponse, METADATA_HEADERS, plain, requestErrorResponse } from "./responses.js";
import { gatewayRoute } from "./routes.js";
import { serveStream } from "./streams.js";
import { EncodedMessage } from "../grpc/encoded_message.js";

/** What the gateway calls: the client port's registered gRPC methods. */
export interface MethodTable {
  method(path: string): RegisteredMethod | GrpcError;
  readonly maxReceiveMessageBytes: number;
  /** The gRPC metrics of the port's calls; gateway calls count there too. */
  readonly observer: CallObserver | undefined;
}

export interface GatewayOptions {
  methods: MethodTable;
  mapping: JsonMapping;
}

/** JSON carries bytes as base64: a body may be this much larger than the message it encodes. */
const JSON_BODY_BYTES_PER_MESSAGE_BYTE = 4;

export function jsonGateway(o: GatewayOptions): HttpHandler {
  const bodyLimitBytes = o.methods.maxReceiveMessageBytes * JSON_BODY_BYTES_PER_MESSAGE_BYTE;
  return async (request) => {
    const path = request.url.split("?")[0]!;
    if (path === "/v3") return { status: 301, headers: { location: "/v3/", "content-length": "0" }, body: "" };
    if (!path.startsWith("/v3/")) return undefined;
    const grpcPath = gatewayRoute(path);
    if (grpcPath === undefined) return plain(404, "Not Found");
    if (request.method !== "POST") return plain(405, "Method Not Allowed");
    const registered = o.methods.method(grpcPath);
    const bridge = registered instanceof GrpcError ? undefined : new MessageBridge(registered, o.mapping, o.methods.maxReceiveMessageBytes, o.methods.observer);
    if (bridge !== undefined && bridge.registered.kind === "bidi") return serveStream(bridge, request, gatewayContext(grpcPath, request));

    let body: Buffer;
    try {
      body = await request.body(bodyLimitBytes);
    } catch {
      const e = messageTooLarge(bodyLimitBytes, o.methods.maxReceiveMessageBytes);
      return callErrorResponse(e);
    }
    if (bridge === undefined) return callErrorResponse(registered as GrpcError);
    let json: Record<string, unknown>;
    try {
      json = bridge.requestFromBody(body.toString("utf8"));
    } catch (e) {
      if (e instanceof JsonMappingError) return requestErrorResponse(Status.INVALID_ARGUMENT, e.message);
      throw e;
    }
    const ctx = gatewayContext(grpcPath, request);
    if (bridge.registered.kind === "serverStream") return serveStream(bridge, request, ctx, json);
    bridge.started();
    try {
      const message = bridge.request(json);
      const handler = bridge.registered.handler as UnaryHandler<unknown, unknown>;
      const answer = await handler(message, ctx);
      // An answer its handler encoded (a large Range) is read back into the objects the JSON mapping takes.
      const response = answer instanceof EncodedMessage ? bridge.registered.descriptor.response.decode(answer.bytes) : answer;
      const reply = jsonResponse(200, METADATA_HEADERS, bridge.response(response));
      bridge.handled(Status.OK);
      return reply;
    } catch (e) {
      const error = toGrpcError(e);
      bridge.handled(error.code);
      return callErrorResponse(error);
    }
  };
}

