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

let etcdCodecs: ProtoCodecs | undefined;

/** The etcd API codecs, compiled once per process. */
export function loadEtcdCodecs(): ProtoCodecs {
  etcdCodecs ??= ProtoCodecs.load({ protoDir: PROTO_DIR, files: ETCD_API_FILES });
  return etcdCodecs;
}
