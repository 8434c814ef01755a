/**
 * etcdserverpb.Cluster. MemberList reports the membership as applied on this member. Runtime
 * membership changes (add/remove/update/promote) belong to the cluster-operations work and answer
 * UNIMPLEMENTED until then, rather than pretending.
 */
import { GrpcError, Status, type MemberHandlers } from "../../grpc/index.js";
import type { MemberInit } from "../../pb/member-types.js";
import type { Member } from "../member.js";
import type { V3Server } from "../v3_server.js";
import { guarded, requireLeaderIfAsked } from "./guard.js";
import { header } from "./header.js";

export function memberPb(m: Member): MemberInit {
  return { ID: m.id, name: m.name, peerURLs: [...m.peerUrls], clientURLs: [...m.clientUrls], isLearner: m.isLearner };
}

function notYet(what: string) {
  return () => {
    throw new GrpcError(Status.UNIMPLEMENTED, `etcetera: ${what} is not supported yet`);
  };
}

export function clusterService(s: V3Server): MemberHandlers<"etcdserverpb.Cluster"> {
  return {
    MemberList: (req, ctx) =>
      guarded(async () => {
        requireLeaderIfAsked(s, ctx);
        const members = await s.memberList(req.linearizable);
        // etcd's cluster server header carries no revision.
        return { header: { ...header(s), revision: 0 }, members: members.map(memberPb) };
      }),
    MemberAdd: notYet("MemberAdd"),
    MemberRemove: notYet("MemberRemove"),
    MemberUpdate: notYet("MemberUpdate"),
    MemberPromote: notYet("MemberPromote"),
  };
}
