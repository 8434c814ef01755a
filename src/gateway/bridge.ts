/**
 * What joins an HTTP request to a gRPC handler: the call's metadata and context, and the
 * messages carried between JSON and the member's codecs for one method.
 */

import type { CallContext, CallObserver, HttpRequest, Metadata, RegisteredMethod, Status } from "../grpc/index.js";
import { messageTooLarge } from "../grpc/framing.js";
import { RecordMetadata } from "../grpc/metadata.js";
import type { JsonValue } from "./go_json.js";
import type { JsonMapping } from "./json_mapping.js";

/**
 * The call metadata of a gateway request, as grpc-gateway builds it: `Authorization` as the
 * token (etcd reads "token", or "authorization" from the gateway), `Grpc-Metadata-<key>` headers
 * as <key>.
 */
export function gatewayMetadata(request: HttpRequest): Metadata {
  const entries: Record<string, string[]> = {};
  for (const [name, value] of Object.entries(request.headers)) {
    if (value === undefined) continue;
    const values = Array.isArray(value) ? value : [value];
    const key = name.toLowerCase();
    if (key === "authorization") {
      entries["authorization"] = values;
      entries["token"] = values;
    } else if (key.startsWith("grpc-metadata-")) {
      entries[key.slice("grpc-metadata-".length)] = values;
    }
  }
  return new RecordMetadata(entries);
}

/** A gateway call's context: no deadline; cancelled when the HTTP client goes away. */
export function gatewayContext(method: string, request: HttpRequest): CallContext {
  return {
    method,
    metadata: gatewayMetadata(request),
    get signal() {
      return request.signal;
    },
    deadline: undefined,
    peer: "gateway",
    get cancelled() {
      return request.signal.aborted;
    },
  };
}

/** Carries messages between JSON and the member's codecs for one method. */
/**
 * One gateway call's messages, and its events for the gRPC metrics: etcd's gateway is a gRPC
 * client of its own member, so its calls count in grpc_server_* as any other call does.
 */
export class MessageBridge {
  private startedAtMs = 0;
  private done = false;

  constructor(
    readonly registered: RegisteredMethod,
    private readonly mapping: JsonMapping,
    private readonly maxReceiveMessageBytes: number,
    private readonly observer: CallObserver | undefined,
  ) {}

  /** The call begins (once its request is known to parse, as the gateway's gRPC call would). */
  started(): void {
    if (this.observer === undefined) return;
    this.startedAtMs = performance.now();
    this.observer.started(this.registered.descriptor, undefined);
  }

  /** The call ended with `code` (idempotent: the first end counts). */
  handled(code: Status): void {
    if (this.done) return;
    this.done = true;
    this.observer?.handled(this.registered.descriptor, code, (performance.now() - this.startedAtMs) / 1000);
  }

  /** A request from its JSON form (already parsed), as the gRPC server would decode it. */
  request(json: Record<string, unknown>): unknown {
    const codec = this.registered.descriptor.request;
    const wire = codec.encode(json);
    if (wire.length > this.maxReceiveMessageBytes) throw messageTooLarge(wire.length, this.maxReceiveMessageBytes);
    this.observer?.received(this.registered.descriptor, wire.length);
    return codec.decode(wire);
  }

  /** A request type's JSON → message mapping. */
  requestFromBody(body: string): Record<string, unknown> {
    return this.mapping.parseBody(this.registered.descriptor.request.typeName, body);
  }

  requestFromJson(value: JsonValue): Record<string, unknown> {
    return this.mapping.fromJson(this.registered.descriptor.request.typeName, value);
  }

  /** A response as JSON text, after the trip through the wire codec. */
  response(message: unknown): string {
    const codec = this.registered.descriptor.response;
    const wire = codec.encode(message);
    this.observer?.sent(this.registered.descriptor, wire.length);
    return this.mapping.stringify(codec.typeName, codec.decode(wire) as object);
  }
}
