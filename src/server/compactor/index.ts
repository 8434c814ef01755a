/**
 * Auto-compaction (etcd's v3compactor.New): the compactor for --auto-compaction-mode, run on
 * every member and paused unless the member is the leader (etcd pauses and resumes it on each
 * leader change), so only the leader proposes Compact through raft.
 */
import type { AutoCompaction } from "../config.js";
import type { Logger } from "../logger.js";
import type { Compactable, Compactor } from "./compactable.js";
import { realClock, type CompactorClock } from "./clock.js";
import { PeriodicCompactor } from "./periodic.js";
import { RevisionCompactor } from "./revision.js";

export type { Compactable, Compactor } from "./compactable.js";

export function newCompactor(mode: AutoCompaction, store: Compactable, logger: Logger, clock: CompactorClock = realClock): Compactor {
  switch (mode.mode) {
    case "periodic":
      return new PeriodicCompactor({ periodMs: mode.retentionMs, store, clock, logger });
    case "revision":
      return new RevisionCompactor({ retention: mode.retentionRevisions, store, clock, logger });
  }
}

/** The member as a compactor sees it: its store's revision, and Compact proposed through raft. */
export function memberCompactable(o: {
  currentRevision(): number;
  proposeCompaction(revision: number): Promise<{ error?: Error }>;
  isCompacted(err: unknown): boolean;
}): Compactable {
  return {
    rev: () => o.currentRevision(),
    compact: async (revision) => {
      const outcome = await o.proposeCompaction(revision);
      if (outcome.error) throw outcome.error;
    },
    isCompacted: (err) => o.isCompacted(err),
  };
}
