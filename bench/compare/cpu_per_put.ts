/**
 * Leader CPU per put, A against B: two builds of etcetera (each a dist/server.js), each round a
 * fresh 3-member cluster of one build, loaded by etcd's benchmark tool to the leader (warm-up,
 * then a fixed number of puts), the leader's utime + stime read from /proc around the measured
 * puts, for the process and its main thread. Rounds alternate A B, B A, A B, ... so that both
 * builds see the same minutes of a shared machine; the report gives each build's median and range.
 *
 *   npx tsx bench/compare/cpu_per_put.ts --a=/tmp/base/dist/server.js [--b=dist/server.js]
 *        [--a-node-args=F1,F2] [--b-node-args=...] [--a-env=K=V,...] [--b-env=...] [--rounds=3] [--total=20000] [--warmup=6000]
 *        [--conns=100] [--clients=1000] [--idle-ms=0: quiet time between warm-up and measured puts]
 *        [--all-members=1: puts spread over every member instead of --target-leader]
 *        [--c=... --c-env=... --c-node-args=...: a third variant]
 *
 * CPU time per request is far less sensitive to a busy machine than requests/s, but not immune
 * (cache misses, frequency, the kernel's share of loopback traffic): compare A/B from one run,
 * never figures from different runs. No profiler runs (it costs the leader ~10%).
 *
 * Cold start: --warmup=0 --total=1000 measures a fresh cluster's first puts (issue 18), e.g.
 * --b-env=ETCETERA_WARMUP=0 for the member's warm-up (src/server/warmup.ts) on against off.
 */
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { BenchCluster, procStatusBytes, SERVER_JS } from "./cluster.js";
import { runEtcdBenchmark } from "./etcd-tool.js";
import { cpuBetween, sampleProcess } from "./proc-cpu.js";
import { putLoad, startAndWarm } from "./put_load.js";
import { leaderIndex } from "./ready.js";

interface RoundResult {
  processUs: number;
  mainUs: number;
  /** The leader's other threads (V8's compiler and GC helpers, libuv's pool): process − main. */
  helperUs: number;
  followerMainUs: number;
  /** Puts/s of the measured run, as the benchmark tool reports it: with --warmup=0, the cold speed. */
  rps: number;
  /** The measured run's 99th percentile latency, ms, as the benchmark tool reports it. */
  p99Ms: number;
  /** The leader's peak RSS (VmHWM), MB: what a GC knob trades CPU against. */
  leaderPeakRssMb: number;
  /** The leader's front-end processes (--experimental-front-ends), all threads, summed; 0 without. */
  frontEndsUs: number;
  /** Their peak RSS (VmHWM), MB, summed; 0 without. */
  frontEndsPeakRssMb: number;
}

/** A member's child processes: its front ends, when it has any. */
function childrenOf(pid: number): number[] {
  try {
    const text = readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8").trim();
    return text === "" ? [] : text.split(" ").map(Number);
  } catch {
    return [];
  }
}

