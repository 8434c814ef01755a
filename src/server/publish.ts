/**
 * Publication (etcd's EtcdServer.publish): a starting member proposes its name and client URLs
 * through raft until that entry applies; only then does it serve clients (ReadyNotify). Retries
 * every min(500 ms, 2 heartbeats) while there is no leader or the proposal fails.
 */
import type { NodeId } from "../raft/types.js";
import type { Logger } from "./logger.js";
import { formatId } from "./member.js";
import type { ProposedRequest } from "./raft_request.js";

export interface PublishOptions {
  memberId: NodeId;
  clusterId: NodeId;
  name: string;
  clientUrls: readonly string[];
  heartbeatMs: number;
  /** Proposes and waits for the apply; throws the applied error. */
  proposeAndApply(req: ProposedRequest): Promise<unknown>;
  stopped(): boolean;
  logger: Logger;
}

/** Resolves once the member's attributes are applied (true), or when the member stopped first (false). */
export async function publish(o: PublishOptions): Promise<boolean> {
  while (!o.stopped()) {
    try {
      await o.proposeAndApply({ memberAttributes: { member_ID: o.memberId, name: o.name, clientUrls: [...o.clientUrls] } });
      o.logger.info({ name: o.name, clientUrls: o.clientUrls, clusterId: formatId(o.clusterId) }, "published local member to cluster through raft");
      return true;
    } catch (err) {
      // etcd's words and level: a publish that times out (its peers not started within the request
      // timeout) counts in etcd_server_proposals_failed_total, and this line says why.
      o.logger.warn({ "local-member-id": formatId(o.memberId), error: String(err) }, "failed to publish local member to cluster through raft");
      await new Promise((r) => setTimeout(r, Math.min(500, o.heartbeatMs * 2)));
    }
  }
  return false;
}
