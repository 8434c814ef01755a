import { assert } from "./assert.js";
import { Progress } from "./progress.js";
import { JointConfig, MajorityConfig } from "./quorum.js";
import { cloneTrackerConfig, type ProgressMap, type ProgressTracker, type TrackerConfig } from "./tracker.js";
import {
  ConfChangeTransition,
  ConfChangeType,
  type ConfChangeSingle,
  type ConfChangeV2,
  type ConfState,
  type NodeId,
  NONE,
} from "./types.js";

/** A membership change that cannot be applied to the current configuration. */
export class ConfChangeError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ConfChangeError";
  }
}

export interface ConfChangeResult {
  config: TrackerConfig;
  progress: ProgressMap;
}

/** An empty ConfChangeV2 with the Auto transition leaves a joint configuration. */
export function confChangeLeavesJoint(cc: ConfChangeV2): boolean {
  return cc.changes.length === 0 && cc.transition === ConfChangeTransition.Auto;
}

/** Whether the change uses joint consensus, and if so whether the joint config is left automatically. */
export function confChangeEntersJoint(cc: ConfChangeV2): { autoLeave: boolean } | undefined {
  if (cc.transition !== ConfChangeTransition.Auto || cc.changes.length > 1) {
    return { autoLeave: cc.transition !== ConfChangeTransition.JointExplicit };
  }
  return undefined;
}

/**
 * Computes configurations from changes (etcd's confchange.Changer). Works on copies: the tracker
 * is untouched until the caller switches to the returned configuration.
 */
export class Changer {
  constructor(
    private readonly tracker: ProgressTracker,
    private readonly lastIndex: number,
  ) {}

  /** Apply the change the way a committed ConfChangeV2 entry is applied. */
  applyV2(cc: ConfChangeV2): ConfChangeResult {
    if (confChangeLeavesJoint(cc)) return this.leaveJoint();
    const joint = confChangeEntersJoint(cc);
    if (joint !== undefined) return this.enterJoint(joint.autoLeave, cc.changes);
    return this.simple(cc.changes);
  }

  enterJoint(autoLeave: boolean, ccs: ConfChangeSingle[]): ConfChangeResult {
    const { config, progress } = this.checkAndCopy();
    if (config.voters.isJoint()) throw new ConfChangeError("config is already joint");
    if (config.voters.incoming.size === 0) throw new ConfChangeError("can't make a zero-voter config joint");
    // The current voters become the outgoing half; the changes shape the incoming half.
    const next: TrackerConfig = {
      ...config,
      voters: new JointConfig(new MajorityConfig(config.voters.incoming.ids), new MajorityConfig(config.voters.incoming.ids)),
    };
    this.apply(next, progress, ccs);
    next.autoLeave = autoLeave;
    return checkAndReturn(next, progress);
  }

  leaveJoint(): ConfChangeResult {
    const { config, progress } = this.checkAndCopy();
    if (!config.voters.isJoint()) throw new ConfChangeError("can't leave a non-joint config");
    for (const id of config.learnersNext) {
      config.learners.add(id);
      const pr = progress.get(id);
      assert(pr !== undefined, () => `no progress for learnerNext ${id}`);
      pr.isLearner = true;
    }
    config.learnersNext = new Set();
    for (const id of config.voters.outgoing.ids) {
      if (!config.voters.incoming.ids.has(id) && !config.learners.has(id)) progress.delete(id);
    }
    const next: TrackerConfig = { ...config, voters: new JointConfig(config.voters.incoming, new MajorityConfig()), autoLeave: false };
    return checkAndReturn(next, progress);
  }

  /** At most one voter may change without joint consensus (the classic single-server change). */
  simple(ccs: ConfChangeSingle[]): ConfChangeResult {
    const { config, progress } = this.checkAndCopy();
    if (config.voters.isJoint()) throw new ConfChangeError("can't apply simple config change in joint config");
    this.apply(config, progress, ccs);
    const before = this.tracker.config.voters.incoming.ids;
    const after = config.voters.incoming.ids;
    let diff = 0;
    for (const id of before) if (!after.has(id)) diff++;
    for (const id of after) if (!before.has(id)) diff++;
    if (diff > 1) throw new ConfChangeError("more than one voter changed without entering joint config");
    return checkAndReturn(config, progress);
  }

  private apply(config: TrackerConfig, progress: ProgressMap, ccs: ConfChangeSingle[]): void {
    for (const cc of ccs) {
      // etcd zeroes the node id of a change it decided not to apply; skip those.
      if (cc.nodeId === NONE) continue;
      switch (cc.type) {
        case ConfChangeType.AddNode:
          this.makeVoter(config, progress, cc.nodeId);
          break;
        case ConfChangeType.AddLearnerNode:
          this.makeLearner(config, progress, cc.nodeId);
          break;
        case ConfChangeType.RemoveNode:
          remove(config, progress, cc.nodeId);
          break;
        case ConfChangeType.UpdateNode:
          break;
        default:
          throw new ConfChangeError(`unexpected conf type ${String(cc.type)}`);
      }
    }
    if (config.voters.incoming.size === 0) throw new ConfChangeError("removed all voters");
  }

