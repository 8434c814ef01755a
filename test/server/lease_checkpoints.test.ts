/**
 * The leader's lease checkpoint scheduler (src/server/lease_checkpoints.ts) over a real lessor on a
 * fake clock: due checkpoints go out in batches of at most 1000 per raft proposal, bounded per
 * poll; nothing on a follower; checkpointAll before a transfer covers every lease that has used
 * some of its TTL; the applied checkpoints are what a newly promoted lessor restarts from.
 */
import { afterEach, describe, expect, it } from "vitest";
import type { ApplyOutcome } from "../../src/server/apply.js";
import { LeaseCheckpoints } from "../../src/server/lease_checkpoints.js";
import { silentLogger } from "../../src/server/logger.js";
import type { ProposedRequest } from "../../src/server/raft_request.js";
import { fixture, type Fixture } from "../lease/harness.js";

let f: Fixture;
afterEach(() => f?.tmp.cleanup());

function scheduler(leader: () => boolean) {
  const proposed: Array<Array<{ ID: number | bigint; remaining_TTL: number }>> = [];
  const cps = new LeaseCheckpoints({
    isLeader: leader,
    dueCheckpoints: (limit) => f.lessor.dueCheckpoints(limit),
    allCheckpoints: () => f.lessor.allCheckpoints(),
    propose: (req: ProposedRequest): Promise<ApplyOutcome> => {
      const batch = (req.leaseCheckpoint?.checkpoints ?? []).map((c) => ({ ID: c.ID ?? 0, remaining_TTL: c.remaining_TTL ?? 0 }));
      proposed.push(batch);
      // Applied at once, as raft would on every member.
      for (const c of batch) f.lessor.checkpoint(c.ID, c.remaining_TTL);
      return Promise.resolve({ revision: 1, response: {} });
    },
    logger: silentLogger(),
  });
  return { cps, proposed };
}

describe("lease checkpoint scheduler", () => {
  it("2,500 due leases: three proposals of ≤1000, remaining TTLs of the leader's clock", async () => {
    // A revoke rate above the lease count: promote does not spread these equal expiries.
    f = fixture({ checkpointing: true, checkpointIntervalMs: 10_000, leaseRevokeRate: 100_000 });
    for (let id = 1; id <= 2500; id++) f.lessor.grant(id, 60);
    f.lessor.promote(0);
    const { cps, proposed } = scheduler(() => true);
    await cps.poll();
    expect(proposed).toEqual([]); // nothing due before one interval
    f.clock.advance(10_000);
    await cps.poll();
    expect(proposed.map((b) => b.length)).toEqual([1000, 1000, 500]);
    expect(new Set(proposed.flat().map((c) => c.remaining_TTL))).toEqual(new Set([50]));
    await cps.poll();
    expect(proposed).toHaveLength(3); // the next ones are due one interval later
  });

  it("a follower proposes nothing", async () => {
    f = fixture({ checkpointing: true, checkpointIntervalMs: 1000 });
    f.lessor.grant(1, 60);
    f.lessor.promote(0);
    f.clock.advance(5000);
    const { cps, proposed } = scheduler(() => false);
    await cps.poll();
    expect(proposed).toEqual([]);
  });

  it("checkpointAll (before MoveLeader) covers leases shorter than the interval; a new leader restarts them from there", async () => {
    f = fixture({ checkpointing: true, checkpointIntervalMs: 5 * 60_000 });
    f.lessor.grant(1, 30);
    f.lessor.grant(2, 30);
    f.lessor.promote(0);
    f.clock.advance(11_000);
    f.lessor.renew(2); // at its full TTL again: nothing to keep
    const { cps, proposed } = scheduler(() => true);
    await cps.poll();
    expect(proposed).toEqual([]); // 30 s < 5 min: never due
    await cps.checkpointAll();
    expect(proposed).toEqual([[{ ID: 1, remaining_TTL: 19 }]]);
    f.lessor.demote();
    f.lessor.promote(500); // the next leader, extending by the election timeout
    expect(f.lessor.timeToLive(1).ttlSec).toBe(19);
    expect(f.lessor.timeToLive(2).ttlSec).toBe(30);
  });

  it("checkpointAll of 2,001 leases is three proposals; without checkpointing, none", async () => {
    f = fixture({ checkpointing: true, leaseRevokeRate: 100_000 });
    for (let id = 1; id <= 2001; id++) f.lessor.grant(id, 100);
    f.lessor.promote(0);
    f.clock.advance(2000);
    const { cps, proposed } = scheduler(() => true);
    await cps.checkpointAll();
    expect(proposed.map((b) => b.length)).toEqual([1000, 1000, 1]);
    f.tmp.cleanup();
    f = fixture({ checkpointing: false });
    f.lessor.grant(1, 100);
    f.lessor.promote(0);
    f.clock.advance(2000);
    const off = scheduler(() => true);
    await off.cps.checkpointAll();
    await off.cps.poll();
    expect(off.proposed).toEqual([]);
  });
});
