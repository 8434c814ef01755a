/**
 * Where the one-client put's tail comes from (issue 18: its p99 is ~2× etcd's while its median is
 * ~1.1×): each target in turn, a fresh 3-member cluster, etcd's benchmark tool putting at one
 * connection and one client to the leader (warm-up, then the measured puts). For each member it
 * reads etcd_disk_wal_fsync_duration_seconds around the measured puts and prints how many syncs
 * took over 1, 2 and 4 ms; with `perf` present it also traces the leader's durable-write syscalls
 * (pwrite64, which etcetera issues with O_DSYNC, and fdatasync, etcd's) for `--trace-seconds` and
 * counts those over 1 and 2 ms, so a slow sync can be told apart as the disk's (the syscall itself
 * was slow) or the process's (the syscall was quick, but the sync as the member timed it was not:
 * for etcetera the thread-pool hop and the event loop's wake-up are inside that timing, for etcd
 * only the fdatasync).
 *
 *   npx tsx bench/compare/fsync_tail.ts [--total=10000] [--warmup=3000] [--trace-seconds=8] [--targets=etcd,etcetera]
 *
 * Tracing slows the traced leader (its puts/s in the traced run are not the untraced figure):
 * the histograms and percentiles come from the first run, untraced; the trace from a second run
 * on the same cluster.
 */
import { spawnSync } from "node:child_process";
import { BenchCluster, type Target } from "./cluster.js";
import { runEtcdBenchmark } from "./etcd-tool.js";
import { putLoad, startAndWarm } from "./put_load.js";

const FSYNC = "etcd_disk_wal_fsync_duration_seconds";

function opt(name: string, dflt: string): string {
  const a = process.argv.find((x) => x.startsWith(`--${name}=`));
  return a === undefined ? dflt : a.slice(name.length + 3);
}

/** A histogram's cumulative bucket counts by upper bound (seconds), from Prometheus text. */
export function bucketsOf(text: string, name: string): Map<number, number> {
  const out = new Map<number, number>();
  const re = new RegExp(`^${name}_bucket\\{le="([^"]+)"\\} (\\S+)$`, "gm");
  for (const m of text.matchAll(re)) out.set(m[1] === "+Inf" ? Infinity : Number(m[1]), Number(m[2]));
  return out;
}

/** Observations above `bound` seconds between two cumulative snapshots of one histogram. */
export function countAbove(before: Map<number, number>, after: Map<number, number>, bound: number): number {
  const total = (after.get(Infinity) ?? 0) - (before.get(Infinity) ?? 0);
  const upTo = (after.get(bound) ?? 0) - (before.get(bound) ?? 0);
  return total - upTo;
}

/**
 * Durations (ms) of the durable WAL syscalls in `perf trace` output lines (`  82.102 ( 2.252 ms):
 * node/27515 pwrite64(fd: 25, ...) = 354`): etcd's fdatasync calls (its backend's, ~10 a second,
 * among them), etcetera's pwrite64 calls off the main thread `pid` (its O_DSYNC WAL writes on
 * libuv's pool; SQLite's page writes are on the main thread and are not syncs).
 */
export function syscallDurations(traceText: string, target: Target, pid: number): number[] {
  const out: number[] = [];
  for (const line of traceText.split("\n")) {
    const m = /\(\s*([0-9.]+) ms\):\s+\S+?\/(\d+)\s+(pwrite64|fdatasync)\(/.exec(line);
    if (m === null) continue;
    const wanted = target === "etcd" ? m[3] === "fdatasync" : m[3] === "pwrite64" && Number(m[2]) !== pid;
    if (wanted) out.push(Number(m[1]));
  }
  return out;
}

async function metricsText(url: string): Promise<string> {
  return (await fetch(`${url}/metrics`)).text();
}

async function measure(target: Target, total: number, warmup: number, traceSeconds: number): Promise<string> {
  const load = putLoad({ total, conns: "1", clients: "1", toLeader: true });
  const cluster = await BenchCluster.create({ target, size: 3 });
  const lines: string[] = [];
  try {
    const leader = await startAndWarm(cluster, load, warmup);
    const before = await Promise.all(cluster.members.map((m) => metricsText(m.clientUrl)));
    const r = await runEtcdBenchmark(cluster.endpoints, load(total), { timeoutMs: 600_000 });
    const after = await Promise.all(cluster.members.map((m) => metricsText(m.clientUrl)));
    lines.push(`${target}: ${r.rps.toFixed(0)} puts/s, avg ${r.avgMs.toFixed(2)} ms, p99 ${r.p99Ms.toFixed(2)} ms`);
    cluster.members.forEach((_, i) => {
      const b = bucketsOf(before[i]!, FSYNC);
      const a = bucketsOf(after[i]!, FSYNC);
      const n = (a.get(Infinity) ?? 0) - (b.get(Infinity) ?? 0);
      const pct = (k: number): string => `${k} (${((100 * k) / Math.max(1, n)).toFixed(2)}%)`;
      lines.push(`  ${i === leader ? "leader  " : "follower"} WAL syncs ${n}: over 1 ms ${pct(countAbove(b, a, 0.001))}, over 2 ms ${pct(countAbove(b, a, 0.002))}, over 4 ms ${pct(countAbove(b, a, 0.004))}`);
    });
    if (traceSeconds > 0) lines.push(traceLeader(cluster, leader, load, total, traceSeconds, target));
  } finally {
    await cluster.stop();
  }
  return lines.join("\n");
}

function traceLeader(cluster: BenchCluster, leader: number, load: (n: number) => string[], total: number, seconds: number, target: Target): string {
  const probe = spawnSync("perf", ["--version"], { encoding: "utf8" });
  if (probe.status !== 0) return "  (no perf: the leader's syscalls were not traced)";
  const pid = cluster.pids()[leader]!;
  // The traced run goes on in the background; perf follows the leader for `seconds` of it.
  const run = runEtcdBenchmark(cluster.endpoints, load(total), { timeoutMs: 600_000 });
  const t = spawnSync("perf", ["trace", "-p", String(pid), "-e", "pwrite64,fdatasync", "--", "sleep", String(seconds)], { encoding: "utf8", maxBuffer: 1 << 28 });
  void run.catch(() => undefined);
  const syncs = syscallDurations(t.stderr, target, pid);
  if (syncs.length === 0) return `  leader's durable-write syscalls: none traced (${t.stderr.slice(0, 200)})`;
  const over = (ms: number): number => syncs.filter((x) => x > ms).length;
  const sorted = [...syncs].sort((a, b) => a - b);
  const p = (q: number): string => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!.toFixed(3);
  return `  leader's sync syscalls (${target === "etcd" ? "fdatasync" : "O_DSYNC pwrite64 off the main thread"}) traced ${seconds} s: ${syncs.length}, p50 ${p(0.5)} ms, p99 ${p(0.99)} ms, over 1 ms ${over(1)}, over 2 ms ${over(2)}`;
}

async function main(): Promise<void> {
  const total = Number(opt("total", "10000"));
  const warmup = Number(opt("warmup", "3000"));
  const traceSeconds = Number(opt("trace-seconds", "8"));
  for (const target of opt("targets", "etcd,etcetera").split(",") as Target[]) {
    process.stdout.write(`${await measure(target, total, warmup, traceSeconds)}\n`);
  }
}

if (process.argv[1]?.endsWith("fsync_tail.ts")) await main();
