/**
 * Runtime membership changes (etcd's EtcdServer AddMember / RemoveMember / UpdateMember /
 * PromoteMember and their may* checks): each is checked here against the cluster's health under
 * --strict-reconfig-check, proposed as a raft conf change carrying the member record, validated
 * again where it is applied (membership.ts, on every member), and answered with the membership
 * after it, once applied on this member.
 */
import { performance } from "node:perf_hooks";
import { ConfChangeTransition, ConfChangeType, type ConfChangeV2, type NodeId, NONE } from "../raft/types.js";
import type { ProgressStatus } from "../raft/index.js";
import type { ApplyOutcome } from "./apply.js";
import { encodeConfChangeContext } from "./conf_change_context.js";
import { Errors } from "./errors.js";
import type { Logger } from "./logger.js";
import { computeMemberId, formatId, type Member } from "./member.js";
import type { Membership } from "./membership.js";
import { peerUrlToAddress } from "./transport/url.js";

/** etcd's HealthInterval: a peer counts as connected only if connected at least this long. */
export const HEALTH_INTERVAL_MS = 5000;
/** etcd's readyPercent: a learner is in sync once its match index is 90% of the leader's. */
const LEARNER_READY_PERCENT = 0.9;

export interface ReconfigureOptions {
  memberId: NodeId;
  membership: Membership;
  /** --strict-reconfig-check. */
  strictReconfigCheck: boolean;
  /** The leader's replication progress of each member (undefined when this member is not leader). */
  progress(): Map<NodeId, ProgressStatus> | undefined;
  /** Since when the stream to a peer is active (performance.now() ms; undefined: not active). */
  activeSince(id: NodeId): number | undefined;
  proposeConfChange(make: (requestId: number) => ConfChangeV2): Promise<ApplyOutcome>;
  /** A promote asked of a follower goes to the leader (etcd forwards it over peer HTTP). */
  forwardPromote(id: NodeId): Promise<Member[]>;
  /** A promote this member (the leader) carried out succeeded (etcd_server_learner_promote_successes). */
  onPromoted?(): void;
  logger: Logger;
  /** Wall-clock seconds (the member id of an added member hashes the time, as etcd's). */
  nowSeconds?(): number;
}

export class Reconfigure {
  constructor(private readonly o: ReconfigureOptions) {}

  /**
   * etcd's AddMember: returns the new member and the membership after it. Its id hashes its peer
   * URLs and the time, with no cluster name (etcd's v3rpc calls NewMember("", urls, "", &now)).
   */
  async addMember(peerUrls: readonly string[], isLearner: boolean): Promise<{ member: Member; members: Member[] }> {
    const now = this.o.nowSeconds?.() ?? Math.floor(Date.now() / 1000);
    const member: Member = { id: computeMemberId(peerUrls, "", now), name: "", peerUrls: [...peerUrls], clientUrls: [], isLearner };
    this.mayAddMember(member);
    const type = isLearner ? ConfChangeType.AddLearnerNode : ConfChangeType.AddNode;
    const members = await this.configure(type, member, false);
    return { member, members };
  }

  /** etcd's RemoveMember. */
  async removeMember(id: NodeId): Promise<Member[]> {
    requireMemberId(id);
    this.mayRemoveMember(id);
    return this.configure(ConfChangeType.RemoveNode, this.o.membership.get(id) ?? placeholder(id), false);
  }

  /** etcd's UpdateMember (peer URLs only). */
  async updateMember(id: NodeId, peerUrls: readonly string[]): Promise<Member[]> {
    requireMemberId(id);
    // etcd checks neither here (an unknown member is refused where the change applies); its peer
    // URLs are checked too, for a member whose peers cannot dial it is a member lost.
    const existing = this.o.membership.get(id);
    if (existing === undefined) throw Errors.memberNotFound();
    checkPeerUrls(peerUrls);
    return this.configure(ConfChangeType.UpdateNode, { ...existing, peerUrls: [...peerUrls] }, false);
  }

  /** etcd's PromoteMember: only the leader knows whether the learner is in sync; a follower forwards. */
  async promoteMember(id: NodeId): Promise<Member[]> {
    requireMemberId(id);
    const progress = this.o.progress();
    if (progress === undefined) return this.o.forwardPromote(id);
    this.mayPromoteMember(id, progress);
    const learner = this.o.membership.get(id) ?? placeholder(id);
    const members = await this.configure(ConfChangeType.AddNode, { ...learner, isLearner: false }, true);
    this.o.onPromoted?.();
    return members;
  }

