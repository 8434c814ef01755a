/**
 * What the periodic and the revision compactor share: etcd runs each as a goroutine that sleeps on
 * its clock, skips its turn while paused (the member is not the leader) and ends on stop; a
 * compaction that finds its revision already compacted counts as done.
 */
import type { Compactable, Compactor } from "./compactable.js";
import type { CompactorClock } from "./clock.js";

export type CompactionOutcome = { done: true } | { done: false; error: unknown };

export abstract class CompactorLoop implements Compactor {
  private pausedFlag = false;
  private stopped = false;
  private cancelTimer: (() => void) | undefined;

  protected constructor(
    protected readonly store: Compactable,
    protected readonly clock: CompactorClock,
  ) {}

  abstract run(): void;

  stop(): void {
    this.stopped = true;
    this.cancelTimer?.();
  }

  pause(): void {
    this.pausedFlag = true;
  }

  resume(): void {
    this.pausedFlag = false;
  }

  protected get paused(): boolean {
    return this.pausedFlag;
  }

  /** Wakes `turn` after `ms`, unless stopped before or meanwhile. */
  protected after(ms: number, turn: () => Promise<void>): void {
    if (this.stopped) return;
    this.cancelTimer = this.clock.after(ms, () => {
      if (!this.stopped) void turn();
    });
  }

  /** Compacts to `revision` through the member. */
  protected async compactTo(revision: number): Promise<CompactionOutcome> {
    try {
      await this.store.compact(revision);
      return { done: true };
    } catch (error) {
      return this.store.isCompacted(error) ? { done: true } : { done: false, error };
    }
  }
}
