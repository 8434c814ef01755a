/**
 * Random well-formed requests for every RPC of etcd's API, in @grpc/proto-loader's object form
 * (snake_case, bytes as Buffer, int64 as decimal strings, enums as numbers, out-of-range numbers
 * included). Values that must name server state the generator cannot know (a granted lease id, the
 * member id) are placeholders — "@lease:K" for the K-th lease this run granted, "@member" for the
 * member's id — resolved per target, so the same seed means the same requests on etcetera and etcd.
 */
import type { Rng } from "./rng.js";

export type ServiceKey = "kv" | "lease" | "cluster" | "maintenance" | "lock" | "election";

export type RpcOp =
  | { readonly kind: "unary"; readonly service: ServiceKey; readonly method: string; readonly request: Record<string, unknown> }
  /** A Watch stream: these requests in order, then half-close. */
  | { readonly kind: "watch"; readonly requests: readonly Record<string, unknown>[] }
  /** A LeaseKeepAlive stream: one request per id, then half-close. */
  | { readonly kind: "keepalive"; readonly ids: readonly string[] }
  /** An Observe stream (Election), read until its deadline. */
  | { readonly kind: "observe"; readonly name: Buffer };

export interface RpcGenOptions {
  /** --max-request-bytes of the targets (keys and values up to and just past it). */
  readonly maxRequestBytes: number;
  /**
   * Leave out what crashes the reference etcd 3.4.23: an Alarm with an undefined action (nil
   * AlarmResponse) and a sorted Range with an undefined sort target (nil sorter).
   */
  readonly referenceSafe: boolean;
}

const KEYSPACE = 48;
const INT64_EDGES = ["0", "-1", "1", "-9223372036854775808", "9223372036854775807", "9007199254740993", "4294967296"];

/** Txn depth etcd allows before "too many operations" is not the limit: nested txns are allowed. */
const TXN_DEPTH_MAX = 3;

export class RpcGen {
  private leasesGranted = 0;
  /** Grants (by index) whose TTL outlives any run: only these are attached to keys, so no key of
   * the run expires at a moment that differs between the targets. */
  private readonly longLeases: number[] = [];

  constructor(
    private readonly rng: Rng,
    private readonly opts: RpcGenOptions,
  ) {}

  // ---- values ----

  private key(): Buffer {
    const r = this.rng;
    return r.weighted<() => Buffer>([
      [70, () => Buffer.from(`fz/k${String(r.int(KEYSPACE)).padStart(2, "0")}`)],
      [8, () => Buffer.alloc(0)],
      [10, () => r.bytes(r.between(1, 24))],
      [5, () => Buffer.from([0])],
      [4, () => Buffer.from(`fz/${"x".repeat(r.between(100, 4000))}`)],
      // Up to the request limit and just past it: "etcdserver: request is too large".
      [1, () => Buffer.alloc(this.opts.maxRequestBytes - r.between(0, 64), 0x61)],
      [1, () => Buffer.alloc(this.opts.maxRequestBytes + r.between(1, 64), 0x62)],
    ])();
  }

  private rangeEnd(key: Buffer): Buffer | undefined {
    const r = this.rng;
    return r.weighted<() => Buffer | undefined>([
      [45, () => undefined],
      [15, () => Buffer.from([0])],
      [20, () => prefixEnd(key)],
      [10, () => Buffer.from(`fz/k${String(r.int(KEYSPACE)).padStart(2, "0")}`)],
      [10, () => r.bytes(r.between(1, 8))],
    ])();
  }

  private value(): Buffer {
    const r = this.rng;
    return r.weighted<() => Buffer>([
      [80, () => r.bytes(r.size(200))],
      [15, () => Buffer.alloc(0)],
      [4, () => Buffer.alloc(r.between(10_000, 200_000), 0x76)],
      [1, () => Buffer.alloc(this.opts.maxRequestBytes + r.between(1, 100), 0x77)],
    ])();
  }

  private int64(smallMax = 50): string {
    const r = this.rng;
    return r.bool(0.25) ? r.pick(INT64_EDGES) : String(r.bool(0.15) ? -r.between(1, smallMax) : r.between(0, smallMax));
  }

