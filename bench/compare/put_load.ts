/**
 * The put load that profile.ts and cpu_per_put.ts drive a fresh cluster with: etcd's benchmark
 * tool putting 256-byte values under sequential 8-byte keys, to the leader (or to every member),
 * after a warm-up that brings V8's tiers to their steady state.
 */
import type { BenchCluster } from "./cluster.js";
import { runEtcdBenchmark } from "./etcd-tool.js";
import { hasLeader, leaderIndex } from "./ready.js";

export interface PutLoadOptions {
  /** Puts in the measured run (also the key space). */
  total: number;
  conns: string;
  clients: string;
  /** --target-leader, or spread over every member. */
  toLeader: boolean;
  /** Further `put` flags. */
  extra?: string[];
}

/** The benchmark tool's arguments for `n` puts of this load. */
export function putLoad(o: PutLoadOptions): (n: number) => string[] {
  const put = ["put", "--key-size=8", "--val-size=256", "--sequential-keys", `--key-space-size=${o.total}`, ...(o.extra ?? [])];
  return (n) => [...(o.toLeader ? ["--target-leader"] : []), `--conns=${o.conns}`, `--clients=${o.clients}`, ...put, `--total=${n}`];
}

/** Starts every member, waits for a leader, runs `warmup` puts; returns the leader's index. */
export async function startAndWarm(cluster: BenchCluster, load: (n: number) => string[], warmup: number): Promise<number> {
  await cluster.start(60_000, hasLeader);
  const leader = await leaderIndex(cluster.endpoints);
  if (warmup > 0) await runEtcdBenchmark(cluster.endpoints, load(warmup), { timeoutMs: 300_000 });
  return leader;
}
