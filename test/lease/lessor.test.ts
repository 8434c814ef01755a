import { Registry } from "prom-client";
import { afterEach, describe, expect, it } from "vitest";
import { Status } from "../../src/grpc/status.js";
import {
  LeaseExistsError,
  LeaseIdOutOfRangeError,
  LeaseNotFoundError,
  LeaseTtlTooLargeError,
  LessorNotPrimaryError,
} from "../../src/lease/errors.js";
import { MAX_LEASE_TTL_SEC } from "../../src/lease/ttl.js";
import { toEtcdError } from "../../src/server/errors.js";
import { dec, enc, fixture, type Fixture } from "./harness.js";
import { leaseIdFromInt64, leaseIdToBigInt } from "../../src/lease/lease_id.js";
import type { LeaseId } from "../../src/lease/types.js";

let f: Fixture;
afterEach(() => f?.tmp.cleanup());

describe("grant", () => {
  it("grants a client-given id and raises short TTLs to the minimum", () => {
    f = fixture({ minLeaseTtlSec: 5 });
    expect(f.lessor.grant(42, 10)).toEqual({ id: 42, ttlSec: 10 });
    expect(f.lessor.grant(43, 2)).toEqual({ id: 43, ttlSec: 5 });
    expect(f.lessor.grant(-7, 0)).toEqual({ id: -7, ttlSec: 5 }); // int64 ids may be negative
    expect(f.lessor.exists(42)).toBe(true);
    expect(f.lessor.size).toBe(3);
  });

  it("rejects a taken id with etcd's error", () => {
    f = fixture();
    f.lessor.grant(1, 10);
    const err = catchError(() => f.lessor.grant(1, 20));
    expect(err).toBeInstanceOf(LeaseExistsError);
    expect(err.message).toBe("etcdserver: lease already exists");
    expect(toEtcdError(err).code).toBe(Status.FAILED_PRECONDITION);
    expect(f.lessor.timeToLive(1).grantedTtlSec).toBe(10);
  });

  it("rejects TTLs above MaxLeaseTTL, accepts MaxLeaseTTL itself", () => {
    f = fixture();
    const err = catchError(() => f.lessor.grant(1, MAX_LEASE_TTL_SEC + 1));
    expect(err).toBeInstanceOf(LeaseTtlTooLargeError);
    expect(err.message).toBe("etcdserver: too large lease TTL");
    expect(toEtcdError(err).code).toBe(Status.OUT_OF_RANGE);
    expect(f.lessor.exists(1)).toBe(false);
    expect(f.lessor.grant(2, MAX_LEASE_TTL_SEC).ttlSec).toBe(9_000_000_000);
  });

  it("rejects id 0 as etcd's lessor does, and ids not in LeaseId's one representation", () => {
    f = fixture();
    const zero = catchError(() => f.lessor.grant(0, 10));
    expect(zero).toBeInstanceOf(LeaseNotFoundError);
    expect(zero.message).toBe("etcdserver: requested lease not found");
    expect(toEtcdError(zero).code).toBe(Status.NOT_FOUND);
    expect(() => f.lessor.grant(2 ** 53, 10)).toThrow(LeaseIdOutOfRangeError);
    expect(() => f.lessor.grant(1.5, 10)).toThrow(LeaseIdOutOfRangeError);
    expect(() => f.lessor.grant(5n, 10)).toThrow(LeaseIdOutOfRangeError);
  });

  it("holds ids over the whole int64 range exactly, and reads them back from its table", () => {
    f = fixture();
    const ids = [9007199254740993n, 2n ** 63n - 1n, -(2n ** 63n), 9007199254740991, -5];
    for (const id of ids) f.lessor.grant(id, 60);
    expect(f.lessor.exists(9007199254740992n)).toBe(false);
    for (const id of ids) expect(f.lessor.timeToLive(id).grantedTtlSec).toBe(60);
    f.lessor.recover();
    expect([...f.lessor.leases()].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))).toEqual([-(2n ** 63n), -5, 9007199254740991, 9007199254740993n, 2n ** 63n - 1n]);
    f.lessor.revoke(2n ** 63n - 1n);
    expect(f.lessor.exists(2n ** 63n - 1n)).toBe(false);
    expect(f.lessor.exists(9007199254740993n)).toBe(true);
  });

  it("chooses etcd's unique positive int63 ids that skip existing leases", () => {
    f = fixture({ memberId: 0x1234_5678_9abcn, idSeedMs: 1_700_000_000_000 });
    const first = leaseIdToBigInt(f.lessor.nextLeaseId());
    f.lessor.grant(leaseIdFromInt64(first + 1n), 10); // the next id the generator would pick is taken
    const second = leaseIdToBigInt(f.lessor.nextLeaseId());
    expect(second).toBe(first + 2n);
    for (const id of [first, second]) {
      expect(id >> 48n).toBe(0x1abcn); // the member id's low 16 bits (0x9abc), top bit masked: positive
      expect(id > 0n && id < 2n ** 63n).toBe(true);
    }
  });
});