async function round(serverJs: string, nodeArgs: string[], env: Record<string, string>, opt: (n: string, d: string) => string): Promise<RoundResult | undefined> {
  const total = Number(opt("total", "20000"));
  const load = putLoad({ total, conns: opt("conns", "100"), clients: opt("clients", "1000"), toLeader: opt("all-members", "0") !== "1" });
  const cluster = await BenchCluster.create({ target: "etcetera", size: 3, serverJs, nodeArgs, env });
  try {
    const leader = await startAndWarm(cluster, load, Number(opt("warmup", "6000")));
    // --idle-ms: a quiet spell between the warm-up and the measured puts (a burst after a lull).
    const idleMs = Number(opt("idle-ms", "0"));
    if (idleMs > 0) await new Promise((r) => setTimeout(r, idleMs));
    const pids = cluster.pids();
    const frontEnds = childrenOf(pids[leader]!);
    const before = pids.map((pid) => sampleProcess(pid));
    const frontEndsBefore = frontEnds.map((pid) => sampleProcess(pid));
    const r = await runEtcdBenchmark(cluster.endpoints, load(total), { timeoutMs: 600_000 });
    const after = pids.map((pid) => sampleProcess(pid));
    const frontEndsAfter = frontEnds.map((pid) => sampleProcess(pid));
    const frontEndsPeakRssMb = frontEnds.reduce((sum, pid) => sum + (procStatusBytes(pid, "VmHWM") ?? 0), 0) / 1048576;
    const peakRss = cluster.peakRss();
    // An election during the run (a starved member on a busy machine) moves the work: the figures
    // would be of two leaders, so the round is taken again.
    const leaderAfter = await leaderIndex(cluster.endpoints);
    if (leaderAfter !== leader) return undefined;
    // A put that failed (a timeout on a loaded machine) still cost the leader its CPU: counted.
    if (r.errorCount > 0) process.stdout.write(`(${r.errorCount} of ${r.count + r.errorCount} puts failed)\n`);
    const cpu = pids.map((_, i) => {
      const b = before[i];
      const a = after[i];
      if (b === undefined || a === undefined) throw new Error(`member ${i} exited during the run:\n${cluster.logs()}`);
      return cpuBetween(b, a, r.count + r.errorCount);
    });
    const lead = cpu[leader]!;
    const followers = cpu.filter((_, i) => i !== leader).map((c) => c.threads.find((t) => t.main)?.usPerRequest ?? 0);
    let frontEndsUs = 0;
    for (const [i, b] of frontEndsBefore.entries()) {
      const a = frontEndsAfter[i];
      if (b === undefined || a === undefined) throw new Error(`front end ${frontEnds[i]} exited during the run`);
      frontEndsUs += cpuBetween(b, a, r.count + r.errorCount).usPerRequest;
    }
    const mainUs = lead.threads.find((t) => t.main)?.usPerRequest ?? 0;
    return { processUs: lead.usPerRequest, mainUs, helperUs: lead.usPerRequest - mainUs, followerMainUs: Math.max(...followers), rps: r.rps, p99Ms: r.p99Ms, leaderPeakRssMb: (peakRss[leader] ?? 0) / 1048576, frontEndsUs, frontEndsPeakRssMb };
  } finally {
    await cluster.destroy();
  }
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 === 1 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

function describe(label: string, rs: RoundResult[]): string {
  const f = (pick: (r: RoundResult) => number) => {
    const xs = rs.map(pick);
    return `${median(xs).toFixed(1)} (${Math.min(...xs).toFixed(1)}–${Math.max(...xs).toFixed(1)})`;
  };
  return `${label}: leader process ${f((r) => r.processUs)} µs/put, main thread ${f((r) => r.mainUs)}, other threads ${f((r) => r.helperUs)}, front ends ${f((r) => r.frontEndsUs)}, busier follower main ${f((r) => r.followerMainUs)}, leader peak RSS ${f((r) => r.leaderPeakRssMb)} MB, its front ends' ${f((r) => r.frontEndsPeakRssMb)} MB, ${f((r) => r.rps)} puts/s, p99 ${f((r) => r.p99Ms)} ms; rounds: ${rs.map((r) => `${r.processUs.toFixed(0)}/${r.mainUs.toFixed(0)}`).join(" ")}`;
}

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  const opt = (name: string, dflt: string) => argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? dflt;
  const a = resolve(opt("a", SERVER_JS));
  const b = resolve(opt("b", SERVER_JS));
  // An optional third variant C (e.g. --c-env=ETCD_EXPERIMENTAL_FRONT_ENDS=2 beside A with 0 and B with 1).
  const withC = argv.some((x) => x.startsWith("--c=") || x.startsWith("--c-env=") || x.startsWith("--c-node-args="));
  const c = resolve(opt("c", SERVER_JS));
  // Node flags per build (comma-separated), e.g. --b-node-args=--max-semi-space-size=64 to try a V8 knob.
  const argsOf = (k: string) => opt(k, "").split(",").filter((x) => x !== "");
  const nodeArgs = { a: argsOf("a-node-args"), b: argsOf("b-node-args"), c: argsOf("c-node-args") };
  // Environment per build (comma-separated K=V), e.g. --b-env=ETCETERA_HEAP_GROWING_PERCENT=0.
  const envOf = (k: string) => Object.fromEntries(opt(k, "").split(",").filter((x) => x.includes("=")).map((x) => [x.slice(0, x.indexOf("=")), x.slice(x.indexOf("=") + 1)]));
  const env = { a: envOf("a-env"), b: envOf("b-env"), c: envOf("c-env") };
  const rounds = Number(opt("rounds", "3"));
  const results: { a: RoundResult[]; b: RoundResult[]; c: RoundResult[] } = { a: [], b: [], c: [] };
  const variants: (readonly ["a" | "b" | "c", string])[] = [["a", a], ["b", b], ...(withC ? [["c", c] as const] : [])];
  for (let i = 0; i < rounds; i++) {
    // A B, B A, A B, ... (A B C, C B A, ... with C): a build that always ran second would take any
    // order effect (the previous cluster's teardown, a neighbour's load rising) as its own.
    const order = i % 2 === 0 ? variants : [...variants].reverse();
    for (const [k, js] of order) {
      let r: RoundResult | undefined;
      for (let attempt = 1; r === undefined; attempt++) {
        r = await round(js, nodeArgs[k], env[k], opt);
        if (r === undefined) process.stdout.write(`round ${i + 1} ${k}: the leader changed during the run, again (attempt ${attempt})\n`);
        if (r === undefined && attempt >= 3) throw new Error("the leader changed in three attempts: the machine is too busy to measure");
      }
      results[k].push(r);
      process.stdout.write(`round ${i + 1} ${k}: leader ${r.processUs.toFixed(1)} µs/put (main ${r.mainUs.toFixed(1)}, other threads ${r.helperUs.toFixed(1)}, front ends ${r.frontEndsUs.toFixed(1)}), ${r.rps.toFixed(0)} puts/s (p99 ${r.p99Ms.toFixed(2)} ms), follower main ${r.followerMainUs.toFixed(1)}, leader peak RSS ${r.leaderPeakRssMb.toFixed(0)} MB (front ends ${r.frontEndsPeakRssMb.toFixed(0)})\n`);
    }
  }
  process.stdout.write(`${describe(`A ${a}`, results.a)}\n${describe(`B ${b}`, results.b)}\n${withC ? `${describe(`C ${c}`, results.c)}\n` : ""}`);
}

main().then(
  () => process.exit(0),
  (e: unknown) => {
    process.stderr.write(`cpu_per_put: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
    process.exit(1);
  },
);
