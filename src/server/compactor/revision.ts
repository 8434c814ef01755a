/**
 * The revision auto-compactor (etcd 3.4's v3compactor.Revision, --auto-compaction-mode=revision):
 * every 5 minutes it compacts to (current revision - retention), keeping the last `retention`
 * revisions; nothing when that is ≤ 0 or the same as the last successful one. "required revision
 * has been compacted" counts as success.
 */
import type { Logger } from "../logger.js";
import type { Compactable } from "./compactable.js";
import { formatGoDuration } from "../../go_duration.js";
import { type CompactorClock } from "./clock.js";
import { CompactorLoop } from "./loop.js";

/** etcd's revInterval. */
export const REVISION_COMPACTION_INTERVAL_MS = 5 * 60 * 1000;

export interface RevisionOptions {
  /** --auto-compaction-retention as a number of revisions. */
  retention: number;
  store: Compactable;
  clock: CompactorClock;
  logger: Logger;
}

export class RevisionCompactor extends CompactorLoop {
  private prev = 0;

  constructor(private readonly o: RevisionOptions) {
    super(o.store, o.clock);
    if (!Number.isSafeInteger(o.retention) || o.retention <= 0) throw new RangeError(`revision compaction needs a positive retention, got ${o.retention}`);
  }

  run(): void {
    this.wait();
  }

  private wait(): void {
    this.after(REVISION_COMPACTION_INTERVAL_MS, () => this.wake());
  }

  private async wake(): Promise<void> {
    const rev = this.o.store.rev() - this.o.retention;
    if (this.paused || rev <= 0 || rev === this.prev) {
      this.wait();
      return;
    }
    const started = this.o.clock.now();
    const fields = { revision: rev, "revision-compaction-retention": this.o.retention };
    this.o.logger.info(fields, "starting auto revision compaction");
    const outcome = await this.compactTo(rev);
    if (outcome.done) {
      this.prev = rev;
      this.o.logger.info({ ...fields, took: formatGoDuration(this.o.clock.now() - started) }, "completed auto revision compaction");
    } else {
      this.o.logger.warn(
        { ...fields, "retry-interval": formatGoDuration(REVISION_COMPACTION_INTERVAL_MS), error: String(outcome.error) },
        "failed auto revision compaction",
      );
    }
    this.wait();
  }
}