describe("expiry and revoke", () => {
  it("hands an expired lease out for revoke, and revoke deletes its keys in one call, sorted", () => {
    f = fixture();
    f.lessor.promote(0);
    f.lessor.grant(7, 10);
    f.lessor.grant(8, 60);
    for (const k of ["b", "a", "c\u00ff", "c"]) f.lessor.attach(7, enc(k));
    f.lessor.attach(8, enc("other"));

    f.clock.advance(9_999);
    expect(f.lessor.expiredLeases()).toEqual([]);
    f.clock.advance(1);
    expect(f.lessor.expiredLeases()).toEqual([7]);

    f.lessor.revoke(7);
    expect(f.deleter.calls).toEqual([["a", "b", "c", "c\u00ff"]]);
    expect(f.lessor.exists(7)).toBe(false);
    expect(f.lessor.timeToLive(7)).toEqual({ id: 7, ttlSec: -1, grantedTtlSec: 0, keys: [] });
    f.clock.advance(10_000);
    expect(f.lessor.expiredLeases()).toEqual([]); // revoked: never handed out again
    expect(f.lessor.exists(8)).toBe(true);
  });

  it("does not call the deleter for a lease without keys, nor for detached keys", () => {
    f = fixture();
    f.lessor.grant(1, 10);
    f.lessor.attach(1, enc("k"));
    f.lessor.detach(1, enc("k"));
    f.lessor.revoke(1);
    expect(f.deleter.calls).toEqual([]);
  });

  it("revoke of an unknown lease is not found", () => {
    f = fixture();
    expect(() => f.lessor.revoke(99)).toThrow("etcdserver: requested lease not found");
  });

  it("keeps the lease and its keys when the store fails to delete them", () => {
    f = fixture();
    f.lessor.grant(1, 10);
    f.lessor.attach(1, enc("k"));
    f.deleter.failNext = true;
    expect(() => f.lessor.revoke(1)).toThrow("injected store failure");
    expect(f.lessor.timeToLive(1, { keys: true }).keys.map(dec)).toEqual(["k"]);
    f.lessor.revoke(1);
    expect(f.deleter.calls).toEqual([["k"]]);
  });

  it("re-hands a lease whose revoke did not happen after the retry interval", () => {
    f = fixture({ expiredLeaseRetryIntervalMs: 3000 });
    f.lessor.promote(0);
    f.lessor.grant(1, 5);
    f.clock.advance(5000);
    expect(f.lessor.expiredLeases()).toEqual([1]);
    f.clock.advance(2999);
    expect(f.lessor.expiredLeases()).toEqual([]);
    f.clock.advance(1);
    expect(f.lessor.expiredLeases()).toEqual([1]);
  });

  it("attach to an unknown lease throws not found; detach from one is a no-op", () => {
    f = fixture();
    expect(() => f.lessor.attach(5, enc("k"))).toThrow(LeaseNotFoundError);
    expect(() => f.lessor.detach(5, enc("k"))).not.toThrow();
  });
});

