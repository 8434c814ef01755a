/**
 * The leader's garbage collector under put load, variant against variant: each round a fresh
 * 3-member cluster of etcetera with V8's --trace-gc-nvp, etcd's benchmark tool putting to the
 * leader (the put load of cpu_per_put.ts: warm-up, then the measured puts), the leader's GC lines
 * over the measured puts summed: scavenges and mark-compacts (count, pause sum, mean), bytes
 * promoted, and the pauses' share of the main thread's wall clock (pause / (pause + mutator)),
 * beside the run's req/s, average and p99. Rounds alternate between the variants.
 *
 *   npx tsx bench/compare/gc_trace.ts [--a-node-args=F1,F2] [--a-env=K=V,...] [--b-node-args=...]
 *        [--b-env=...] [--c-node-args=...] [--c-env=...] [--rounds=2] [--total=50000] [--warmup=20000]
 *        [--conns=100] [--clients=1000]
 *
 * e.g. --b-node-args=--max-semi-space-size=64 --c-env=ETCETERA_HEAP_GROWING_PERCENT=100. Only
 * what node's command line or the environment can set is a variant: one build, dist/server.js.
 */
import { BenchCluster } from "./cluster.js";
import { runEtcdBenchmark } from "./etcd-tool.js";
import { putLoad, startAndWarm } from "./put_load.js";

interface GcKind {
  count: number;
  pauseMs: number;
}

interface GcRound {
  scavenge: GcKind;
  markCompact: GcKind;
  promotedBytes: number;
  mutatorMs: number;
  rps: number;
  avgMs: number;
  p99Ms: number;
}

/** A mutator span this long is the idle gap between warm-up and measured run, not load. */
const IDLE_MUTATOR_MS = 5000;

/** Sums --trace-gc-nvp lines ("pause=5.8 mutator=278.5 gc=s ... promoted=3219160 ..."). */
export function sumGcTrace(text: string): Omit<GcRound, "rps" | "avgMs" | "p99Ms"> {
  const r = { scavenge: { count: 0, pauseMs: 0 }, markCompact: { count: 0, pauseMs: 0 }, promotedBytes: 0, mutatorMs: 0 };
  for (const line of text.split("\n")) {
    const f = new Map(Array.from(line.matchAll(/(\S+)=(\S+)/g), (m) => [m[1] as string, m[2] as string]));
    const kind = f.get("gc") === "s" ? r.scavenge : f.get("gc") === "mc" ? r.markCompact : undefined;
    const mutator = Number(f.get("mutator"));
    if (kind === undefined || !(mutator < IDLE_MUTATOR_MS)) continue;
    kind.count++;
    kind.pauseMs += Number(f.get("pause"));
    r.promotedBytes += Number(f.get("promoted") ?? 0);
    r.mutatorMs += mutator;
  }
  return r;
}

async function round(nodeArgs: string[], env: Record<string, string>, total: number, warmup: number, conns: string, clients: string): Promise<GcRound> {
  const load = putLoad({ total, conns, clients, toLeader: true });
  const cluster = await BenchCluster.create({ target: "etcetera", size: 3, nodeArgs: ["--trace-gc-nvp", ...nodeArgs], env });
  try {
    const leader = await startAndWarm(cluster, load, warmup);
    let trace = "";
    cluster.onStdout(leader, (b) => (trace += b.toString()));
    const run = await runEtcdBenchmark(cluster.endpoints, load(total), { timeoutMs: 300_000 });
    return { ...sumGcTrace(trace), rps: run.rps, avgMs: run.avgMs, p99Ms: run.p99Ms };
  } finally {
    await cluster.destroy();
  }
}

function describe(r: GcRound): string {
  const gcMs = r.scavenge.pauseMs + r.markCompact.pauseMs;
  const kind = (k: GcKind) => `${k.count} (${k.pauseMs.toFixed(0)} ms, mean ${(k.pauseMs / Math.max(1, k.count)).toFixed(1)})`;
  return (
    `scavenges ${kind(r.scavenge)}, mark-compacts ${kind(r.markCompact)}, promoted ${(r.promotedBytes / 2 ** 20).toFixed(0)} MB, ` +
    `GC ${((100 * gcMs) / (gcMs + r.mutatorMs)).toFixed(1)}% of the main thread's wall; ${r.rps.toFixed(0)} puts/s, avg ${r.avgMs.toFixed(1)} ms, p99 ${r.p99Ms.toFixed(r.p99Ms < 10 ? 2 : 0)} ms`
  );
}

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  const opt = (name: string, dflt: string) => argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? dflt;
  const list = (k: string) => opt(k, "").split(",").filter((x) => x !== "");
  const envOf = (k: string) => Object.fromEntries(list(k).map((x) => [x.slice(0, x.indexOf("=")), x.slice(x.indexOf("=") + 1)]));
  const names = ["a", "b", "c"].filter((v) => v === "a" || argv.some((x) => x.startsWith(`--${v}-`)));
  const rounds = Number(opt("rounds", "2"));
  const total = Number(opt("total", "50000"));
  const warmup = Number(opt("warmup", "20000"));
  for (let i = 0; i < rounds; i++) {
    // A B C, then C B A: both ends of each round pair see the same minutes of a shared machine.
    for (const v of i % 2 === 0 ? names : [...names].reverse()) {
      const r = await round(list(`${v}-node-args`), envOf(`${v}-env`), total, warmup, opt("conns", "100"), opt("clients", "1000"));
      console.log(`round ${i + 1} ${v} [${opt(`${v}-node-args`, "")} ${opt(`${v}-env`, "")}]: ${describe(r)}`);
    }
  }
}

if (process.argv[1]?.endsWith("gc_trace.ts")) await main();
