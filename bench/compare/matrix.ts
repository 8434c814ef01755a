/**
 * The seed matrix of issue 8: etcd's published put and range benchmarks (3 members, 8-byte
 * keys, 256-byte values), expressed as command lines of our etcd-compatible `benchmark`.
 *
 * Puts use distinct sequential keys (`--key-space-size` = total) so that "10k / 100k keys"
 * really are that many keys in the store; etcd's own doc leaves key-space-size at 1.
 */

export interface MatrixRow {
  id: string;
  title: string;
  /** Needs the key `foo` to exist before it runs. */
  seedRangeKey: boolean;
  /** benchmark CLI arguments after --endpoints. */
  args: string[];
  total: number;
  /**
   * The member the endpoint list starts with, for a row whose one connection goes to the first
   * endpoint (etcd's benchmark dials endpoints[0] first). Unset, that was member 1 whatever its
   * role, so a one-client linearizable range was served by the leader in some rounds and through
   * a follower (a ReadIndex hop more, 1.5–1.9× the latency for either target) in others: the
   * 17:14 run of 2026-12-06 had two follower rounds of three for etcetera, one for etcd.
   */
  firstEndpoint?: "leader" | "follower";
}

export interface MatrixOptions {
  quick: boolean;
}

const KEY = ["--key-size=8", "--val-size=256", "--sequential-keys"];
export const RANGE_KEY = "foo";
export const RANGE_VALUE_BYTES = 256;

export function seedMatrix(opts: MatrixOptions): MatrixRow[] {
  const small = opts.quick ? 1_000 : 10_000;
  const large = opts.quick ? 10_000 : 100_000;
  const put = (total: number) => ["put", ...KEY, `--key-space-size=${total}`, `--total=${total}`];
  const range = (c: "l" | "s", total: number) => ["range", RANGE_KEY, `--consistency=${c}`, `--total=${total}`];
  return [
    { id: "put-1x1-leader", title: "put, 1 conn / 1 client, leader", seedRangeKey: false, total: small, args: ["--target-leader", "--conns=1", "--clients=1", ...put(small)] },
    { id: "put-100x1000-leader", title: "put, 100 conns / 1,000 clients, leader", seedRangeKey: false, total: large, args: ["--target-leader", "--conns=100", "--clients=1000", ...put(large)] },
    { id: "put-100x1000-all", title: "put, 100 conns / 1,000 clients, all members", seedRangeKey: false, total: large, args: ["--conns=100", "--clients=1000", ...put(large)] },
    { id: "range-l-1x1", title: "range linearizable, 1 conn / 1 client", seedRangeKey: true, total: small, firstEndpoint: "leader", args: ["--conns=1", "--clients=1", ...range("l", small)] },
    {
      id: "range-l-1x1-follower",
      title: "range linearizable, 1 conn / 1 client, via a follower",
      seedRangeKey: true,
      total: small,
      firstEndpoint: "follower",
      args: ["--conns=1", "--clients=1", ...range("l", small)],
    },
    { id: "range-s-1x1", title: "range serializable, 1 conn / 1 client", seedRangeKey: true, total: small, firstEndpoint: "leader", args: ["--conns=1", "--clients=1", ...range("s", small)] },
    { id: "range-l-100x1000", title: "range linearizable, 100 conns / 1,000 clients", seedRangeKey: true, total: large, args: ["--conns=100", "--clients=1000", ...range("l", large)] },
    { id: "range-s-100x1000", title: "range serializable, 100 conns / 1,000 clients", seedRangeKey: true, total: large, args: ["--conns=100", "--clients=1000", ...range("s", large)] },
  ];
}

/** The cluster's endpoints with the row's `firstEndpoint` member first; as they are without one. */
export function rowEndpoints(endpoints: readonly string[], leader: number, first: MatrixRow["firstEndpoint"]): string[] {
  if (first === undefined) return [...endpoints];
  if (!(endpoints.length > 1 && leader >= 0 && leader < endpoints.length)) throw new Error(`leader ${leader} is not one of ${endpoints.length} endpoints`);
  const at = first === "leader" ? leader : (leader + 1) % endpoints.length;
  return [endpoints[at]!, ...endpoints.filter((_, i) => i !== at)];
}
