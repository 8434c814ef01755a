/**
 * Range permissions as etcd's range_perm_cache.go checks them: every role of a user contributes its
 * key permissions, merged per user into one set of disjoint key intervals for reading and one for
 * writing (READWRITE counts for both); a request is permitted when its whole key range lies inside
 * one merged interval. The merged sets are cached per user and dropped whenever a user or role
 * changes (the auth revision moves), so a revoke takes effect at the next check.
 *
 * A permission (or request) names its keys as etcd does: `rangeEnd` empty is the single key,
 * `rangeEnd` "\0" every key from `key` on (from-key), anything else the half-open range
 * [key, rangeEnd). A single key k is the interval [k, k+"\0").
 */
import { PermType, type KeyPermission } from "./types.js";

/** Half-open [begin, end); `end` null: no upper bound. */
export interface KeyInterval {
  readonly begin: Buffer;
  readonly end: Buffer | null;
}

const ZERO = Buffer.from([0]);

/** The interval a key and range end name (etcd's rules above). */
export function keyInterval(key: Uint8Array | undefined, rangeEnd: Uint8Array | undefined): KeyInterval {
  const begin = key === undefined ? Buffer.alloc(0) : Buffer.from(key.buffer, key.byteOffset, key.byteLength);
  if (rangeEnd === undefined || rangeEnd.length === 0) return { begin, end: Buffer.concat([begin, ZERO]) };
  if (rangeEnd.length === 1 && rangeEnd[0] === 0) return { begin, end: null };
  return { begin, end: Buffer.from(rangeEnd.buffer, rangeEnd.byteOffset, rangeEnd.byteLength) };
}

/** a <= b over ends, null being +infinity. */
function endLe(a: Buffer | null, b: Buffer | null): boolean {
  if (b === null) return true;
  if (a === null) return false;
  return Buffer.compare(a, b) <= 0;
}

function isEmpty(iv: KeyInterval): boolean {
  return iv.end !== null && Buffer.compare(iv.begin, iv.end) >= 0;
}

/** Disjoint, non-touching intervals in key order: the union of the intervals given. */
export class MergedIntervals {
  private readonly ivs: KeyInterval[];

  constructor(intervals: readonly KeyInterval[]) {
    const sorted = intervals.filter((iv) => !isEmpty(iv)).sort((a, b) => Buffer.compare(a.begin, b.begin));
    const out: KeyInterval[] = [];
    for (const iv of sorted) {
      const last = out[out.length - 1];
      // Overlapping or touching ([a,b) then [b,c)): one interval.
      if (last !== undefined && (last.end === null || Buffer.compare(iv.begin, last.end) <= 0)) {
        if (!endLe(iv.end, last.end)) out[out.length - 1] = { begin: last.begin, end: iv.end };
        continue;
      }
      out.push(iv);
    }
    this.ivs = out;
    for (let i = 1; i < out.length; i++) {
      const prev = out[i - 1]!;
      if (prev.end === null || Buffer.compare(prev.end, out[i]!.begin) >= 0) throw new Error("range perm cache: merged intervals overlap");
    }
  }

  get size(): number {
    return this.ivs.length;
  }

  /** Whether `q` lies wholly inside the union. An empty or inverted `q` is never covered. */
  covers(q: KeyInterval): boolean {
    if (isEmpty(q)) return false;
    // The last interval beginning at or before q.begin (binary search).
    let lo = 0;
    let hi = this.ivs.length - 1;
    let found = -1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if (Buffer.compare(this.ivs[mid]!.begin, q.begin) <= 0) {
        found = mid;
        lo = mid + 1;
      } else {
        hi = mid - 1;
      }
    }
    if (found < 0) return false;
    return endLe(q.end, this.ivs[found]!.end);
  }
}

/** One user's merged permissions. */
export interface UserPerms {
  readonly read: MergedIntervals;
  readonly write: MergedIntervals;
}

/** Merges the key permissions of a user's roles. */
export function mergePerms(perms: Iterable<KeyPermission>): UserPerms {
  const read: KeyInterval[] = [];
  const write: KeyInterval[] = [];
  for (const p of perms) {
    const iv = keyInterval(p.key, p.rangeEnd);
    if (p.permType === PermType.READ || p.permType === PermType.READWRITE) read.push(iv);
    if (p.permType === PermType.WRITE || p.permType === PermType.READWRITE) write.push(iv);
  }
  return { read: new MergedIntervals(read), write: new MergedIntervals(write) };
}

/** The per-user cache (etcd's rangePermCache). */
export class RangePermCache {
  private readonly byUser = new Map<string, UserPerms>();

  /** The user's merged permissions, computed by `compute` on a miss. */
  get(username: string, compute: () => UserPerms): UserPerms {
    let p = this.byUser.get(username);
    if (p === undefined) {
      p = compute();
      this.byUser.set(username, p);
    }
    return p;
  }

  /** Any user or role changed: every cached set may be stale. */
  clear(): void {
    this.byUser.clear();
  }

  get size(): number {
    return this.byUser.size;
  }
}

/** Whether `perms` allow `type` on the keys of (key, rangeEnd). READWRITE asks for both. */
export function isRangePermitted(perms: UserPerms, key: Uint8Array | undefined, rangeEnd: Uint8Array | undefined, type: PermType): boolean {
  const q = keyInterval(key, rangeEnd);
  switch (type) {
    case PermType.READ:
      return perms.read.covers(q);
    case PermType.WRITE:
      return perms.write.covers(q);
    case PermType.READWRITE:
      return perms.read.covers(q) && perms.write.covers(q);
  }
}
