import { Inflights } from "./inflights.js";

/**
 * How the leader replicates to one follower:
 * - Probe: the follower's log position is unknown; send one MsgApp per heartbeat interval (or
 *   per response) until it acknowledges.
 * - Replicate: the position is known; stream MsgApps optimistically, bounded by the inflights.
 * - Snapshot: the follower needs a snapshot; send nothing else until it reports back.
 */
export enum ProgressState {
  Probe = "StateProbe",
  Replicate = "StateReplicate",
  Snapshot = "StateSnapshot",
}

/** The leader's view of one follower (etcd's tracker.Progress). */
export class Progress {
  match = 0;
  next: number;
  state: ProgressState = ProgressState.Probe;
  /** Index of the snapshot being sent (Snapshot state). */
  pendingSnapshot = 0;
  /** Heard from within the last election timeout (CheckQuorum). */
  recentActive = false;
  /** Probe state: a MsgApp was sent and we wait for its answer or the next heartbeat response. */
  probeSent = false;
  inflights: Inflights;
  isLearner: boolean;

  constructor(opts: { next: number; match?: number; inflights: Inflights; isLearner: boolean; recentActive?: boolean }) {
    this.next = opts.next;
    this.match = opts.match ?? 0;
    this.inflights = opts.inflights;
    this.isLearner = opts.isLearner;
    this.recentActive = opts.recentActive ?? false;
  }

  clone(): Progress {
    const p = new Progress({ next: this.next, match: this.match, inflights: this.inflights.clone(), isLearner: this.isLearner });
    p.state = this.state;
    p.pendingSnapshot = this.pendingSnapshot;
    p.recentActive = this.recentActive;
    p.probeSent = this.probeSent;
    return p;
  }

  private resetState(state: ProgressState): void {
    this.probeSent = false;
    this.pendingSnapshot = 0;
    this.state = state;
    this.inflights.reset();
  }

  becomeProbe(): void {
    if (this.state === ProgressState.Snapshot) {
      // The snapshot (if it was received) brings the follower at least to pendingSnapshot.
      const pendingSnapshot = this.pendingSnapshot;
      this.resetState(ProgressState.Probe);
      this.next = Math.max(this.match + 1, pendingSnapshot + 1);
    } else {
      this.resetState(ProgressState.Probe);
      this.next = this.match + 1;
    }
  }

  becomeReplicate(): void {
    this.resetState(ProgressState.Replicate);
    this.next = this.match + 1;
  }

  becomeSnapshot(snapshotIndex: number): void {
    this.resetState(ProgressState.Snapshot);
    this.pendingSnapshot = snapshotIndex;
  }

  /** An acknowledgement up to n: returns whether match moved. */
  maybeUpdate(n: number): boolean {
    let updated = false;
    if (this.match < n) {
      this.match = n;
      updated = true;
      this.probeSent = false;
    }
    this.next = Math.max(this.next, n + 1);
    return updated;
  }

  /** Pipelining: assume the MsgApp ending at n will be accepted. */
  optimisticUpdate(n: number): void {
    this.next = n + 1;
  }

  /**
   * A rejection of the MsgApp at index `rejected`, with the follower's hint of where the logs may
   * match. Returns false if the rejection is stale (answers an older probe).
   */
  maybeDecrTo(rejected: number, matchHint: number): boolean {
    if (this.state === ProgressState.Replicate) {
      if (rejected <= this.match) return false;
      this.next = this.match + 1;
      return true;
    }
    // Probes carry one MsgApp at a time, so a rejection not about next-1 is stale.
    if (this.next - 1 !== rejected) return false;
    this.next = Math.max(Math.min(rejected, matchHint + 1), this.match + 1);
    this.probeSent = false;
    return true;
  }

  isPaused(): boolean {
    switch (this.state) {
      case ProgressState.Probe:
        return this.probeSent;
      case ProgressState.Replicate:
        return this.inflights.full();
      case ProgressState.Snapshot:
        return true;
    }
  }
}
