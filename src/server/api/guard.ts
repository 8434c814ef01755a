/**
 * Cross-cutting request checks shared by the services: the `hasleader` metadata (clients that set
 * it want "no leader" rather than a stale answer), and store errors turned into gRPC statuses.
 */
import type { CallContext } from "../../grpc/index.js";
import { NONE } from "../../raft/types.js";
import { Errors, toEtcdError } from "../errors.js";
import type { V3Server } from "../v3_server.js";

/** etcd's metadata key for "require leader" (rpctypes.MetadataRequireLeaderKey). */
export const REQUIRE_LEADER_KEY = "hasleader";

export function requireLeaderIfAsked(s: Pick<V3Server, "leader">, ctx: CallContext): void {
  if (ctx.metadata.get(REQUIRE_LEADER_KEY) === "true" && s.leader() === NONE) throw Errors.noLeader();
}

/** Runs a handler body, mapping any store error to etcd's gRPC status. */
export async function guarded<T>(f: () => Promise<T> | T): Promise<T> {
  try {
    return await f();
  } catch (e) {
    throw toEtcdError(e);
  }
}
