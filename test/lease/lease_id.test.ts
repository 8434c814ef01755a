import { describe, expect, it } from "vitest";
import { LeaseIdOutOfRangeError } from "../../src/lease/errors.js";
import { LEASE_ID_MAX, LeaseIdGenerator, isValidLeaseId, leaseIdFromInt64 } from "../../src/lease/lease_id.js";
import { DEFAULT_MIN_LEASE_TTL_SEC, minLeaseTtlSec } from "../../src/lease/ttl.js";

describe("LeaseIdGenerator", () => {
  it("gives unique positive ids below 2^53, in order", () => {
    const gen = new LeaseIdGenerator(0xabcdefn, 1_700_000_000_123);
    let prev = 0;
    let outOfOrder = 0;
    for (let i = 0; i < 100_000; i++) {
      const id = gen.next();
      if (!(id > prev)) outOfOrder++;
      prev = id;
    }
    expect(outOfOrder).toBe(0);
    expect(prev).toBeLessThanOrEqual(LEASE_ID_MAX);
  });

  it("members with different id bytes, and a restart 1 ms later, do not collide", () => {
    const a = new LeaseIdGenerator(1n, 5_000);
    const b = new LeaseIdGenerator(2n, 5_000);
    const idsA = new Set(Array.from({ length: 1000 }, () => a.next()));
    for (let i = 0; i < 1000; i++) expect(idsA.has(b.next())).toBe(false);
    // A restart one millisecond later starts 256 ids further: beyond the first 256 issued before.
    const before = new LeaseIdGenerator(7n, 10_000);
    const first256 = Array.from({ length: 256 }, () => before.next());
    const after = new LeaseIdGenerator(7n, 10_001);
    expect(after.next()).toBeGreaterThan(first256[255] ?? Infinity);
  });

  it("never returns 0, even when the suffix wraps with member byte 0", () => {
    const gen = new LeaseIdGenerator(0n, 2 ** 37 - 1);
    for (let i = 0; i < 300; i++) expect(gen.next()).not.toBe(0);
  });
});

describe("lease id validation", () => {
  it("accepts non-zero safe integers, converts int64 forms", () => {
    expect(isValidLeaseId(1)).toBe(true);
    expect(isValidLeaseId(-1)).toBe(true);
    expect(isValidLeaseId(0)).toBe(false);
    expect(isValidLeaseId(2 ** 53)).toBe(false);
    expect(leaseIdFromInt64(123n)).toBe(123);
    expect(leaseIdFromInt64("-42")).toBe(-42);
    expect(leaseIdFromInt64("0")).toBe(0);
    expect(leaseIdFromInt64(String(LEASE_ID_MAX))).toBe(LEASE_ID_MAX);
  });

  it("rejects int64 ids beyond 2^53 with an OutOfRange error", () => {
    expect(() => leaseIdFromInt64("7587866546281539105")).toThrow(LeaseIdOutOfRangeError);
    expect(() => leaseIdFromInt64(2n ** 53n)).toThrow(LeaseIdOutOfRangeError);
    expect(() => leaseIdFromInt64("not a number")).toThrow(LeaseIdOutOfRangeError);
  });
});

describe("minimum TTL", () => {
  it("follows etcd's ceil(((3 * electionTicks) / 2) * heartbeat) with integer division", () => {
    expect(minLeaseTtlSec(10, 100)).toBe(2); // 1.5 s
    expect(DEFAULT_MIN_LEASE_TTL_SEC).toBe(2);
    expect(minLeaseTtlSec(5, 100)).toBe(1); // 7 * 100 ms
    expect(minLeaseTtlSec(10, 1000)).toBe(15);
    expect(minLeaseTtlSec(3, 500)).toBe(2); // 4 * 500 ms
  });
});