describe("keep-alive", () => {
  it("prevents expiry and returns the granted TTL", () => {
    f = fixture();
    f.lessor.promote(0);
    f.lessor.grant(1, 5);
    for (let i = 0; i < 10; i++) {
      f.clock.advance(4000);
      expect(f.lessor.expiredLeases()).toEqual([]);
      expect(f.lessor.renew(1)).toBe(5);
    }
    f.clock.advance(4999);
    expect(f.lessor.expiredLeases()).toEqual([]);
    f.clock.advance(1);
    expect(f.lessor.expiredLeases()).toEqual([1]);
  });

  it("unknown or expired lease: renew is not found, the keep-alive stream answers TTL 0", () => {
    f = fixture();
    f.lessor.promote(0);
    expect(() => f.lessor.renew(3)).toThrow(LeaseNotFoundError);
    expect(f.lessor.keepAlive(3)).toBe(0);
    f.lessor.grant(3, 2);
    expect(f.lessor.keepAlive(3)).toBe(2);
    f.clock.advance(2000);
    expect(() => f.lessor.renew(3)).toThrow(LeaseNotFoundError);
    expect(f.lessor.keepAlive(3)).toBe(0);
    expect(f.lessor.expiredLeases()).toEqual([3]); // still to be revoked
  });

  it("is refused on a member that is not the leader", () => {
    f = fixture();
    f.lessor.grant(1, 10);
    const err = catchError(() => f.lessor.renew(1));
    expect(err).toBeInstanceOf(LessorNotPrimaryError);
    expect(() => f.lessor.keepAlive(1)).toThrow(LessorNotPrimaryError);
  });
});

describe("TimeToLive and Leases", () => {
  it("reports remaining seconds truncated, the granted TTL and sorted keys", () => {
    f = fixture();
    f.lessor.promote(0);
    f.lessor.grant(9, 30);
    f.lessor.attach(9, enc("zeta"));
    f.lessor.attach(9, enc("alpha"));
    f.clock.advance(10_500);
    expect(f.lessor.timeToLive(9)).toEqual({ id: 9, ttlSec: 19, grantedTtlSec: 30, keys: [] });
    const withKeys = f.lessor.timeToLive(9, { keys: true });
    expect(withKeys.keys.map(dec)).toEqual(["alpha", "zeta"]);
  });

  it("unknown lease: TTL -1, not an error", () => {
    f = fixture();
    expect(f.lessor.timeToLive(12345, { keys: true })).toEqual({ id: 12345, ttlSec: -1, grantedTtlSec: 0, keys: [] });
  });

  it("lists leases soonest expiry first", () => {
    f = fixture();
    f.lessor.promote(0);
    f.lessor.grant(1, 30);
    f.lessor.grant(2, 10);
    f.lessor.grant(3, 20);
    expect(f.lessor.leases()).toEqual([2, 3, 1]);
    f.lessor.revoke(3);
    expect(f.lessor.leases()).toEqual([2, 1]);
  });
});

describe("leadership", () => {
  it("a non-leader never expires leases", () => {
    f = fixture();
    f.lessor.grant(1, 5);
    f.clock.advance(3_600_000);
    expect(f.lessor.expiredLeases()).toEqual([]);
    expect(f.lessor.timeToLive(1).ttlSec).toBe(5);
  });

  it("promote restarts every lease's clock from now plus the extension", () => {
    f = fixture();
    f.lessor.grant(1, 10);
    f.clock.advance(100_000); // time a follower spent: irrelevant
    f.lessor.promote(1500);
    expect(f.lessor.timeToLive(1).ttlSec).toBe(11);
    f.clock.advance(11_499);
    expect(f.lessor.expiredLeases()).toEqual([]);
    f.clock.advance(1);
    expect(f.lessor.expiredLeases()).toEqual([1]);
  });

  it("demote stops expiry and sets TTLs to forever; a new promote extends again", () => {
    f = fixture();
    f.lessor.promote(0);
    f.lessor.grant(1, 5);
    f.clock.advance(4000);
    f.lessor.demote();
    expect(f.lessor.isPrimary).toBe(false);
    f.clock.advance(60_000);
    expect(f.lessor.expiredLeases()).toEqual([]);
    expect(() => f.lessor.renew(1)).toThrow(LessorNotPrimaryError);
    f.lessor.promote(1000);
    f.clock.advance(5999);
    expect(f.lessor.expiredLeases()).toEqual([]);
    f.clock.advance(1);
    expect(f.lessor.expiredLeases()).toEqual([1]);
  });

  it("promote spreads leases that would expire in the same second (etcd's revoke-rate rule)", () => {
    const rate = 1000;
    const target = (3 * rate) / 4;
    f = fixture({ leaseRevokeRate: rate });
    const n = 10_000;
    for (let id = 1; id <= n; id++) f.lessor.grant(id, 10);
    f.lessor.promote(2000);
    const start = f.clock.ms;
    const remaining = f.lessor.leases().map((id) => f.lessor.timeToLive(id));
    // Nothing expires before TTL + extension; the first window holds exactly the target.
    expect(Math.min(...remaining.map((r) => r.ttlSec))).toBe(12);
    // Walk time forward in one-second steps: never more than the target expire in one second.
    let handedOut = 0;
    let seconds = 0;
    f.clock.ms = start + 12_000 - 1;
    while (handedOut < n) {
      f.clock.advance(1000);
      seconds++;
      const ids = f.lessor.expiredLeases(n);
      expect(ids.length).toBeLessThanOrEqual(target + 1);
      for (const id of ids) f.lessor.revoke(id);
      handedOut += ids.length;
      expect(seconds).toBeLessThan(100);
    }
    expect(seconds).toBeGreaterThanOrEqual(Math.ceil(n / (target + 1)));
  });

  it("promote does not spread fewer leases than the revoke rate", () => {
    f = fixture({ leaseRevokeRate: 1000 });
    for (let id = 1; id <= 999; id++) f.lessor.grant(id, 10);
    f.lessor.promote(0);
    f.clock.advance(10_000);
    expect(f.lessor.expiredLeases(10_000)).toHaveLength(999);
  });
});

