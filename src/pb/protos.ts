/**
 * Where etcd's v3 API protos live and which files make it up.
 */

import { fileURLToPath } from "node:url";
import { ProtoCodecs } from "./codec.js";

/** The repository's proto/ directory (same relative place from src/grpc and dist/grpc). */
export const PROTO_DIR = fileURLToPath(new URL("../../proto/", import.meta.url));

/** The etcd v3 client API: KV, Watch, Lease, Cluster, Maintenance, Auth, Lock, Election. */
export const ETCD_API_FILES: readonly string[] = [
  "etcdserverpb/rpc.proto",
  "v3lockpb/v3lock.proto",
  "v3electionpb/v3election.proto",
];

/** What the member decodes: the client API, the request one Raft entry carries, and gRPC's health service (etcd registers it). */
export const MEMBER_FILES: readonly string[] = [...ETCD_API_FILES, "etcdserverpb/raft_internal.proto", "grpc/health/v1/health.proto"];

let etcdCodecs: ProtoCodecs | undefined;
let memberCodecs: ProtoCodecs | undefined;

/** The etcd API codecs, compiled once per process. */
export function loadEtcdCodecs(): ProtoCodecs {
  etcdCodecs ??= ProtoCodecs.load({ protoDir: PROTO_DIR, files: ETCD_API_FILES });
  return etcdCodecs;
}

/**
 * The member's codecs, compiled once per process: camelCase property names (`range_end` →
 * `rangeEnd`, the names of member-types.ts), so decoded requests pass straight into the stores.
 */
export function loadMemberCodecs(): ProtoCodecs {
  memberCodecs ??= ProtoCodecs.load({ protoDir: PROTO_DIR, files: MEMBER_FILES, keepCase: false });
  return memberCodecs;
}
