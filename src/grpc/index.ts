/**
 * The gRPC layer of the client port: a lean server on node:http2, handler types,
 * status codes, compiled proto codecs, and an adapter onto @grpc/grpc-js.
 */

export { GrpcServer, type GrpcServerOptions, type TlsOptions, DEFAULT_MAX_REQUEST_BYTES, GRPC_OVERHEAD_BYTES } from "./server.js";
// The grpc-js adapter (./grpc-js-adapter.js) is imported directly by the tests and benchmarks that
// use it: re-exporting it here would load @grpc/grpc-js (~14 MB RSS) into every server process.
export { GrpcError, Status, toGrpcError } from "./status.js";
export type {
  BidiCall,
  BidiHandler,
  CallContext,
  ClientStreamHandler,
  ServerReadable,
  ServerStreamHandler,
  ServerWritable,
  UnaryHandler,
} from "./handler.js";
export type { Metadata } from "./metadata.js";
export { verifiedClientCommonName, type ClientIdentity } from "./client_identity.js";
export type { EtcdServices, HandlersFor, MemberHandlers, MemberServices, ServiceHandlers } from "./services.js";
export type { CallObserver, RegisteredMethod } from "./call.js";
export { ProtoCodecs, type MessageCodec, type MethodDescriptor } from "../pb/codec.js";
export { loadEtcdCodecs, PROTO_DIR, ETCD_API_FILES } from "../pb/protos.js";
export type { BodyFlow, HttpHandler, HttpRequest, HttpResponse } from "./http.js";
export { HttpError } from "./http.js";
export type { KeepaliveOptions } from "./h2/keepalive.js";