describe("expiry storm", () => {
  it("10,000 leases expiring at once are handed out in bounded, disjoint batches", () => {
    f = fixture({ leaseRevokeRate: 1000, expiredLeaseRetryIntervalMs: 3000 });
    f.lessor.promote(0);
    const n = 10_000;
    for (let id = 1; id <= n; id++) f.lessor.grant(id, 5);
    f.clock.advance(5000);
    const seen = new Set<LeaseId>();
    let batches = 0;
    for (;;) {
      const ids = f.lessor.expiredLeases();
      if (ids.length === 0) break;
      expect(ids.length).toBeLessThanOrEqual(500); // leaseRevokeRate / 2 per poll
      for (const id of ids) {
        expect(seen.has(id)).toBe(false);
        seen.add(id);
      }
      batches++;
      f.clock.advance(1); // polls within the retry interval
    }
    expect(seen.size).toBe(n);
    expect(batches).toBe(20);
    expect(f.lessor.expiredLeases(7)).toEqual([]);
    // A caller-chosen bound is honoured too, once the retry interval passes.
    f.clock.advance(3000);
    expect(f.lessor.expiredLeases(7)).toHaveLength(7);
  });
});

describe("checkpoints", () => {
  it("checkpoints remaining TTLs of long leases, and a restarted leader resumes from them", () => {
    f = fixture({ checkpointing: true, checkpointIntervalMs: 60_000 });
    f.lessor.promote(0);
    f.lessor.grant(1, 300);
    f.lessor.grant(2, 30); // shorter than the interval: never checkpointed
    expect(f.lessor.dueCheckpoints()).toEqual([]);
    f.clock.advance(60_000);
    const due = f.lessor.dueCheckpoints();
    expect(due).toEqual([{ id: 1, remainingTtlSec: 240 }]);
    for (const cp of due) f.lessor.checkpoint(cp.id, cp.remainingTtlSec); // applied through Raft
    f.lessor.checkpoint(99, 5); // unknown: ignored

    const restarted = f.restart({ checkpointing: true, checkpointIntervalMs: 60_000 });
    expect(restarted.timeToLive(1)).toMatchObject({ ttlSec: 240, grantedTtlSec: 300 });
    restarted.promote(1000);
    expect(restarted.timeToLive(1).ttlSec).toBe(241);
  });

  it("a renew queues a clear of the checkpointed remaining TTL", () => {
    f = fixture({ checkpointing: true, checkpointIntervalMs: 60_000 });
    f.lessor.grant(1, 300);
    f.lessor.checkpoint(1, 100);
    f.lessor.promote(0);
    expect(f.lessor.timeToLive(1).ttlSec).toBe(100);
    expect(f.lessor.renew(1)).toBe(300);
    expect(f.lessor.timeToLive(1).ttlSec).toBe(300);
    expect(f.lessor.dueCheckpoints()).toEqual([{ id: 1, remainingTtlSec: 0 }]);
    expect(f.lessor.dueCheckpoints()).toEqual([]);
  });

  it("without checkpointing nothing is due", () => {
    f = fixture();
    f.lessor.promote(0);
    f.lessor.grant(1, 3000);
    f.clock.advance(600_000);
    expect(f.lessor.dueCheckpoints()).toEqual([]);
  });
});

