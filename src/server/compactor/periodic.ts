/**
 * The periodic auto-compactor (etcd 3.4's v3compactor.Periodic, --auto-compaction-mode=periodic):
 * keeps `period` of history. Every retry interval (period/10, at most 6 min) it samples the
 * store's revision into a sliding window of period/retryInterval + 1 samples, so the oldest
 * sample is the revision of one period ago. No compaction in the first period; after that it
 * compacts to the oldest sample every compact interval (the period, at most one hour), and retries
 * a failure after one retry interval. "required revision has been compacted" counts as success.
 */
import type { Logger } from "../logger.js";
import type { Compactable } from "./compactable.js";
import { formatGoDuration } from "../../go_duration.js";
import { type CompactorClock } from "./clock.js";
import { CompactorLoop } from "./loop.js";

const HOUR_MS = 3_600_000;
/** etcd's retryDivisor. */
const RETRY_DIVISOR = 10;

export interface PeriodicOptions {
  /** --auto-compaction-retention as a duration. */
  periodMs: number;
  store: Compactable;
  clock: CompactorClock;
  logger: Logger;
}

export class PeriodicCompactor extends CompactorLoop {
  private readonly periodMs: number;
  private readonly compactIntervalMs: number;
  private readonly retryIntervalMs: number;
  private readonly retentions: number;
  /** The sampled revisions; revs[0] is the revision of one period ago (once the window is full). */
  private revs: number[] = [];
  private lastSuccessMs = 0;
  private baseIntervalMs = 0;

  constructor(private readonly o: PeriodicOptions) {
    super(o.store, o.clock);
    if (!(o.periodMs > 0)) throw new RangeError(`periodic compaction needs a positive period, got ${o.periodMs} ms`);
    this.periodMs = o.periodMs;
    this.compactIntervalMs = Math.min(o.periodMs, HOUR_MS);
    // Go divides integer nanoseconds: period/10 truncated to the nanosecond.
    this.retryIntervalMs = Math.trunc((this.compactIntervalMs * 1e6) / RETRY_DIVISOR) / 1e6;
    this.retentions = Math.trunc(this.periodMs / this.retryIntervalMs) + 1;
  }

  /** The revisions in the window (oldest first), for tests and logs. */
  window(): readonly number[] {
    return this.revs;
  }

  run(): void {
    this.lastSuccessMs = this.o.clock.now();
    this.baseIntervalMs = this.periodMs;
    this.sample();
  }

  /** The top of etcd's loop: record the revision, then wait one retry interval. */
  private sample(): void {
    this.revs.push(this.o.store.rev());
    if (this.revs.length > this.retentions) this.revs = this.revs.slice(1);
    this.after(this.retryIntervalMs, () => this.wake());
  }

  private async wake(): Promise<void> {
    if (this.paused || this.o.clock.now() - this.lastSuccessMs < this.baseIntervalMs) {
      this.sample();
      return;
    }
    // The first compaction waits one whole period; later ones one compact interval.
    if (this.baseIntervalMs === this.periodMs) this.baseIntervalMs = this.compactIntervalMs;
    const rev = this.revs[0]!;
    const fields = { revision: rev, "compact-period": formatGoDuration(this.periodMs) };
    this.o.logger.info(fields, "starting auto periodic compaction");
    const outcome = await this.compactTo(rev);
    if (outcome.done) {
      this.o.logger.info({ ...fields, took: formatGoDuration(this.o.clock.now() - this.lastSuccessMs) }, "completed auto periodic compaction");
      this.lastSuccessMs = this.o.clock.now();
    } else {
      this.o.logger.warn({ ...fields, "retry-interval": formatGoDuration(this.retryIntervalMs), error: String(outcome.error) }, "failed auto periodic compaction");
    }
    this.sample();
  }
}