  private async configure(type: ConfChangeType, member: Member, isPromote: boolean): Promise<Member[]> {
    const outcome = await this.o.proposeConfChange((requestId) => ({
      transition: ConfChangeTransition.Auto,
      changes: [{ type, nodeId: member.id }],
      context: encodeConfChangeContext({ requestId, member, isPromote }),
    }));
    if (outcome.error) throw outcome.error;
    return outcome.response as Member[];
  }

  private mayAddMember(m: Member): void {
    if (!this.o.strictReconfigCheck) return;
    const ms = this.o.membership;
    if (!m.isLearner && !ms.isReadyToAddVotingMember()) {
      this.o.logger.warn({ memberId: formatId(m.id) }, "rejecting member add request; not enough healthy members");
      throw Errors.memberNotEnoughStarted();
    }
    if (!this.connectedToAllSince(performance.now() - HEALTH_INTERVAL_MS, ms.votingMembers())) {
      this.o.logger.warn({ memberId: formatId(m.id) }, "rejecting member add request; local member has not been connected to all peers, reconfigure breaks active quorum");
      throw Errors.unhealthy();
    }
  }

  private mayRemoveMember(id: NodeId): void {
    if (!this.o.strictReconfigCheck) return;
    const ms = this.o.membership;
    // No quorum to protect when removing a learner.
    if (ms.get(id)?.isLearner === true) return;
    if (!ms.isReadyToRemoveVotingMember(id)) {
      this.o.logger.warn({ memberId: formatId(id) }, "rejecting member remove request; not enough healthy members");
      throw Errors.memberNotEnoughStarted();
    }
    // A member that is down is safe to remove: it is not part of the active quorum.
    if (id !== this.o.memberId && this.o.activeSince(id) === undefined) return;
    const voters = ms.votingMembers();
    const active = this.connectedSince(performance.now() - HEALTH_INTERVAL_MS, voters);
    if (active - 1 < 1 + Math.floor((voters.length - 1) / 2)) {
      this.o.logger.warn({ memberId: formatId(id), active, voters: voters.length }, "rejecting member remove request; local member has not been connected to all peers, reconfigure breaks active quorum");
      throw Errors.unhealthy();
    }
  }

  private mayPromoteMember(id: NodeId, progress: Map<NodeId, ProgressStatus>): void {
    const learner = progress.get(id);
    const leader = progress.get(this.o.memberId);
    if (learner !== undefined && leader !== undefined && learner.match < leader.match * LEARNER_READY_PERCENT) {
      throw Errors.learnerNotReady();
    }
    if (this.o.strictReconfigCheck && !this.o.membership.isReadyToPromoteMember()) throw Errors.memberNotEnoughStarted();
  }

  /** etcd's numConnectedSince: members (this one included) connected to this member since `sinceMs`. */
  private connectedSince(sinceMs: number, members: readonly Member[]): number {
    let n = 0;
    for (const m of members) {
      if (m.id === this.o.memberId) {
        n++;
        continue;
      }
      const t = this.o.activeSince(m.id);
      if (t !== undefined && t <= sinceMs) n++;
    }
    return n;
  }

  /** etcd's isConnectedFullySince. */
  private connectedToAllSince(sinceMs: number, members: readonly Member[]): boolean {
    return this.connectedSince(sinceMs, members) === members.length;
  }
}

/** etcd's types.NewURLs check ("given member URLs are invalid"); peers speak plain http here. */
export function checkPeerUrls(urls: readonly string[]): void {
  if (urls.length === 0) throw Errors.memberBadURLs();
  for (const u of urls) {
    try {
      peerUrlToAddress(u);
    } catch {
      throw Errors.memberBadURLs();
    }
  }
}

/** Id 0 names no member: etcd's answer for an unknown one. */
function requireMemberId(id: NodeId): void {
  if (id === NONE) throw Errors.memberNotFound();
}

/** The record of a member the membership does not know (the change is refused where applied). */
function placeholder(id: NodeId): Member {
  return { id, name: "", peerUrls: [], clientUrls: [], isLearner: false };
}
