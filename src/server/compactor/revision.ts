/**
 * The revision auto-compactor (etcd 3.4's v3compactor.Revision, --auto-compaction-mode=revision):
 * every 5 minutes it compacts to (current revision - retention), keeping the last `retention`
 * revisions; nothing when that is ≤ 0 or the same as the last successful one. "required revision
 * has been compacted" counts as success.
 */
import type { Logger } from "../logger.js";
import type { Compactable, Compactor } from "./compactable.js";
import { formatGoDuration, type CompactorClock } from "./clock.js";

/** etcd's revInterval. */
export const REVISION_COMPACTION_INTERVAL_MS = 5 * 60 * 1000;

export interface RevisionOptions {
  /** --auto-compaction-retention as a number of revisions. */
  retention: number;
  store: Compactable;
  clock: CompactorClock;
  logger: Logger;
}

export class RevisionCompactor implements Compactor {
  private prev = 0;
  private paused = false;
  private stopped = false;
  private cancelTimer: (() => void) | undefined;

  constructor(private readonly o: RevisionOptions) {
    if (!Number.isSafeInteger(o.retention) || o.retention <= 0) throw new RangeError(`revision compaction needs a positive retention, got ${o.retention}`);
  }

  run(): void {
    this.wait();
  }

  stop(): void {
    this.stopped = true;
    this.cancelTimer?.();
  }

  pause(): void {
    this.paused = true;
  }

  resume(): void {
    this.paused = false;
  }

  private wait(): void {
    if (this.stopped) return;
    this.cancelTimer = this.o.clock.after(REVISION_COMPACTION_INTERVAL_MS, () => void this.wake());
  }

  private async wake(): Promise<void> {
    if (this.stopped) return;
    const rev = this.o.store.rev() - this.o.retention;
    if (this.paused || rev <= 0 || rev === this.prev) {
      this.wait();
      return;
    }
    const started = this.o.clock.now();
    const fields = { revision: rev, "revision-compaction-retention": this.o.retention };
    this.o.logger.info(fields, "starting auto revision compaction");
    try {
      await this.o.store.compact(rev);
      this.completed(rev, fields, started);
    } catch (err) {
      if (this.o.store.isCompacted(err)) {
        this.completed(rev, fields, started);
      } else {
        this.o.logger.warn(
          { ...fields, "retry-interval": formatGoDuration(REVISION_COMPACTION_INTERVAL_MS), error: String(err) },
          "failed auto revision compaction",
        );
      }
    }
    this.wait();
  }

  private completed(rev: number, fields: object, startedMs: number): void {
    this.prev = rev;
    this.o.logger.info({ ...fields, took: formatGoDuration(this.o.clock.now() - startedMs) }, "completed auto revision compaction");
  }
}
