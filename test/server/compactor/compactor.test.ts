/**
 * The auto-compactors against etcd 3.4's arithmetic (v3compactor periodic.go / revision.go), on a
 * fake clock: which revision is compacted, when, and what a failure, a pause or an
 * already-compacted revision does.
 */
import { describe, expect, it } from "vitest";
import { ErrCompacted } from "../../../src/mvcc/errors.js";
import { formatGoDuration } from "../../../src/go_duration.js";
import { newCompactor } from "../../../src/server/compactor/index.js";
import { PeriodicCompactor } from "../../../src/server/compactor/periodic.js";
import { RevisionCompactor } from "../../../src/server/compactor/revision.js";
import { silentLogger } from "../../../src/server/logger.js";
import { FakeClock } from "./fake_clock.js";

const SEC = 1000;
const MIN = 60 * SEC;
const HOUR = 60 * MIN;

/** A store whose revision is a function of the fake time; records every compaction asked for. */
class FakeStore {
  readonly compactions: Array<{ atMs: number; revision: number }> = [];
  failNext = 0;
  compactedNext = 0;
  constructor(
    private readonly clock: FakeClock,
    public revAt: (ms: number) => number,
  ) {}
  rev(): number {
    return this.revAt(this.clock.now());
  }
  compact(revision: number): Promise<void> {
    this.compactions.push({ atMs: this.clock.now(), revision });
    if (this.failNext > 0) {
      this.failNext--;
      return Promise.reject(new Error("etcdserver: request timed out"));
    }
    if (this.compactedNext > 0) {
      this.compactedNext--;
      return Promise.reject(new ErrCompacted());
    }
    return Promise.resolve();
  }
  isCompacted(err: unknown): boolean {
    return err instanceof ErrCompacted;
  }
}

function setup(revAt: (ms: number) => number = (ms) => 100 + Math.floor(ms / SEC)) {
  const clock = new FakeClock();
  const store = new FakeStore(clock, revAt);
  return { clock, store };
}

describe("periodic compactor", () => {
  it("10s retention: first compaction after one period at the first sample, then every period at the oldest of 11 samples", async () => {
    const { clock, store } = setup();
    const c = new PeriodicCompactor({ periodMs: 10 * SEC, store, clock, logger: silentLogger() });
    c.run();
    await clock.advance(9 * SEC);
    expect(store.compactions).toEqual([]);
    await clock.advance(21 * SEC);
    // Samples every 1 s (period/10); the window holds period/retry + 1 = 11 of them.
    expect(store.compactions).toEqual([
      { atMs: 10 * SEC, revision: 100 }, // rev at t=0
      { atMs: 20 * SEC, revision: 109 }, // oldest of the samples t=9..19
      { atMs: 30 * SEC, revision: 119 },
    ]);
    expect(c.window()).toHaveLength(11);
    c.stop();
  });

  it("2h retention: samples every 6 min, compacts every hour after the first two hours", async () => {
    const { clock, store } = setup((ms) => 1 + Math.floor(ms / MIN)); // one revision a minute
    const c = newCompactor({ mode: "periodic", retentionMs: 2 * HOUR }, store, silentLogger(), clock);
    c.run();
    await clock.advance(2 * HOUR - 1);
    expect(store.compactions).toEqual([]);
    await clock.advance(2 * HOUR + 1);
    expect(store.compactions).toEqual([
      { atMs: 2 * HOUR, revision: 1 },
      // 21 samples (2h / 6min + 1) up to t=174 min: the oldest is t=54 min.
      { atMs: 3 * HOUR, revision: 1 + 54 },
      { atMs: 4 * HOUR, revision: 1 + 114 },
    ]);
    c.stop();
  });

  it("a failed compaction is retried one retry interval later with the window moved on", async () => {
    const { clock, store } = setup();
    store.failNext = 1;
    const c = new PeriodicCompactor({ periodMs: 10 * SEC, store, clock, logger: silentLogger() });
    c.run();
    await clock.advance(11 * SEC);
    expect(store.compactions).toEqual([
      { atMs: 10 * SEC, revision: 100 },
      { atMs: 11 * SEC, revision: 100 }, // window t=0..10 still starts at t=0
    ]);
    await clock.advance(10 * SEC);
    expect(store.compactions.at(-1)).toEqual({ atMs: 21 * SEC, revision: 110 });
    c.stop();
  });

  it("'required revision has been compacted' counts as success", async () => {
    const { clock, store } = setup();
    store.compactedNext = 1;
    const c = new PeriodicCompactor({ periodMs: 10 * SEC, store, clock, logger: silentLogger() });
    c.run();
    await clock.advance(19 * SEC);
    expect(store.compactions).toEqual([{ atMs: 10 * SEC, revision: 100 }]);
    c.stop();
  });

  it("paused (not the leader): samples but never compacts; resumed: compacts at the next sample", async () => {
    const { clock, store } = setup();
    const c = new PeriodicCompactor({ periodMs: 10 * SEC, store, clock, logger: silentLogger() });
    c.pause();
    c.run();
    await clock.advance(30 * SEC);
    expect(store.compactions).toEqual([]);
    c.resume();
    await clock.advance(1 * SEC);
    // Window t=20..30 (11 samples, one per second).
    expect(store.compactions).toEqual([{ atMs: 31 * SEC, revision: 120 }]);
    c.stop();
    await clock.advance(60 * SEC);
    expect(store.compactions).toHaveLength(1);
  });
});

