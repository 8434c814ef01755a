/**
 * --force-new-cluster (etcd's restartAsStandaloneNode): a member restarts from its own WAL as the
 * only member of its cluster. Every other member is removed by conf-change entries appended to
 * the log and marked committed with everything before them, so that the member applies them
 * like any other entry (membership, raft's configuration and the transport's peers all follow)
 * and then, the only voter, elects itself.
 *
 * One difference from etcd: etcd first discards the entries past the commit index this member
 * knows; here they are kept and committed too. Those entries came from a legitimate leader, and
 * among them may be writes the leader already acknowledged (committed on a majority that this
 * member was part of, before it heard the new commit index); discarding them could lose an
 * acknowledged write, keeping them loses none.
 */
import { confChangeFromEntry, encodeConfChangeV1, encodeConfChangeV2 } from "../raft/index.js";
import { compareNodeIds, ConfChangeTransition, ConfChangeType, EntryType, type Entry, type HardState, type NodeId } from "../raft/types.js";
import { encodeConfChangeContext } from "./conf_change_context.js";
import type { Logger } from "./logger.js";
import { formatId, type Member } from "./member.js";

export interface ForceNewClusterOptions {
  storage: {
    memory: {
      initialState(): { hardState: HardState; confState: { voters: NodeId[]; learners: NodeId[]; votersOutgoing: NodeId[]; learnersNext: NodeId[] } };
      firstIndex(): number;
      lastIndex(): number;
      entries(lo: number, hi: number, maxSizeBytes: number): Entry[];
    };
    persist(hardState: HardState | undefined, entries: Entry[], snapshot: undefined): Promise<void>;
  };
  memberId: NodeId;
  /** This member's record, for the AddNode context when the log does not list it. */
  self: Member | undefined;
  logger: Logger;
}

/** Entries read per step when replaying the log for its configuration. */
const READ_BATCH_BYTES = 64 * 1024 * 1024;

/** Appends the conf changes that leave this member alone and commits the whole log. */
export async function forceNewCluster(o: ForceNewClusterOptions): Promise<{ removed: NodeId[] }> {
  const mem = o.storage.memory;
  const { hardState, confState } = mem.initialState();
  const last = mem.lastIndex();
  // etcd's getIDs: the snapshot's configuration, then every conf change in the log after it.
  const ids = new Set<NodeId>([...confState.voters, ...confState.learners, ...confState.votersOutgoing, ...confState.learnersNext]);
  let joint = confState.votersOutgoing.length > 0;
  for (let lo = mem.firstIndex(); lo <= last; ) {
    const batch = mem.entries(lo, last + 1, READ_BATCH_BYTES);
    if (batch.length === 0) throw new Error(`force-new-cluster: no entries readable from index ${lo} (last ${last})`);
    for (const e of batch) {
      if (e.type === EntryType.Normal) continue;
      const cc = confChangeFromEntry(e);
      if (cc.changes.length === 0) joint = false; // leaving a joint configuration
      else if (cc.changes.length > 1 || cc.transition !== ConfChangeTransition.Auto) joint = true;
      for (const ch of cc.changes) {
        if (ch.type === ConfChangeType.RemoveNode) ids.delete(ch.nodeId);
        else ids.add(ch.nodeId);
      }
    }
    lo = batch[batch.length - 1]!.index + 1;
  }

  const term = hardState.term;
  let index = last;
  const ents: Entry[] = [];
  // A single-change entry is refused in a joint configuration: leave it first.
  if (joint) ents.push({ term, index: ++index, type: EntryType.ConfChangeV2, data: encodeConfChangeV2({ transition: ConfChangeTransition.Auto, changes: [], context: new Uint8Array(0) }) });
  const removed = [...ids].filter((id) => id !== o.memberId).sort(compareNodeIds);
  for (const id of removed) {
    ents.push({ term, index: ++index, type: EntryType.ConfChange, data: encodeConfChangeV1({ id: 0n, type: ConfChangeType.RemoveNode, nodeId: id, context: new Uint8Array(0) }) });
  }
  if (!ids.has(o.memberId)) {
    if (o.self === undefined) throw new Error(`force-new-cluster: member ${formatId(o.memberId)} is not in its own log and has no member record`);
    const context = encodeConfChangeContext({ requestId: 0, member: o.self, isPromote: false });
    ents.push({ term, index: ++index, type: EntryType.ConfChange, data: encodeConfChangeV1({ id: 0n, type: ConfChangeType.AddNode, nodeId: o.memberId, context }) });
  }
  o.logger.info(
    {
      "local-member-id": formatId(o.memberId),
      "commit-index": hardState.commit,
      "last-index": last,
      "kept-uncommitted-entries": last - hardState.commit,
      "removed-member-ids": removed.map(formatId),
    },
    "forcing restart member",
  );
  // The new tail and the commit covering the whole log land in one WAL write.
  await o.storage.persist({ ...hardState, commit: index }, ents, undefined);
  if (mem.lastIndex() !== index) throw new Error(`force-new-cluster: last index ${mem.lastIndex()} after appending, expected ${index}`);
  return { removed };
}
