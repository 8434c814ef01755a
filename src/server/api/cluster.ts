/**
 * etcdserverpb.Cluster (etcd's v3rpc ClusterServer). MemberList reports the membership as
 * applied on this member; the changes (add, remove, update, promote) are the member's
 * (src/server/reconfigure.ts), answered with the membership after them.
 */
import type { MemberHandlers } from "../../grpc/index.js";
import type { MemberInit } from "../../pb/member-types.js";
import type { Member } from "../member.js";
import { checkPeerUrls } from "../reconfigure.js";
import type { V3Server } from "../v3_server.js";
import { requireAdmin } from "./authorize.js";
import { guarded, requireLeaderIfAsked } from "./guard.js";
import { type ResponseHeader, header } from "./header.js";

export function memberPb(m: Member): MemberInit {
  return { ID: m.id, name: m.name, peerURLs: [...m.peerUrls], clientURLs: [...m.clientUrls], isLearner: m.isLearner };
}

/**
 * etcd's cluster server fills no revision in its header (ClusterServer.header(): cluster id, member
 * id, raft term), on MemberList as on MemberAdd, MemberRemove, MemberUpdate and MemberPromote.
 */
function clusterHeader(s: V3Server): ResponseHeader {
  return header(s, 0);
}

export function clusterService(s: V3Server): MemberHandlers<"etcdserverpb.Cluster"> {
  return {
    MemberList: (req, ctx) =>
      guarded(async () => {
        requireLeaderIfAsked(s, ctx);
        const members = await s.memberList(req.linearizable);
        return { header: clusterHeader(s), members: members.map(memberPb) };
      }),
    MemberAdd: (req, ctx) =>
      guarded(async () => {
        await requireAdmin(s, ctx);
        checkPeerUrls(req.peerURLs);
        const { member, members } = await s.memberAdd(req.peerURLs, req.isLearner);
        return {
          header: clusterHeader(s),
          member: { ID: member.id, peerURLs: [...member.peerUrls], isLearner: member.isLearner },
          members: members.map(memberPb),
        };
      }),
    MemberRemove: (req, ctx) =>
      guarded(async () => {
        await requireAdmin(s, ctx);
        const members = await s.memberRemove(req.ID);
        return { header: clusterHeader(s), members: members.map(memberPb) };
      }),
    MemberUpdate: (req, ctx) =>
      guarded(async () => {
        await requireAdmin(s, ctx);
        const members = await s.memberUpdate(req.ID, req.peerURLs);
        return { header: clusterHeader(s), members: members.map(memberPb) };
      }),
    MemberPromote: (req, ctx) =>
      guarded(async () => {
        await requireAdmin(s, ctx);
        const members = await s.memberPromote(req.ID);
        return { header: clusterHeader(s), members: members.map(memberPb) };
      }),
  };
}
