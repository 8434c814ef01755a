import { describe, expect, it } from "vitest";
import { LeaseIdOutOfRangeError } from "../../src/lease/errors.js";
import { LeaseIdGenerator, compareLeaseIds, isCanonicalLeaseId, isValidLeaseId, leaseIdFromInt64, leaseIdToBigInt } from "../../src/lease/lease_id.js";
import { DEFAULT_MIN_LEASE_TTL_SEC, minLeaseTtlSec } from "../../src/lease/ttl.js";

describe("LeaseIdGenerator", () => {
  it("gives etcd's idutil ids: member low 16 bits << 48 | unix ms low 40 bits << 8, +1 each, masked positive", () => {
    const gen = new LeaseIdGenerator(0x8e9e05c52164694dn, 1_700_000_000_123);
    const ms = 1_700_000_000_123n & ((1n << 40n) - 1n);
    const base = ((0x694dn << 48n) | (ms << 8n)) & (2n ** 63n - 1n);
    expect(gen.next()).toBe(base + 1n);
    expect(gen.next()).toBe(base + 2n);
  });

  it("gives unique positive int63 ids, in order", () => {
    const gen = new LeaseIdGenerator(0xabcdefn, 1_700_000_000_123);
    let prev: number | bigint = 0;
    let outOfOrder = 0;
    for (let i = 0; i < 100_000; i++) {
      const id = gen.next();
      if (!(id > prev)) outOfOrder++;
      expect(isCanonicalLeaseId(id)).toBe(true);
      prev = id;
    }
    expect(outOfOrder).toBe(0);
    expect(prev > 0 && prev <= 2n ** 63n - 1n).toBe(true);
  });

  it("masks the member's top bit: ids stay positive for a member id with bit 15 set", () => {
    const gen = new LeaseIdGenerator(0xffffn, 2 ** 40 - 1);
    for (let i = 0; i < 300; i++) {
      const id = gen.next();
      expect(id > 0).toBe(true);
      expect(leaseIdToBigInt(id) >> 48n).toBe(0x7fffn);
    }
  });

  it("members with different low id bits, and a restart 1 ms later, do not collide", () => {
    const a = new LeaseIdGenerator(1n, 5_000);
    const b = new LeaseIdGenerator(2n, 5_000);
    const idsA = new Set(Array.from({ length: 1000 }, () => a.next()));
    for (let i = 0; i < 1000; i++) expect(idsA.has(b.next())).toBe(false);
    // A restart one millisecond later starts 256 ids further: beyond the first 256 issued before.
    const before = new LeaseIdGenerator(7n, 10_000);
    const first256 = Array.from({ length: 256 }, () => before.next());
    const after = new LeaseIdGenerator(7n, 10_001);
    expect(after.next() > (first256[255] ?? Infinity)).toBe(true);
  });

  it("never returns 0, even when the suffix wraps with member bits 0", () => {
    const gen = new LeaseIdGenerator(0n, 2 ** 40 - 1);
    for (let i = 0; i < 300; i++) expect(gen.next()).not.toBe(0);
  });
});

describe("lease id representation", () => {
  it("accepts every non-zero int64, a number while safe and a bigint beyond", () => {
    expect(isValidLeaseId(1)).toBe(true);
    expect(isValidLeaseId(-1)).toBe(true);
    expect(isValidLeaseId(0)).toBe(false);
    expect(isValidLeaseId(2 ** 53)).toBe(false); // not exact as a number
    expect(isValidLeaseId(1.5)).toBe(false);
    expect(isValidLeaseId(2n ** 53n)).toBe(true);
    expect(isValidLeaseId(5n)).toBe(false); // a safe id is the number: one representation per value
    expect(leaseIdFromInt64(123n)).toBe(123);
    expect(leaseIdFromInt64("-42")).toBe(-42);
    expect(leaseIdFromInt64("0")).toBe(0);
    expect(leaseIdFromInt64(String(Number.MAX_SAFE_INTEGER))).toBe(Number.MAX_SAFE_INTEGER);
    expect(leaseIdFromInt64("9007199254740993")).toBe(9007199254740993n);
    expect(leaseIdFromInt64("9223372036854775807")).toBe(2n ** 63n - 1n);
    expect(leaseIdFromInt64("-9223372036854775808")).toBe(-(2n ** 63n));
    expect(leaseIdToBigInt(42)).toBe(42n);
    expect(compareLeaseIds(9007199254740993n, 9007199254740991)).toBe(1);
  });

  it("rejects what is not an int64 with an OutOfRange error", () => {
    expect(() => leaseIdFromInt64("9223372036854775808")).toThrow(LeaseIdOutOfRangeError);
    expect(() => leaseIdFromInt64(2n ** 64n)).toThrow(LeaseIdOutOfRangeError);
    expect(() => leaseIdFromInt64(2 ** 53)).toThrow(LeaseIdOutOfRangeError);
    expect(() => leaseIdFromInt64("not a number")).toThrow(LeaseIdOutOfRangeError);
    expect(() => leaseIdFromInt64("")).toThrow(LeaseIdOutOfRangeError);
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
