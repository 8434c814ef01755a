/**
 * Who this member is when it has no WAL yet (etcd's bootstrap in etcdserver/server.go NewServer):
 *   --initial-cluster-state=new      ids computed from --initial-cluster, refused when the peers
 *                                    say this member already started once ("has already been
 *                                    bootstrapped": its data dir was lost, it must be re-added);
 *   --initial-cluster-state=existing the membership fetched from the peers (GET /members there,
 *                                    a "members" connection here), checked against
 *                                    --initial-cluster peer URL by peer URL, ids taken from it.
 * A member with a WAL takes its ids from the WAL's metadata instead.
 */
import type { NodeId } from "../raft/types.js";
import type { ServerConfig } from "./config.js";
import type { Logger } from "./logger.js";
import { formatId, initialClusterInfo, type Member } from "./member.js";
import { fetchMembers } from "./transport/members_fetch.js";
import { peerTransportTls } from "./tls/peer_tls.js";
import type { MembersInfo } from "./transport/protocol.js";

export interface Identity {
  memberId: NodeId;
  clusterId: NodeId;
  /** Members whose records bootstrap conf changes without a context fall back to. */
  members: readonly Member[];
}

type JoinConfig = Pick<ServerConfig, "name" | "initialCluster" | "initialClusterToken" | "advertiseClientUrls" | "electionMs"> &
  Partial<Pick<ServerConfig, "tls" | "dataDir" | "listenPeerUrls">>;

/** How long one peer may take to answer (etcd's per-URL timeout is the request timeout). */
const FETCH_TIMEOUT_MS = 2000;

/** The peer URLs of every --initial-cluster member but this one (etcd's getRemotePeerURLs). */
function remotePeerUrls(config: JoinConfig): string[] {
  return config.initialCluster.filter((m) => m.name !== config.name).flatMap((m) => m.peerUrls);
}

/** etcd's GetClusterFromRemotePeers: the first peer that answers. */
async function clusterFromRemotePeers(urls: readonly string[], logger: Logger, config: JoinConfig): Promise<MembersInfo | undefined> {
  // https:// peers are asked with this member's peer TLS (src/server/tls/peer_tls.ts).
  const tls = config.tls === undefined ? undefined : peerTransportTls(config.tls.peer, config.dataDir ?? "", config.listenPeerUrls ?? []);
  for (const url of urls) {
    try {
      const info = await fetchMembers(url, FETCH_TIMEOUT_MS, tls);
      if (info.members.length > 0) return info;
    } catch (err) {
      logger.warn({ "remote-peer-url": url, error: String(err) }, "failed to get cluster response");
    }
  }
  return undefined;
}

function membersOf(info: MembersInfo): Member[] {
  return info.members.map((m) => ({ id: m.id, name: m.name, peerUrls: m.peerURLs, clientUrls: m.clientURLs, isLearner: m.isLearner }));
}

function samePeerUrls(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && [...a].sort().join(",") === [...b].sort().join(",");
}

/** --initial-cluster-state=existing without a WAL: join the running cluster the peers describe. */
export async function joinExistingCluster(config: JoinConfig, logger: Logger): Promise<Identity> {
  const info = await clusterFromRemotePeers(remotePeerUrls(config), logger, config);
  if (info === undefined) throw new Error("cannot fetch cluster info from peer urls: could not retrieve cluster information from the given URLs");
  const existing = membersOf(info);
  // etcd's ValidateClusterAndAssignIDs: the same members, matched by peer URLs.
  if (existing.length !== config.initialCluster.length) {
    throw new Error(`error validating peerURLs ${describe(info)}: member count is unequal`);
  }
  let memberId: NodeId | undefined;
  for (const e of existing) {
    const local = config.initialCluster.find((m) => samePeerUrls(m.peerUrls, e.peerUrls));
    if (local === undefined) {
      throw new Error(`error validating peerURLs ${describe(info)}: PeerURLs: no match found for existing member (${formatId(e.id)}, ${e.peerUrls.join(",")})`);
    }
    if (local.name === config.name) memberId = e.id;
  }
  if (memberId === undefined) throw new Error(`couldn't find local name "${config.name}" in the initial cluster configuration`);
  logger.info({ memberId: formatId(memberId), clusterId: formatId(info.clusterId), members: existing.map((m) => formatId(m.id)) }, "joining an existing cluster");
  return { memberId, clusterId: info.clusterId, members: existing };
}

/** --initial-cluster-state=new without a WAL: a brand-new member, unless the peers know it started already. */
export async function bootstrapNewMember(config: JoinConfig, logger: Logger): Promise<Identity> {
  const info = initialClusterInfo(config);
  const urls = remotePeerUrls(config);
  if (urls.length > 0) {
    const remote = await clusterFromRemotePeers(urls, logger, config);
    // etcd's isMemberBootstrapped: the running cluster has this member, with client URLs published.
    const me = remote?.members.find((m) => m.id === info.local.id);
    if (remote?.clusterId === info.clusterId && me !== undefined && me.clientURLs.length > 0) {
      throw new Error(`member ${formatId(info.local.id)} has already been bootstrapped`);
    }
  }
  return { memberId: info.local.id, clusterId: info.clusterId, members: info.members };
}

function describe(info: MembersInfo): string {
  return info.members.map((m) => `${m.name}=${m.peerURLs.join(",")}`).join(",");
}
