/**
 * The services of the client port, registered on a GrpcServer: the one each client URL serves in
 * a single-process member, or the core's dispatcher of the calls its front ends forward
 * (front_end/). Both register the same services, so the same calls succeed and the same unknown
 * ones get the same UNIMPLEMENTED text.
 */
import { type GrpcServer, type GrpcServerOptions, GRPC_OVERHEAD_BYTES, type MemberServices } from "../grpc/index.js";
import { authService } from "./api/auth.js";
import { clusterService } from "./api/cluster.js";
import { electionService } from "./api/election.js";
import { healthService } from "./api/health.js";
import { kvService } from "./api/kv.js";
import { learnerGated } from "./api/learner_gate.js";
import { leaseService } from "./api/lease.js";
import { lockService } from "./api/lock.js";
import { maintenanceService } from "./api/maintenance.js";
import type { Quota } from "./api/quota.js";
import { watchService } from "./api/watch.js";
import type { ServerConfig } from "./config.js";
import type { EtcdServer } from "./etcdserver.js";

/** The client port's services, by full name (a front end registers its forwarding handlers under these). */
export const CLIENT_SERVICES = [
  "etcdserverpb.KV",
  "etcdserverpb.Lease",
  "etcdserverpb.Cluster",
  "etcdserverpb.Maintenance",
  "etcdserverpb.Watch",
  "etcdserverpb.Auth",
  "v3lockpb.Lock",
  "v3electionpb.Election",
  "grpc.health.v1.Health",
] as const;

export function addClientServices(g: GrpcServer<MemberServices>, server: EtcdServer, quota: Quota): void {
  const learner = () => server.isLearner();
  g.addService("etcdserverpb.KV", learnerGated(learner, "etcdserverpb.KV", kvService(server.v3, quota)));
  g.addService("etcdserverpb.Lease", learnerGated(learner, "etcdserverpb.Lease", leaseService(server.v3, quota)));
  g.addService("etcdserverpb.Cluster", learnerGated(learner, "etcdserverpb.Cluster", clusterService(server.v3)));
  g.addService("etcdserverpb.Maintenance", learnerGated(learner, "etcdserverpb.Maintenance", maintenanceService(server.v3)));
  g.addService("etcdserverpb.Watch", learnerGated(learner, "etcdserverpb.Watch", watchService(server.v3)));
  g.addService("etcdserverpb.Auth", learnerGated(learner, "etcdserverpb.Auth", authService(server.v3)));
  g.addService("v3lockpb.Lock", learnerGated(learner, "v3lockpb.Lock", lockService(server.v3)));
  g.addService("v3electionpb.Election", learnerGated(learner, "v3electionpb.Election", electionService(server.v3)));
  g.addService("grpc.health.v1.Health", healthService());
}

/** The client port's limits from the flags, the same wherever the port is served (this process or a front end). */
export function clientPortLimits(config: ServerConfig): Pick<GrpcServerOptions, "maxReceiveMessageBytes" | "maxConcurrentStreams" | "keepalive"> {
  return {
    maxReceiveMessageBytes: config.maxRequestBytes + GRPC_OVERHEAD_BYTES,
    maxConcurrentStreams: config.maxConcurrentStreams,
    // --grpc-keepalive-*: etcd's server keepalive parameters and enforcement policy.
    // A 0 timeout is grpc-go's default (20 s), not an immediate close.
    keepalive: { intervalMs: config.grpcKeepaliveIntervalMs, timeoutMs: config.grpcKeepaliveTimeoutMs || 20_000, minTimeMs: config.grpcKeepaliveMinTimeMs },
  };
}
