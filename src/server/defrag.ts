/**
 * Maintenance.Defragment on this member: SQLite's VACUUM, which holds the member's one thread
 * for as long as it copies the database (seconds on a large backend). A follower is merely
 * unreachable meanwhile, as an etcd member whose defrag holds its backend. A leader, though,
 * would send no heartbeats: the followers' election timeouts would fire and the whole cluster
 * would take no writes until a new leader is elected (etcd's leader keeps heartbeating from its
 * raft goroutines while its backend is held; ours cannot). So the leader of a cluster with other
 * voters first hands leadership to the most up-to-date of them (etcdctl move-leader's transfer)
 * and vacuums once it took; the others keep committing while it vacuums.
 */
import type { NodeId } from "../raft/types.js";
import type { Status } from "../raft/rawnode.js";
import type { Logger } from "./logger.js";
import { formatId } from "./member.js";

export interface DefragOptions {
  memberId: NodeId;
  /** raft's status: the configuration, and the replication progress (on the leader only). */
  status(): Pick<Status, "config" | "progress">;
  /** Whether the peer's stream is up (etcd's active peer): a transfer to a dead peer cannot take. */
  isActive(id: NodeId): boolean;
  /** MoveLeader as the API runs it (lease checkpoints first); resolves once `to` leads. */
  moveLeader(to: NodeId): Promise<void>;
  backend: { readonly path: string; sizeBytes(): number; sizeInUseBytes(): number };
  /** The VACUUM itself (blocks). */
  vacuum(): { sizeBeforeBytes: number; sizeAfterBytes: number };
  logger: Logger;
}

/**
 * On the leader, the voter (not this member) whose log matches the leader's furthest among the
 * active ones; undefined on a follower or when no other voter is active.
 */
export function transfereeForDefrag(o: Pick<DefragOptions, "memberId" | "status" | "isActive">): NodeId | undefined {
  const { config, progress } = o.status();
  if (progress === undefined) return undefined;
  let best: { id: NodeId; match: number } | undefined;
  for (const id of config.voters) {
    if (id === o.memberId || !o.isActive(id)) continue;
    const match = progress.get(id)?.match ?? 0;
    if (best === undefined || match > best.match) best = { id, match };
  }
  return best?.id;
}

/** Defragments this member's backend, as leader only after handing leadership on. */
export async function defragment(o: DefragOptions): Promise<void> {
  o.logger.info("starting defragment");
  await handOffLeadership(o);
  const startMs = performance.now();
  o.logger.info(
    { path: o.backend.path, "current-db-size-bytes": o.backend.sizeBytes(), "current-db-size-in-use-bytes": o.backend.sizeInUseBytes() },
    "defragmenting",
  );
  const { sizeBeforeBytes, sizeAfterBytes } = o.vacuum();
  o.logger.info(
    {
      path: o.backend.path,
      "current-db-size-bytes-diff": sizeAfterBytes - sizeBeforeBytes,
      "current-db-size-bytes": sizeAfterBytes,
      "current-db-size-in-use-bytes": o.backend.sizeInUseBytes(),
      took: `${Math.round(performance.now() - startMs)}ms`,
    },
    "defragmented",
  );
  o.logger.info("finished defragment");
}

async function handOffLeadership(o: DefragOptions): Promise<void> {
  const to = transfereeForDefrag(o);
  // A follower has nothing to hand on; a lone voter no one to hand to (its cluster stalls either way).
  if (to === undefined) return;
  const fields = {
    from: formatId(o.memberId),
    to: formatId(to),
    reason: "defragment blocks this member; as leader it would send no heartbeats and the followers would start an election",
  };
  o.logger.info(fields, "transferring leadership before defragment");
  try {
    await o.moveLeader(to);
  } catch (err) {
    // The operator asked for a defrag; a failed transfer costs at most the election it meant to avoid.
    o.logger.warn({ ...fields, err: String(err) }, "leadership transfer before defragment failed; defragmenting as leader");
  }
}
