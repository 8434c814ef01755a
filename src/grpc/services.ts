/**
 * The handler signatures of the etcd services, from the method tables generated
 * into src/pb: a service implementation typed `Partial<KVHandlers>` is checked
 * against the protos, and GrpcServer.addService checks the same. etcd-types.ts
 * has the proto field names (the default codecs), member-types.ts the camelCase
 * ones of the member's codecs (`MemberHandlers<"etcdserverpb.KV">`).
 */

import type * as pb from "../pb/etcd-types.js";
import type * as member from "../pb/member-types.js";
import type { BidiHandler, ClientStreamHandler, ServerStreamHandler, UnaryHandler } from "./handler.js";

/** One generated method entry: decoded request, response as given to the encoder, which sides stream. */
export interface MethodShape {
  request: unknown;
  response: unknown;
  requestStream: boolean;
  responseStream: boolean;
}

/** The handler kind a method is called as, decided by which sides stream (as the server does at run time). */
export type HandlerOf<M extends MethodShape> = M["requestStream"] extends true
  ? M["responseStream"] extends true
    ? BidiHandler<M["request"], M["response"]>
    : ClientStreamHandler<M["request"], M["response"]>
  : M["responseStream"] extends true
    ? ServerStreamHandler<M["request"], M["response"]>
    : UnaryHandler<M["request"], M["response"]>;

/** Handlers of every method of a generated method table. */
export type ServiceHandlers<S> = { [K in keyof S]: S[K] extends MethodShape ? HandlerOf<S[K]> : never };

/**
 * What addService takes for service `N` of a generated Services table: handlers of some of its
 * methods. A service no table knows (a test's own proto) takes any object, checked at run time.
 */
export type HandlersFor<S, N extends string> = N extends keyof S ? Partial<ServiceHandlers<S[N]>> : object;

/** Handlers of a service as the member's codecs decode it (camelCase names), by full name. */
export type MemberHandlers<N extends keyof member.Services> = ServiceHandlers<member.Services[N]>;

/** The member's Services table (for `new GrpcServer<MemberServices>`). */
export type MemberServices = member.Services;
/** The default codecs' Services table (proto field names). */
export type EtcdServices = pb.Services;

/** Handlers of each etcd service, by the service's full name ("etcdserverpb.KV"). */
export type EtcdServiceHandlers = { [N in keyof pb.Services]: ServiceHandlers<pb.Services[N]> };

export type KVHandlers = EtcdServiceHandlers["etcdserverpb.KV"];
export type WatchHandlers = EtcdServiceHandlers["etcdserverpb.Watch"];
export type LeaseHandlers = EtcdServiceHandlers["etcdserverpb.Lease"];
export type ClusterHandlers = EtcdServiceHandlers["etcdserverpb.Cluster"];
export type MaintenanceHandlers = EtcdServiceHandlers["etcdserverpb.Maintenance"];
export type AuthHandlers = EtcdServiceHandlers["etcdserverpb.Auth"];
export type LockHandlers = EtcdServiceHandlers["v3lockpb.Lock"];
export type ElectionHandlers = EtcdServiceHandlers["v3electionpb.Election"];
