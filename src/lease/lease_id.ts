/**
 * Lease ids: their one representation, validation of client-given ids and generation of
 * server-chosen ones.
 *
 * etcd's LeaseID is an int64. etcetera holds it exactly in one representation per value (see
 * LeaseId in types.ts): a number while it is a safe integer, a bigint beyond. The protobuf codecs
 * decode lease id fields this way (ProtoReader.int64Exact), the backend's tables read back this
 * way, and leaseIdFromInt64 turns anything else (JSON decimal strings, bigints) into it.
 *
 * Server-chosen ids are etcd's (pkg/idutil.Generator, masked positive by etcdserver's LeaseGrant):
 *
 *   | 2 bytes member id (low 16 bits) | 5 bytes unix milliseconds (low 40 bits) | 1 byte counter |
 *
 * then `& (2^63 - 1)`. The counter overflows into the clock bits on purpose (as in etcd): ids stay
 * unique across a restart as long as the member issued fewer than 256 ids per millisecond. A
 * collision with a still-living lease is caught by the generator's caller (Lessor.nextLeaseId
 * skips ids that exist) or, at worst, answered "lease already exists".
 */
import { LeaseIdOutOfRangeError } from "./errors.js";
import type { LeaseId } from "./types.js";

const INT64_MAX = 2n ** 63n - 1n;
const INT64_MIN = -(2n ** 63n);
const SUFFIX_BITS = 48n; // 40 clock + 8 counter
const CLOCK_BITS = 40n;
const COUNTER_BITS = 8n;
const SUFFIX_MASK = (1n << SUFFIX_BITS) - 1n;
const POSITIVE_MASK = INT64_MAX;

/** True for a value in LeaseId's one representation: a safe-integer number, or a bigint int64 beyond. */
export function isCanonicalLeaseId(id: unknown): id is LeaseId {
  if (typeof id === "number") return Number.isSafeInteger(id);
  if (typeof id === "bigint") return id >= INT64_MIN && id <= INT64_MAX && (id > BigInt(Number.MAX_SAFE_INTEGER) || id < -BigInt(Number.MAX_SAFE_INTEGER));
  return false;
}

/** True for an id a lease can have: any non-zero int64 (etcd grants negative ids too), in LeaseId's representation. */
export function isValidLeaseId(id: LeaseId): boolean {
  return id !== 0 && isCanonicalLeaseId(id);
}

/** An int64 as a LeaseId: a number while exact, else a bigint. Throws LeaseIdOutOfRangeError beyond int64. */
function fromBigInt(big: bigint, original: unknown): LeaseId {
  if (big > INT64_MAX || big < INT64_MIN) throw new LeaseIdOutOfRangeError(original);
  const n = Number(big);
  return Number.isSafeInteger(n) ? n : big;
}

/**
 * Converts an int64 lease id (bigint, decimal string as JSON and proto-loader's `longs: String`
 * give it, or a safe-integer number) into a LeaseId. 0 stays 0 (NoLease: "choose one for me" in
 * LeaseGrant). Throws LeaseIdOutOfRangeError for what is not an int64.
 */
export function leaseIdFromInt64(value: bigint | string | number): LeaseId {
  if (typeof value === "number") {
    if (!Number.isSafeInteger(value)) throw new LeaseIdOutOfRangeError(value);
    return value;
  }
  if (typeof value === "bigint") return fromBigInt(value, value);
  // BigInt("") is 0n and BigInt(" 1") is 1n: only a plain decimal integer is an id.
  if (!/^-?[0-9]+$/.test(value)) throw new LeaseIdOutOfRangeError(value);
  return fromBigInt(BigInt(value), value);
}

/** A lease id as a bigint (for arithmetic and bytes: etcd's bucket keys, hashes). */
export function leaseIdToBigInt(id: LeaseId): bigint {
  return typeof id === "bigint" ? id : BigInt(id);
}

/** Orders lease ids numerically (numbers and bigints compare exactly with < in JavaScript). */
export function compareLeaseIds(a: LeaseId, b: LeaseId): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** Generates unique positive lease ids for one member as etcd does (not persisted: seeded by the clock). */
export class LeaseIdGenerator {
  private readonly prefix: bigint;
  private suffix: bigint;

  constructor(memberId: bigint, wallClockMs: number) {
    if (memberId < 0n || memberId >= 2n ** 64n) throw new RangeError(`memberId must be a uint64, got ${memberId}`);
    if (!Number.isFinite(wallClockMs) || wallClockMs < 0) throw new RangeError(`wallClockMs must be a non-negative number, got ${wallClockMs}`);
    // etcd: idutil.NewGenerator(uint16(memberID), time.Now()).
    this.prefix = (memberId & 0xffffn) << SUFFIX_BITS;
    this.suffix = (BigInt(Math.floor(wallClockMs)) & ((1n << CLOCK_BITS) - 1n)) << COUNTER_BITS;
  }

  next(): LeaseId {
    // Two steps at most: the only id skipped is 0 (prefix 0 or 0x8000 and a wrapped suffix).
    for (;;) {
      this.suffix = (this.suffix + 1n) & SUFFIX_MASK;
      const id = (this.prefix | this.suffix) & POSITIVE_MASK;
      if (id === 0n) continue;
      const leaseId = fromBigInt(id, id);
      if (!isValidLeaseId(leaseId) || id < 0n) throw new Error(`lease id generator invariant violated: ${id}`);
      return leaseId;
    }
  }
}
