/**
 * The ResponseHeader every etcd response carries: cluster id, member id, the store revision the
 * response reflects, and the member's current raft term.
 */
import type { ResponseHeader } from "../../pb/member-types.js";
import type { V3Server } from "../v3_server.js";

export type { ResponseHeader } from "../../pb/member-types.js";

export function header(s: Pick<V3Server, "clusterId" | "memberId" | "raftTerm" | "currentRevision">, revision = s.currentRevision()): ResponseHeader {
  return { clusterId: s.clusterId, memberId: s.memberId, revision, raftTerm: s.raftTerm() };
}
