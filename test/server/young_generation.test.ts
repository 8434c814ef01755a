/**
 * The quiet member's young-generation release (src/server/young_generation.ts): the policy on its
 * own, then a real member, whose new space the warm-up and a burst of puts grow and whose quiet
 * spells must give it back (read from its own debug log and its /metrics).
 */
import { Etcd3 } from "etcd3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MAX_ATTEMPTS, QUIET_TICKS, QUIET_UTILIZATION, RELEASE_ABOVE_BYTES, ReleasePolicy } from "../../src/server/young_generation.js";
import { Cluster, eventually } from "../e2e/harness.js";

const BIG = 32 * 1024 * 1024;
const BUSY = 0.5;
const QUIET = QUIET_UTILIZATION / 10;

describe("ReleasePolicy", () => {
  it("waits for QUIET_TICKS quiet seconds, then scavenges each quiet second until the new space is small", () => {
    const p = new ReleasePolicy();
    expect(p.tick(BUSY, BIG)).toBe("wait");
    for (let i = 1; i < QUIET_TICKS; i++) expect(p.tick(QUIET, BIG)).toBe("wait");
    expect(p.tick(QUIET, BIG)).toBe("scavenge");
    expect(p.tick(QUIET, BIG)).toBe("scavenge");
    expect(p.tick(QUIET, RELEASE_ABOVE_BYTES)).toBe("done");
    // Done until the member has been busy again, even if the space grew meanwhile.
    expect(p.tick(QUIET, BIG)).toBe("wait");
    expect(p.tick(QUIET_UTILIZATION, BIG)).toBe("wait");
    for (let i = 1; i < QUIET_TICKS; i++) expect(p.tick(QUIET, BIG)).toBe("wait");
    expect(p.tick(QUIET, BIG)).toBe("scavenge");
  });

  it("a busy second starts the count again", () => {
    const p = new ReleasePolicy();
    for (let round = 0; round < 3; round++) {
      for (let i = 1; i < QUIET_TICKS; i++) expect(p.tick(QUIET, BIG)).toBe("wait");
      expect(p.tick(BUSY, BIG)).toBe("wait");
    }
  });

  it("gives up after MAX_ATTEMPTS scavenges that left the space large", () => {
    const p = new ReleasePolicy();
    for (let i = 1; i < QUIET_TICKS; i++) p.tick(QUIET, BIG);
    for (let i = 0; i < MAX_ATTEMPTS; i++) expect(p.tick(QUIET, BIG)).toBe("scavenge");
    expect(p.tick(QUIET, BIG)).toBe("done");
    expect(p.tick(QUIET, BIG)).toBe("wait");
  });

  it("never scavenges a space that is already small", () => {
    const p = new ReleasePolicy();
    for (let i = 1; i < QUIET_TICKS; i++) p.tick(QUIET, RELEASE_ABOVE_BYTES);
    expect(p.tick(QUIET, RELEASE_ABOVE_BYTES)).toBe("done");
  });
});

interface Release {
  newSpaceBeforeBytes: number;
  newSpaceAfterBytes: number;
}

/** The member's "scavenged" debug lines from `from` on. */
function releases(log: string, from: number): Release[] {
  return log
    .slice(from)
    .split("\n")
    .filter((l) => l.includes("scavenged a quiet member's young generation"))
    .map((l) => JSON.parse(l) as Release);
}

async function newSpaceBytes(metricsUrl: string): Promise<number> {
  const text = await (await fetch(`${metricsUrl}/metrics`)).text();
  const m = /^nodejs_heap_space_size_total_bytes\{space="new"\} (\d+)$/m.exec(text);
  if (m === null) throw new Error("no new-space gauge in /metrics");
  return Number(m[1]);
}

// Always etcetera's process: the release is V8's, etcd has no young generation.
describe("a quiet member gives its young generation back", () => {
  let cluster: Cluster;
  beforeAll(async () => {
    cluster = await Cluster.create({ size: 1, target: "etcetera", extraArgs: ["--log-level=debug"] });
    await cluster.start();
  });
  afterAll(async () => {
    await cluster?.destroy();
  });

  it("after the warm-up and after a burst of puts, within seconds of going quiet", async () => {
    const m = cluster.members[0]!;
    // The warm-up's young generation (it runs before the member is ready).
    const first = await eventually(async () => releases(m.log, 0).find((r) => r.newSpaceAfterBytes <= RELEASE_ABOVE_BYTES), 40_000, "the release after the warm-up");
    expect(first.newSpaceAfterBytes).toBeLessThanOrEqual(RELEASE_ABOVE_BYTES);
    expect(releases(m.log, 0)[0]!.newSpaceBeforeBytes).toBeGreaterThan(RELEASE_ABOVE_BYTES);

    // A burst that grows it again: 100 writers, 1 KiB values.
    const client = new Etcd3({ hosts: m.clientUrl });
    try {
      const value = "v".repeat(1024);
      await Promise.all(
        Array.from({ length: 100 }, async (_, w) => {
          for (let i = 0; i < 60; i++) await client.put(`burst/${w}/${i}`).value(value);
        }),
      );
    } finally {
      client.close();
    }
    const afterBurst = m.log.length;
    const grown = await newSpaceBytes(m.clientUrl);
    expect(grown, "the burst did not grow the young generation: the test needs a bigger one").toBeGreaterThan(RELEASE_ABOVE_BYTES);
    const again = await eventually(async () => releases(m.log, afterBurst).find((r) => r.newSpaceAfterBytes <= RELEASE_ABOVE_BYTES), 40_000, "the release after the burst");
    expect(again.newSpaceAfterBytes).toBeLessThan(grown);
    expect(await newSpaceBytes(m.clientUrl)).toBeLessThanOrEqual(RELEASE_ABOVE_BYTES);
  }, 120_000);
});
