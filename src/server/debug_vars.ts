/**
 * /debug/vars on the client port: etcd 3.4 serves Go's expvar there (cmdline, memstats,
 * file_descriptor_limit, raft.status). Same keys here; "memstats" holds what Node reports of its
 * memory (process.memoryUsage() and V8's heap statistics) instead of Go's runtime.MemStats, and
 * "raft.status" is etcd's raft.Status JSON (ids in hex, states by etcd's names).
 */
import { readFileSync } from "node:fs";
import { getHeapStatistics } from "node:v8";
import type { Status } from "../raft/rawnode.js";
import { StateType } from "../raft/types.js";
import { softLimit } from "./process_metrics.js";

const RAFT_STATE_NAMES: Record<StateType, string> = {
  [StateType.Follower]: "StateFollower",
  [StateType.Candidate]: "StateCandidate",
  [StateType.Leader]: "StateLeader",
  [StateType.PreCandidate]: "StatePreCandidate",
};

/** etcd formats ids with %x: no padding, "0" for none. */
function hex(id: bigint): string {
  return id.toString(16);
}

/** etcd's raft.Status MarshalJSON. */
export function raftStatusJson(s: Status): Record<string, unknown> {
  const progress: Record<string, unknown> = {};
  for (const [id, p] of s.progress ?? []) progress[hex(id)] = { match: p.match, next: p.next, state: p.state };
  return {
    id: hex(s.id),
    term: s.hardState.term,
    vote: hex(s.hardState.vote),
    commit: s.hardState.commit,
    lead: hex(s.softState.lead),
    raftState: RAFT_STATE_NAMES[s.softState.raftState],
    applied: s.applied,
    progress,
    leadtransferee: hex(s.leadTransferee),
  };
}

function fdLimit(): number {
  try {
    return softLimit(readFileSync("/proc/self/limits", "utf8"), "Max open files") ?? -1;
  } catch {
    return -1;
  }
}

export function debugVars(raftStatus: Status): string {
  return JSON.stringify({
    cmdline: process.argv,
    file_descriptor_limit: fdLimit(),
    memstats: { ...process.memoryUsage(), heap: getHeapStatistics() },
    "raft.status": raftStatusJson(raftStatus),
  });
}