  private makeVoter(config: TrackerConfig, progress: ProgressMap, id: NodeId): void {
    const pr = progress.get(id);
    if (pr === undefined) {
      this.initProgress(config, progress, id, false);
      return;
    }
    pr.isLearner = false;
    config.learners.delete(id);
    config.learnersNext.delete(id);
    config.voters.incoming.ids.add(id);
  }

  private makeLearner(config: TrackerConfig, progress: ProgressMap, id: NodeId): void {
    const pr = progress.get(id);
    if (pr === undefined) {
      this.initProgress(config, progress, id, true);
      return;
    }
    if (pr.isLearner) return;
    remove(config, progress, id);
    progress.set(id, pr);
    // A voter of the outgoing config can only become a learner once that config is left.
    if (config.voters.outgoing.ids.has(id)) {
      config.learnersNext.add(id);
    } else {
      pr.isLearner = true;
      config.learners.add(id);
    }
  }

  private initProgress(config: TrackerConfig, progress: ProgressMap, id: NodeId, isLearner: boolean): void {
    if (isLearner) config.learners.add(id);
    else config.voters.incoming.ids.add(id);
    progress.set(
      id,
      new Progress({
        // Probe from the last index: an empty follower rejects and the hint walks next back.
        next: Math.max(this.lastIndex, 1),
        inflights: this.tracker.newInflights(),
        isLearner,
        // Newly added: count as active so CheckQuorum does not step down before it has answered.
        recentActive: true,
      }),
    );
  }

  private checkAndCopy(): ConfChangeResult {
    const config = cloneTrackerConfig(this.tracker.config);
    const progress: ProgressMap = new Map();
    for (const [id, pr] of this.tracker.progress) progress.set(id, pr.clone());
    checkInvariants(config, progress);
    return { config, progress };
  }
}

function remove(config: TrackerConfig, progress: ProgressMap, id: NodeId): void {
  if (!progress.has(id)) return;
  config.voters.incoming.ids.delete(id);
  config.learners.delete(id);
  config.learnersNext.delete(id);
  // A voter of the outgoing config keeps its progress until the joint config is left.
  if (!config.voters.outgoing.ids.has(id)) progress.delete(id);
}

function checkAndReturn(config: TrackerConfig, progress: ProgressMap): ConfChangeResult {
  checkInvariants(config, progress);
  return { config, progress };
}

function checkInvariants(config: TrackerConfig, progress: ProgressMap): void {
  for (const ids of [config.voters.ids(), config.learners, config.learnersNext]) {
    for (const id of ids) if (!progress.has(id)) throw new ConfChangeError(`no progress for ${id}`);
  }
  for (const id of config.learnersNext) {
    if (!config.voters.outgoing.ids.has(id)) throw new ConfChangeError(`${id} is in LearnersNext, but not Voters[1]`);
    if (progress.get(id)?.isLearner) throw new ConfChangeError(`${id} is in LearnersNext, but is already marked as learner`);
  }
  for (const id of config.learners) {
    if (config.voters.outgoing.ids.has(id)) throw new ConfChangeError(`${id} is in Learners and Voters[1]`);
    if (config.voters.incoming.ids.has(id)) throw new ConfChangeError(`${id} is in Learners and Voters[0]`);
    if (!progress.get(id)?.isLearner) throw new ConfChangeError(`${id} is in Learners, but is not marked as learner`);
  }
  if (!config.voters.isJoint()) {
    if (config.learnersNext.size > 0) throw new ConfChangeError("cfg.LearnersNext must be empty when not joint");
    if (config.autoLeave) throw new ConfChangeError("AutoLeave set but not joint");
  }
}

/**
 * Rebuild the tracker configuration described by a ConfState (after a snapshot or a restart) by
 * replaying it as a sequence of changes, so the same validation applies.
 */
export function restoreConfState(tracker: ProgressTracker, lastIndex: number, cs: ConfState): ConfChangeResult {
  const outgoing: ConfChangeSingle[] = cs.votersOutgoing.map((id) => ({ type: ConfChangeType.AddNode, nodeId: id }));
  const incoming: ConfChangeSingle[] = [
    // Removing then re-adding: the effect is to clear the outgoing voters from the incoming half.
    ...cs.votersOutgoing.map((id) => ({ type: ConfChangeType.RemoveNode, nodeId: id })),
    ...cs.voters.map((id) => ({ type: ConfChangeType.AddNode, nodeId: id })),
    ...cs.learners.map((id) => ({ type: ConfChangeType.AddLearnerNode, nodeId: id })),
    ...cs.learnersNext.map((id) => ({ type: ConfChangeType.AddLearnerNode, nodeId: id })),
  ];
  const steps: ((c: Changer) => ConfChangeResult)[] = [];
  if (outgoing.length === 0) {
    for (const cc of incoming) steps.push((c) => c.simple([cc]));
  } else {
    for (const cc of outgoing) steps.push((c) => c.simple([cc]));
    steps.push((c) => c.enterJoint(cs.autoLeave, incoming));
  }
  let result: ConfChangeResult = { config: tracker.config, progress: tracker.progress };
  for (const step of steps) {
    result = step(new Changer(tracker, lastIndex));
    tracker.config = result.config;
    tracker.progress = result.progress;
  }
  return result;
}