  private revision(): string {
    const r = this.rng;
    return r.weighted<() => string>([
      [50, () => "0"],
      [30, () => String(r.between(1, 400))],
      [10, () => String(-r.between(1, 5))],
      [10, () => r.pick(["1000000", "9223372036854775807", "-9223372036854775808"])],
    ])();
  }

  private enumValue(defined: number, outOfRange: readonly number[] = [-1, defined + 3, 2 ** 31 - 1]): number {
    return this.rng.bool(0.88) ? this.rng.int(defined) : this.rng.pick(outOfRange);
  }

  /** A client-chosen lease id: small, anywhere in the positive int63 range, or near 2^53 and 2^63. */
  private explicitLeaseId(): string {
    const r = this.rng;
    return r.weighted<() => string>([
      [30, () => String(r.between(1, 2 ** 40))],
      // 63 random bits (top bit clear: positive), never 0.
      [50, () => String(((BigInt(r.u32() & 0x7fffffff) << 32n) | BigInt(r.u32())) || 1n)],
      [20, () => r.pick(["9007199254740991", "9007199254740992", "9007199254740993", "9223372036854775806", "9223372036854775807"])],
    ])();
  }

  private leaseId(): string {
    const r = this.rng;
    if (this.longLeases.length > 0 && r.bool(0.6)) return `@lease:${r.pick(this.longLeases)}`;
    return r.weighted<() => string>([
      [40, () => "0"],
      [40, () => String(r.between(1, 2 ** 40))],
      [20, () => r.pick(INT64_EDGES)],
    ])();
  }

  // ---- requests ----

  range(): Record<string, unknown> {
    const r = this.rng;
    const key = this.key();
    return {
      key,
      range_end: this.rangeEnd(key),
      limit: r.bool(0.5) ? "0" : this.int64(10),
      revision: this.revision(),
      // Out-of-range sort enums crash etcd 3.4.23 (nil sorter in applierV3backend.Range): reference-safe runs leave them out.
      sort_order: this.opts.referenceSafe ? r.int(3) : this.enumValue(3),
      sort_target: this.opts.referenceSafe ? r.int(5) : this.enumValue(5),
      serializable: r.bool(0.3),
      keys_only: r.bool(0.2),
      count_only: r.bool(0.15),
      min_mod_revision: r.bool(0.85) ? "0" : this.revision(),
      max_mod_revision: r.bool(0.85) ? "0" : this.revision(),
      min_create_revision: r.bool(0.85) ? "0" : this.revision(),
      max_create_revision: r.bool(0.85) ? "0" : this.revision(),
    };
  }

  put(): Record<string, unknown> {
    const r = this.rng;
    return {
      key: this.key(),
      value: this.value(),
      lease: r.bool(0.7) ? "0" : this.leaseId(),
      prev_kv: r.bool(0.3),
      ignore_value: r.bool(0.08),
      ignore_lease: r.bool(0.08),
    };
  }

  deleteRange(): Record<string, unknown> {
    const key = this.key();
    return { key, range_end: this.rangeEnd(key), prev_kv: this.rng.bool(0.3) };
  }

  private compare(): Record<string, unknown> {
    const r = this.rng;
    const target = this.enumValue(5);
    const key = this.key();
    const c: Record<string, unknown> = { result: this.enumValue(4), target, key, range_end: r.bool(0.8) ? undefined : this.rangeEnd(key) };
    // The target_union member usually matches the target; sometimes it does not.
    const member = r.bool(0.85) ? target : r.int(5);
    if (member === 0) c.version = this.int64(5);
    else if (member === 1) c.create_revision = this.revision();
    else if (member === 2) c.mod_revision = this.revision();
    else if (member === 3) c.value = this.value();
    else c.lease = this.leaseId();
    return c;
  }

