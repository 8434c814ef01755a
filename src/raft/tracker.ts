import { Inflights } from "./inflights.js";
import { Progress } from "./progress.js";
import { JointConfig, MajorityConfig, VoteResult } from "./quorum.js";
import { compareNodeIds, type ConfState, type NodeId } from "./types.js";

/** The membership as the tracker sees it (etcd's tracker.Config). */
export interface TrackerConfig {
  voters: JointConfig;
  /** Leave the joint configuration automatically once the entry that entered it is applied. */
  autoLeave: boolean;
  learners: Set<NodeId>;
  /** Voters of the outgoing config that become learners when the joint config is left. */
  learnersNext: Set<NodeId>;
}

export function emptyTrackerConfig(): TrackerConfig {
  return { voters: new JointConfig(), autoLeave: false, learners: new Set(), learnersNext: new Set() };
}

export function cloneTrackerConfig(c: TrackerConfig): TrackerConfig {
  return {
    voters: new JointConfig(new MajorityConfig(c.voters.incoming.ids), new MajorityConfig(c.voters.outgoing.ids)),
    autoLeave: c.autoLeave,
    learners: new Set(c.learners),
    learnersNext: new Set(c.learnersNext),
  };
}

export type ProgressMap = Map<NodeId, Progress>;

/** Tracks the configuration, every member's replication progress and the votes of an election. */
export class ProgressTracker {
  config: TrackerConfig = emptyTrackerConfig();
  progress: ProgressMap = new Map();
  votes: Map<NodeId, boolean> = new Map();

  constructor(
    readonly maxInflight: number,
    readonly maxInflightBytes: number,
  ) {}

  newInflights(): Inflights {
    return new Inflights(this.maxInflight, this.maxInflightBytes);
  }

  confState(): ConfState {
    const sorted = (s: Iterable<NodeId>) => [...s].sort(compareNodeIds);
    return {
      voters: this.config.voters.incoming.sorted(),
      votersOutgoing: this.config.voters.outgoing.sorted(),
      learners: sorted(this.config.learners),
      learnersNext: sorted(this.config.learnersNext),
      autoLeave: this.config.autoLeave,
    };
  }

  /** True if the only voter is a single node (no joint config). */
  isSingleton(): boolean {
    return this.config.voters.incoming.size === 1 && this.config.voters.outgoing.size === 0;
  }

  /** The largest index replicated on a quorum (by Match). */
  committed(): number {
    return this.config.voters.committedIndex((id) => this.progress.get(id)?.match);
  }

  /** Visit progresses in id order (deterministic message order). */
  visit(f: (id: NodeId, pr: Progress) => void): void {
    const ids = [...this.progress.keys()].sort(compareNodeIds);
    for (const id of ids) {
      const pr = this.progress.get(id);
      if (pr !== undefined) f(id, pr);
    }
  }

  /** Whether a quorum of voters was recently active (CheckQuorum). */
  quorumActive(): boolean {
    const votes = new Map<NodeId, boolean>();
    this.visit((id, pr) => {
      if (!pr.isLearner) votes.set(id, pr.recentActive);
    });
    return this.config.voters.voteResult(votes) === VoteResult.Won;
  }

  voterNodes(): NodeId[] {
    return [...this.config.voters.ids()].sort(compareNodeIds);
  }

  learnerNodes(): NodeId[] {
    return [...this.config.learners].sort(compareNodeIds);
  }

  isVoter(id: NodeId): boolean {
    return this.config.voters.incoming.ids.has(id) || this.config.voters.outgoing.ids.has(id);
  }

  resetVotes(): void {
    this.votes = new Map();
  }

  recordVote(id: NodeId, granted: boolean): void {
    if (!this.votes.has(id)) this.votes.set(id, granted);
  }

  tallyVotes(): { granted: number; rejected: number; result: VoteResult } {
    let granted = 0;
    let rejected = 0;
    for (const [id, pr] of this.progress) {
      if (pr.isLearner) continue;
      const v = this.votes.get(id);
      if (v === undefined) continue;
      if (v) granted++;
      else rejected++;
    }
    return { granted, rejected, result: this.config.voters.voteResult(this.votes) };
  }
}
