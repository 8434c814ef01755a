/**
 * Every RPC of the services the fuzzers hit, read from the protos in proto/ with protobufjs
 * (reflection only): the HTTP/2 path, whether each side streams, and the request type (to build
 * valid messages and to corrupt them field by field).
 */
import { join } from "node:path";
import protobuf from "protobufjs";
import { ROOT } from "../e2e/harness.js";

/** The services of issue 7's fuzz list (Auth is left out: enabling auth would change every later answer). */
export const FUZZED_SERVICES = [
  "etcdserverpb.KV",
  "etcdserverpb.Watch",
  "etcdserverpb.Lease",
  "etcdserverpb.Cluster",
  "etcdserverpb.Maintenance",
  "v3lockpb.Lock",
  "v3electionpb.Election",
] as const;

export interface RpcMethod {
  /** "etcdserverpb.KV" */
  readonly service: string;
  /** "Range" */
  readonly name: string;
  /** "/etcdserverpb.KV/Range" */
  readonly path: string;
  readonly requestStream: boolean;
  readonly responseStream: boolean;
  readonly requestType: protobuf.Type;
}

let root: protobuf.Root | undefined;

/** The proto root with etcd's API loaded (once). */
export function protoRoot(): protobuf.Root {
  if (root === undefined) {
    const r = new protobuf.Root();
    const dir = join(ROOT, "proto");
    r.resolvePath = (_origin, target) => join(dir, target);
    r.loadSync(["etcdserverpb/rpc.proto", "v3lockpb/v3lock.proto", "v3electionpb/v3election.proto"], { keepCase: true });
    r.resolveAll();
    root = r;
  }
  return root;
}

export function messageType(fullName: string): protobuf.Type {
  return protoRoot().lookupType(fullName);
}

/** All methods of `services`, in proto order. */
export function rpcMethods(services: readonly string[] = FUZZED_SERVICES): RpcMethod[] {
  const out: RpcMethod[] = [];
  for (const serviceName of services) {
    const service = protoRoot().lookupService(serviceName);
    for (const m of service.methodsArray) {
      m.resolve();
      out.push({
        service: serviceName,
        name: m.name,
        path: `/${serviceName}/${m.name}`,
        requestStream: m.requestStream === true,
        responseStream: m.responseStream === true,
        requestType: m.resolvedRequestType!,
      });
    }
  }
  return out;
}