  private requestOp(depth: number): Record<string, unknown> {
    const r = this.rng;
    const kinds: [number, string][] = [
      [35, "request_range"],
      [35, "request_put"],
      [20, "request_delete_range"],
    ];
    if (depth < TXN_DEPTH_MAX) kinds.push([10, "request_txn"]);
    const kind = r.weighted(kinds);
    const body = kind === "request_range" ? this.range() : kind === "request_put" ? this.put() : kind === "request_delete_range" ? this.deleteRange() : this.txn(depth + 1);
    return { [kind]: body };
  }

  txn(depth = 0): Record<string, unknown> {
    const r = this.rng;
    const ops = (): Record<string, unknown>[] => {
      // Mostly few ops; sometimes right at or past --max-txn-ops (128).
      const n = r.weighted<number>([
        [85, r.between(0, 4)],
        [10, r.between(5, 20)],
        [5, r.pick([128, 129, 200])],
      ]);
      return Array.from({ length: n }, () => this.requestOp(depth));
    };
    return { compare: Array.from({ length: r.between(0, 3) }, () => this.compare()), success: ops(), failure: ops() };
  }

  compact(): Record<string, unknown> {
    return { revision: this.revision(), physical: this.rng.bool(0.2) };
  }

  private watchCreate(): Record<string, unknown> {
    const r = this.rng;
    const key = this.key();
    return {
      create_request: {
        key,
        range_end: this.rangeEnd(key),
        start_revision: r.bool(0.5) ? "0" : this.revision(),
        progress_notify: r.bool(0.2),
        filters: r.bool(0.8) ? [] : [this.enumValue(2, [5, -1])],
        prev_kv: r.bool(0.3),
        watch_id: r.bool(0.8) ? "0" : this.int64(5),
        fragment: r.bool(0.1),
      },
    };
  }

  watchRequests(): Record<string, unknown>[] {
    const r = this.rng;
    const n = r.between(1, 8);
    return Array.from({ length: n }, () =>
      r.weighted<() => Record<string, unknown>>([
        [60, () => this.watchCreate()],
        [25, () => ({ cancel_request: { watch_id: this.int64(8) } })],
        [15, () => ({ progress_request: {} })],
      ])(),
    );
  }

  // ---- the op stream ----