describe("revision compactor", () => {
  it("every 5 min compacts to current - retention; skips ≤ 0 and an unchanged target", async () => {
    const { clock, store } = setup();
    let rev = 5;
    store.revAt = () => rev;
    const c = new RevisionCompactor({ retention: 10, store, clock, logger: silentLogger() });
    c.run();
    await clock.advance(5 * MIN);
    expect(store.compactions).toEqual([]); // 5 - 10 ≤ 0
    rev = 100;
    await clock.advance(5 * MIN - 1);
    expect(store.compactions).toEqual([]);
    await clock.advance(1);
    expect(store.compactions).toEqual([{ atMs: 10 * MIN, revision: 90 }]);
    await clock.advance(5 * MIN);
    expect(store.compactions).toHaveLength(1); // same target as the last success
    rev = 150;
    await clock.advance(5 * MIN);
    expect(store.compactions.at(-1)).toEqual({ atMs: 20 * MIN, revision: 140 });
    c.stop();
  });

  it("a failure is retried at the next interval; paused does nothing", async () => {
    const { clock, store } = setup(() => 50);
    store.failNext = 1;
    const c = newCompactor({ mode: "revision", retentionRevisions: 20 }, store, silentLogger(), clock);
    c.run();
    await clock.advance(10 * MIN);
    expect(store.compactions).toEqual([
      { atMs: 5 * MIN, revision: 30 },
      { atMs: 10 * MIN, revision: 30 },
    ]);
    c.pause();
    store.revAt = () => 80;
    await clock.advance(15 * MIN);
    expect(store.compactions).toHaveLength(2);
    c.resume();
    await clock.advance(5 * MIN);
    expect(store.compactions.at(-1)).toEqual({ atMs: 30 * MIN, revision: 60 });
    c.stop();
  });
});

describe("formatGoDuration", () => {
  it("prints as Go's time.Duration.String", () => {
    expect(formatGoDuration(5 * MIN)).toBe("5m0s");
    expect(formatGoDuration(HOUR)).toBe("1h0m0s");
    expect(formatGoDuration(2 * SEC)).toBe("2s");
    // Below a millisecond, as Go prints it (zap's "took" of a fast request).
    expect(formatGoDuration(0.858807)).toBe("858.807µs");
    expect(formatGoDuration(0.000001)).toBe("1ns");
    expect(formatGoDuration(1.2345678)).toBe("1.234568ms");
    expect(formatGoDuration(-1000)).toBe("-1s");
    expect(formatGoDuration(1500)).toBe("1.5s");
    expect(formatGoDuration(500)).toBe("500ms");
    expect(formatGoDuration(0)).toBe("0s");
    expect(formatGoDuration(90 * MIN + 0.25 * SEC)).toBe("1h30m0.25s");
  });
});
