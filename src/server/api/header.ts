/**
 * The ResponseHeader every etcd response carries: cluster id, member id, the store revision the
 * response reflects, and the member's current raft term.
 */
import type { EtcdServer } from "../etcdserver.js";

export interface ResponseHeader {
  clusterId: number;
  memberId: number;
  revision: number;
  raftTerm: number;
}

export function header(s: EtcdServer, revision = s.kv.currentRevision()): ResponseHeader {
  return { clusterId: s.clusterId, memberId: s.memberId, revision, raftTerm: s.raftTerm() };
}