  next(): RpcOp {
    const r = this.rng;
    const kv = (method: string, request: Record<string, unknown>): RpcOp => ({ kind: "unary", service: "kv", method, request });
    const unary = (service: ServiceKey, method: string, request: Record<string, unknown>): RpcOp => ({ kind: "unary", service, method, request });
    return r.weighted<() => RpcOp>([
      [18, () => kv("Range", this.range())],
      [16, () => kv("Put", this.put())],
      [6, () => kv("DeleteRange", this.deleteRange())],
      [12, () => kv("Txn", this.txn())],
      [2, () => kv("Compact", this.compact())],
      [
        5,
        () => {
          const index = this.leasesGranted++;
          const ttl = r.weighted<string>([
            [60, String(r.between(600, 3600))],
            // At or below the minimum TTL, past the maximum, and short: granted (or refused), never attached.
            [15, r.pick(["0", "-1", "-100"])],
            [15, r.pick(["9000000000", "9000000001", "9223372036854775807"])],
            [10, String(r.between(1, 5))],
          ]);
          if (Number(ttl) >= 600 && Number(ttl) <= 3600) this.longLeases.push(index);
          // Explicit ids over the whole int64 range (above 2^53 too: lease ids are exact, src/lease/types.ts).
          const id = r.bool(0.6) ? "0" : this.opts.referenceSafe ? this.explicitLeaseId() : this.int64(1000);
          return unary("lease", "LeaseGrant", { TTL: ttl, ID: id });
        },
      ],
      [2, () => unary("lease", "LeaseRevoke", { ID: this.leaseId() })],
      [3, () => unary("lease", "LeaseTimeToLive", { ID: this.leaseId(), keys: r.bool() })],
      [1, () => unary("lease", "LeaseLeases", {})],
      [2, () => ({ kind: "keepalive", ids: Array.from({ length: r.between(1, 3) }, () => this.leaseId()) })],
      [5, () => ({ kind: "watch", requests: this.watchRequests() })],
      [1, () => unary("cluster", "MemberList", { linearizable: r.bool() })],
      [
        1,
        () =>
          unary("cluster", "MemberAdd", {
            // Never a valid new voting member: that would cost a one-member cluster its quorum.
            peerURLs: r.pick([[], ["not a url"], ["unix:///tmp/x"], ["http://127.0.0.1"], ["http://127.0.0.1:2380/path"], [""]]),
            isLearner: r.bool(),
          }),
      ],
      [1, () => unary("cluster", "MemberRemove", { ID: r.bool(0.2) ? "@member" : this.int64(1e6) })],
      [1, () => unary("cluster", "MemberUpdate", { ID: r.bool(0.2) ? "@member" : this.int64(1e6), peerURLs: r.pick([[], ["bad"], ["http://127.0.0.1:1"]]) })],
      [1, () => unary("cluster", "MemberPromote", { ID: r.bool(0.2) ? "@member" : this.int64(1e6) })],
      [
        1,
        () =>
          unary("maintenance", "Alarm", {
            // GET and DEACTIVATE only: an ACTIVATE NOSPACE would turn every later write into an error.
            action: this.opts.referenceSafe ? r.pick([0, 2]) : r.pick([0, 2, 7, -1]),
            memberID: r.bool(0.5) ? "0" : "@member",
            alarm: r.int(3),
          }),
      ],
      [1, () => unary("maintenance", "Status", {})],
      [1, () => unary("maintenance", "Hash", {})],
      [1, () => unary("maintenance", "HashKV", { revision: this.revision() })],
      [1, () => unary("maintenance", "MoveLeader", { targetID: r.bool(0.3) ? "@member" : this.int64(1e6) })],
      [2, () => unary("lock", "Lock", { name: Buffer.from(`fz-lock/${r.int(1e9)}`), lease: this.leaseId() })],
      [1, () => unary("lock", "Unlock", { key: r.bool(0.5) ? this.key() : Buffer.alloc(0) })],
      [1, () => unary("election", "Campaign", { name: Buffer.from(`fz-elect/${r.int(1e9)}`), lease: this.leaseId(), value: this.value() })],
      [1, () => unary("election", "Leader", { name: r.bool(0.5) ? Buffer.from(`fz-elect/${r.int(5)}`) : Buffer.alloc(0) })],
      [
        1,
        () =>
          unary("election", "Proclaim", {
            leader: { name: Buffer.from(`fz-elect/${r.int(5)}`), key: this.key(), rev: this.revision(), lease: this.leaseId() },
            value: this.value(),
          }),
      ],
      [1, () => unary("election", "Resign", { leader: { name: Buffer.from(`fz-elect/${r.int(5)}`), key: this.key(), rev: this.revision(), lease: this.leaseId() } })],
      [1, () => ({ kind: "observe", name: Buffer.from(`fz-elect/${r.int(5)}`) })],
    ])();
  }
}

/** The end of the range of keys with `key` as prefix (etcd's clientv3.GetPrefixRangeEnd). */
export function prefixEnd(key: Buffer): Buffer {
  const end = Buffer.from(key);
  for (let i = end.length - 1; i >= 0; i--) {
    if (end[i]! < 0xff) {
      end[i]! += 1;
      return end.subarray(0, i + 1);
    }
  }
  return Buffer.from([0]);
}

/** Replaces "@lease:K" and "@member" placeholders, deeply, with a target's ids. */
export function resolvePlaceholders<T>(value: T, ids: { leases: readonly string[]; member: string }): T {
  if (typeof value === "string") {
    if (value === "@member") return ids.member as T;
    if (value.startsWith("@lease:")) return (ids.leases[Number(value.slice(7))] ?? "0") as T;
    return value;
  }
  if (Buffer.isBuffer(value) || value === null || typeof value !== "object") return value;
  if (Array.isArray(value)) return value.map((v: unknown) => resolvePlaceholders(v, ids)) as T;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value as Record<string, unknown>)) out[k] = resolvePlaceholders(v, ids);
  return out as T;
}