describe("persistence", () => {
  it("restart keeps leases and TTLs; the store re-attaches keys; revoked leases stay gone", () => {
    f = fixture();
    f.lessor.promote(0);
    f.lessor.grant(1, 10);
    f.lessor.grant(2, 20);
    f.lessor.grant(3, 30);
    f.lessor.attach(1, enc("a"));
    f.lessor.revoke(2);

    const lessor = f.restart();
    expect(lessor.isPrimary).toBe(false);
    expect(lessor.leases().sort()).toEqual([1, 3]);
    expect(lessor.timeToLive(1).grantedTtlSec).toBe(10);
    expect(lessor.timeToLive(3).grantedTtlSec).toBe(30);
    // Recovery: the MVCC store re-attaches the leased keys it finds.
    lessor.attach(1, enc("a"));
    lessor.promote(0);
    f.clock.advance(10_000);
    expect(lessor.expiredLeases()).toEqual([1]);
    lessor.revoke(1);
    expect(f.deleter.calls).toEqual([["a"]]);
    expect(f.restart().leases()).toEqual([3]);
  });

  it("restart raises stored TTLs to a larger minimum TTL", () => {
    f = fixture({ minLeaseTtlSec: 1 });
    f.lessor.grant(1, 1);
    expect(f.restart({ minLeaseTtlSec: 4 }).timeToLive(1).grantedTtlSec).toBe(4);
  });

  it("recover reloads from the database and drops keys for the store to re-attach", () => {
    f = fixture();
    f.lessor.grant(1, 10);
    f.lessor.attach(1, enc("a"));
    f.tmp.db.prepare("INSERT INTO lease (id, ttl, remaining_ttl) VALUES (?, ?, ?)").run(5, 50, 0);
    f.lessor.recover();
    expect(f.lessor.leases().sort()).toEqual([1, 5]);
    expect(f.lessor.timeToLive(1, { keys: true }).keys).toEqual([]);
  });

  it("reports each row it writes to the backend's batch counter, and writes inside the caller's transaction", () => {
    let writes = 0;
    f = fixture({ noteWrites: (n) => (writes += n) });
    f.lessor.grant(1, 10);
    f.lessor.checkpoint(1, 5);
    f.lessor.revoke(1);
    expect(writes).toBe(3);
    // A rolled-back backend transaction takes the lease write with it.
    f.tmp.db.exec("BEGIN");
    f.lessor.grant(2, 10);
    f.tmp.db.exec("ROLLBACK");
    expect(f.tmp.db.prepare("SELECT COUNT(*) AS n FROM lease").get()).toEqual({ n: 0 });
  });

  it("a corrupt row is an error, not a wrong lease", () => {
    f = fixture();
    f.tmp.db.prepare("INSERT INTO lease (id, ttl, remaining_ttl) VALUES (?, ?, ?)").run(5, 50, -3);
    expect(() => f.restart()).toThrow(/lease table corrupt/);
  });
});

describe("metrics", () => {
  it("counts with etcd's metric names", async () => {
    const registry = new Registry();
    f = fixture({ registry });
    f.lessor.promote(0);
    f.lessor.grant(1, 10);
    f.lessor.grant(2, 10);
    f.lessor.renew(1);
    f.lessor.revoke(2);
    const text = await registry.metrics();
    expect(text).toContain("etcd_debugging_lease_granted_total 2");
    expect(text).toContain("etcd_debugging_lease_revoked_total 1");
    expect(text).toContain("etcd_debugging_lease_renewed_total 1");
    expect(text).toContain("etcd_debugging_lease_ttl_total_count 2");
    // A second lessor on the same registry (a restart in-process) reuses the metrics.
    const again = f.restart({ registry });
    again.grant(3, 10);
    expect(await registry.metrics()).toContain("etcd_debugging_lease_granted_total 3");
  });
});

function catchError(fn: () => unknown): Error {
  try {
    fn();
  } catch (err) {
    if (err instanceof Error) return err;
    throw new Error(`non-Error thrown: ${String(err)}`);
  }
  throw new Error("expected an error");
}
