/**
 * Publication (etcd's EtcdServer.publish): a starting member proposes its name and client URLs
 * through raft until that entry applies; only then does it serve clients (ReadyNotify). Retries
 * every min(500 ms, 2 heartbeats) while there is no leader or the proposal fails.
 *
 * A member caught up by a snapshot may never apply its own entry: the image (the leader's backend
 * when sent) can already hold it, or raft's snapshot can cover its index. The publication then
 * counts as done once a snapshot installed after the proposal shows this member's attributes,
 * instead of after the request timeout (measured: ready 7 s after the snapshot was in).
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
  /** Snapshots installed so far (a counter). */
  snapshotsInstalled(): number;
  /** The applied membership shows this member with `name` and `clientUrls`. */
  attributesApplied(): boolean;
  logger: Logger;
}

/** How often a pending publication looks whether a snapshot brought its attributes. */
const SNAPSHOT_POLL_MS = 50;

/** Resolves once the member's attributes are applied (true), or when the member stopped first (false). */
export async function publish(o: PublishOptions): Promise<boolean> {
  while (!o.stopped()) {
    try {
      const installedBefore = o.snapshotsInstalled();
      const applied = o.proposeAndApply({ memberAttributes: { member_ID: o.memberId, name: o.name, clientUrls: [...o.clientUrls] } });
      const how = await Promise.race([applied.then(() => "applied" as const), inSnapshot(o, installedBefore, applied)]);
      // A proposal left behind by a snapshot still settles later (applied, or timed out): nobody waits for it.
      if (how === "snapshot") applied.catch(() => {});
      o.logger.info({ name: o.name, clientUrls: o.clientUrls, clusterId: formatId(o.clusterId), ...(how === "snapshot" ? { via: "snapshot" } : {}) }, "published local member to cluster through raft");
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

/** Resolves "snapshot" once a snapshot installed after the proposal shows the attributes; never while `applied` is pending otherwise. */
function inSnapshot(o: PublishOptions, installedBefore: number, applied: Promise<unknown>): Promise<"snapshot"> {
  return new Promise((resolve) => {
    let settled = false;
    applied.then(
      () => (settled = true),
      () => (settled = true),
    );
    const look = () => {
      if (settled || o.stopped()) return;
      if (o.snapshotsInstalled() > installedBefore && o.attributesApplied()) resolve("snapshot");
      else setTimeout(look, SNAPSHOT_POLL_MS).unref();
    };
    look();
  });
}
