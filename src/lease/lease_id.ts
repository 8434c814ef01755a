/**
 * Lease ids: validation of client-given ids and generation of server-chosen ones.
 *
 * etcd picks a lease id from its request id generator (pkg/idutil): | 2 bytes member | 5 bytes
 * millisecond clock | 1 byte counter |, masked positive. etcetera keeps the same idea in 53 bits so
 * that ids are exact JavaScript numbers:
 *
 *   | 8 bits member | 37 bits millisecond clock | 8 bits counter |
 *
 * The counter overflows into the clock bits on purpose (as in etcd): ids stay unique across a
 * restart as long as the member issued fewer than 256 ids per millisecond. The 37-bit clock wraps
 * every ~4.3 years; a collision with a still-living lease is then caught by the generator's caller
 * (Lessor.nextLeaseId skips ids that exist) or, at worst, answered "lease already exists".
 */
import { LeaseIdOutOfRangeError } from "./errors.js";
import type { LeaseId } from "./types.js";

const COUNTER_BITS = 8;
const CLOCK_BITS = 37;
const SUFFIX_SPAN = 2 ** (CLOCK_BITS + COUNTER_BITS); // 2^45
const MEMBER_SPAN = 2 ** 8;

/** The largest id etcetera accepts or generates: 2^53 - 1. */
export const LEASE_ID_MAX = Number.MAX_SAFE_INTEGER;

/** True for an id etcetera can hold: a non-zero safe integer (negative ids are int64s too). */
export function isValidLeaseId(id: number): boolean {
  return Number.isSafeInteger(id) && id !== 0;
}

/**
 * Converts an int64 lease id from the wire (bigint, decimal string as proto-loader's `longs: String`
 * gives, or number) into a LeaseId. 0 stays 0 (NoLease: "choose one for me" in LeaseGrant).
 * Throws LeaseIdOutOfRangeError beyond 2^53 - 1 in magnitude.
 */
export function leaseIdFromInt64(value: bigint | string | number): LeaseId {
  let big: bigint;
  try {
    big = typeof value === "bigint" ? value : BigInt(value);
  } catch {
    throw new LeaseIdOutOfRangeError(value);
  }
  const max = BigInt(LEASE_ID_MAX);
  if (big > max || big < -max) throw new LeaseIdOutOfRangeError(value);
  return Number(big);
}

/** Folds a member id (a uint64) into 8 bits by xor-ing its bytes: member ids are hashes. */
function memberByte(memberId: bigint): number {
  if (memberId < 0n || memberId >= 2n ** 64n) throw new RangeError(`memberId must be a uint64, got ${memberId}`);
  let folded = 0;
  let rest = memberId;
  while (rest > 0n) {
    folded ^= Number(rest & 0xffn);
    rest >>= 8n;
  }
  return folded;
}

/** Generates unique positive lease ids below 2^53 for one member (not persisted: seeded by the clock). */
export class LeaseIdGenerator {
  private readonly prefix: number;
  private suffix: number;

  constructor(memberId: bigint, wallClockMs: number) {
    if (!Number.isFinite(wallClockMs) || wallClockMs < 0) throw new RangeError(`wallClockMs must be a non-negative number, got ${wallClockMs}`);
    this.prefix = memberByte(memberId) * SUFFIX_SPAN;
    this.suffix = ((Math.floor(wallClockMs) % 2 ** CLOCK_BITS) * 2 ** COUNTER_BITS) % SUFFIX_SPAN;
  }

  next(): LeaseId {
    // Two steps at most: the only id skipped is 0 (member byte 0 and a wrapped suffix).
    for (;;) {
      this.suffix = (this.suffix + 1) % SUFFIX_SPAN;
      const id = this.prefix + this.suffix;
      if (id === 0) continue;
      if (!Number.isSafeInteger(id) || id < 0 || id >= MEMBER_SPAN * SUFFIX_SPAN) {
        throw new Error(`lease id generator invariant violated: ${id}`);
      }
      return id;
    }
  }
}
