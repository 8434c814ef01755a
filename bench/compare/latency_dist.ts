/**
 * The whole latency distribution of one put row, etcd against etcetera (the full matrix keeps only
 * the average and the p99): fresh 3-member clusters of each target in alternating rounds, a
 * warm-up, then the measured puts, and etcd's benchmark tool's own percentiles (10% .. 99.9%)
 * printed side by side. Used to read where a p99 ratio comes from (issue 18).
 *
 *   npx tsx bench/compare/latency_dist.ts [--conns=100] [--clients=1000] [--total=100000]
 *        [--warmup=6000] [--rounds=2] [--all-members=1]
 *
 * Each member runs with --metrics=extensive, and the leader's grpc_server_handling_seconds of Put
 * over the measured run (its buckets after minus before) is printed beside the client's view:
 * what the server timed from a call's start to its answer, against what the client waited.
 */
import { spawnSync } from "node:child_process";
import { BenchCluster, type Target } from "./cluster.js";
import { requireEtcdBenchmark } from "./etcd-tool.js";
import { putLoad, startAndWarm } from "./put_load.js";

function opt(name: string, dflt: string): string {
  const a = process.argv.find((x) => x.startsWith(`--${name}=`));
  return a === undefined ? dflt : a.slice(name.length + 3);
}

const PERCENTILE = /^\s*(\d+(?:\.\d+)?)% in ([\d.]+) secs\./;

/** The tool's "Latency distribution" lines as percentile → ms. */
export function percentiles(report: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of report.split("\n")) {
    const m = PERCENTILE.exec(line);
    if (m !== null) out.set(m[1]!, Number(m[2]) * 1000);
  }
  return out;
}

/** The leader's Put handling histogram: cumulative count per upper bound (seconds). */
async function handlingBuckets(clientUrl: string): Promise<Map<string, number>> {
  const text = await (await fetch(`${clientUrl}/metrics`, { headers: { connection: "close" } })).text();
  const out = new Map<string, number>();
  for (const line of text.split("\n")) {
    if (!line.startsWith("grpc_server_handling_seconds_bucket") || !line.includes('grpc_method="Put"')) continue;
    const le = /le="([^"]+)"/.exec(line)?.[1];
    if (le !== undefined) out.set(le, Number(line.slice(line.lastIndexOf(" ") + 1)));
  }
  return out;
}

/**
 * etcetera's event-loop delay over the run (prom-client's nodejs_eventloop_lag_* families, whose
 * histogram restarts at every scrape): how long a ready socket can wait for the loop to read it.
 */
async function loopLag(clientUrl: string): Promise<string> {
  const text = await (await fetch(`${clientUrl}/metrics`, { headers: { connection: "close" } })).text();
  const parts: string[] = [];
  for (const q of ["p50", "p90", "p99", "max"]) {
    const line = text.split("\n").find((l) => l.startsWith(`nodejs_eventloop_lag_${q}_seconds `));
    if (line !== undefined) parts.push(`${q} ${(Number(line.slice(line.indexOf(" ") + 1)) * 1000).toFixed(1)} ms`);
  }
  return parts.length === 0 ? "" : `; its event loop's delay ${parts.join(", ")}`;
}

function bucketShares(before: Map<string, number>, after: Map<string, number>): string {
  const total = (after.get("+Inf") ?? 0) - (before.get("+Inf") ?? 0);
  const parts: string[] = [];
  for (const [le, n] of after) {
    if (le === "+Inf") continue;
    const share = (n - (before.get(le) ?? 0)) / total;
    if (share > 0 && share < 1) parts.push(`≤${Number(le) * 1000} ms ${(share * 100).toFixed(1)}%`);
  }
  return `${total} calls: ${parts.join(", ")}`;
}

async function round(target: Target): Promise<Map<string, number>> {
  const total = Number(opt("total", "100000"));
  const load = putLoad({ total, conns: opt("conns", "100"), clients: opt("clients", "1000"), toLeader: opt("all-members", "0") !== "1" });
  const cluster = await BenchCluster.create({ target, size: 3, extraArgs: ["--metrics=extensive"] });
  try {
    const leader = cluster.members[await startAndWarm(cluster, load, Number(opt("warmup", "6000")))]!;
    const before = await handlingBuckets(leader.clientUrl);
    await loopLag(leader.clientUrl);
    const argv = [`--endpoints=${cluster.endpoints.join(",")}`, "--dial-timeout=10s", "--precise", ...load(total)];
    const run = spawnSync(requireEtcdBenchmark(), argv, { encoding: "utf8", maxBuffer: 64 * 1024 * 1024 });
    if (run.status !== 0) throw new Error(`benchmark exited ${run.status}: ${run.stderr.slice(-600)}`);
    const rps = /Requests\/sec:\s*([\d.]+)/.exec(run.stdout)?.[1] ?? "?";
    const p = percentiles(run.stdout);
    console.log(`${target}: ${Number(rps).toFixed(0)} req/s; ${[...p].map(([k, v]) => `${k}% ${v.toFixed(1)}`).join(", ")} ms`);
    const lag = await loopLag(leader.clientUrl);
    console.log(`  leader's own timing of Put: ${bucketShares(before, await handlingBuckets(leader.clientUrl))}${lag}`);
    return p;
  } finally {
    await cluster.destroy();
  }
}

async function main(): Promise<void> {
  const rounds = Number(opt("rounds", "2"));
  const all: Record<Target, Map<string, number>[]> = { etcd: [], etcetera: [] };
  for (let i = 0; i < rounds; i++) {
    const order: Target[] = i % 2 === 0 ? ["etcd", "etcetera"] : ["etcetera", "etcd"];
    for (const t of order) all[t].push(await round(t));
  }
  const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  console.log("percentile   etcd ms   etcetera ms   ratio");
  for (const k of all.etcd[0]!.keys()) {
    const a = median(all.etcd.map((m) => m.get(k)!));
    const b = median(all.etcetera.map((m) => m.get(k)!));
    console.log(`${k.padStart(6)}%  ${a.toFixed(1).padStart(8)}  ${b.toFixed(1).padStart(12)}   ${(b / a).toFixed(2)}×`);
  }
}

if (process.argv[1]?.endsWith("latency_dist.ts")) await main();
