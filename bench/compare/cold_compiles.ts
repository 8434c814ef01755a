/**
 * What V8 still compiles on a fresh leader during its first puts (issue 18, cold start): one fresh
 * 3-member etcetera cluster with `node --trace-opt --trace-deopt`, etcd's benchmark tool putting
 * the cold run's requests to the leader at once (no warm-up), and the leader's trace read from the
 * run's start. Prints the run's puts/s and leader CPU per put, every TurboFan compile inside the
 * run with its compile time and what the same function went through before the run (compiled,
 * deoptimized and why), then every deoptimization inside the run.
 *
 *   npx tsx bench/compare/cold_compiles.ts [--total=3000] [--conns=100] [--clients=1000]
 *                                          [--all-members=1: puts spread over every member]
 *                                          [--member=leader|follower: whose trace and CPU]
 *                                          [--server=dist/server.js] [--node-args=F1,F2] [--idle-ms=1000] [--keep=FILE]
 *
 * A function compiled inside the run that had been compiled before was thrown away in between:
 * its "before" column says by what (a deopt's reason, or "code dependencies" when V8 dropped the
 * code because an assumption it was built on stopped holding). Compile times are wall
 * milliseconds of V8's concurrent compiler threads: on a shared 2-core machine only their order
 * of size means anything; compare counts, and CPU with cpu_per_put.ts --warmup=0.
 */
import { writeFileSync } from "node:fs";
import { resolve } from "node:path";
import { BenchCluster, SERVER_JS } from "./cluster.js";
import { runEtcdBenchmark } from "./etcd-tool.js";
import { cpuBetween, sampleProcess } from "./proc-cpu.js";
import { putLoad } from "./put_load.js";
import { hasLeader, leaderIndex } from "./ready.js";

const RUN_START = "=====cold run starts=====";

function opt(name: string, dflt: string): string {
  const a = process.argv.find((x) => x.startsWith(`--${name}=`));
  return a === undefined ? dflt : a.slice(name.length + 3);
}

/** The function a trace line is about. */
export function functionOf(line: string): string {
  const m = /<(?:JSFunction|SharedFunctionInfo) ([^ >]*)/.exec(line);
  return m?.[1] ?? "?";
}

function reasonOf(line: string): string {
  return /reason: ([^)\]]*)/.exec(line)?.[1] ?? "";
}

export interface ColdCompile {
  fn: string;
  ms: number;
  /** What the function went through before the run: "opt" per compile, "deopt: <reason>" per deopt. */
  before: string[];
}

/** The run's compiles and deopts from a trace whose run starts at the RUN_START line. */
export function analyzeTrace(text: string): { compiles: ColdCompile[]; deopts: string[] } {
  const lines = text.split("\n");
  const cut = lines.findIndex((l) => l.includes(RUN_START));
  if (cut < 0) throw new Error("the trace has no run start");
  const history = new Map<string, string[]>();
  for (const l of lines.slice(0, cut)) {
    const fn = functionOf(l);
    if (l.includes("completed compiling")) history.set(fn, [...(history.get(fn) ?? []), "opt"]);
    else if (l.includes("bailout (kind") || l.includes("marking dependent code")) history.set(fn, [...(history.get(fn) ?? []), `deopt: ${reasonOf(l)}`]);
  }
  const compiles: ColdCompile[] = [];
  const deopts: string[] = [];
  for (const l of lines.slice(cut)) {
    if (l.includes("completed compiling")) {
      const ms = Number(/took [0-9.]+, ([0-9.]+)/.exec(l)?.[1] ?? "0");
      compiles.push({ fn: functionOf(l), ms, before: history.get(functionOf(l)) ?? [] });
    } else if (l.includes("bailout (kind") || l.includes("marking dependent code")) {
      deopts.push(`${functionOf(l)}: ${reasonOf(l)}`);
    }
  }
  return { compiles, deopts };
}

async function main(): Promise<void> {
  const total = Number(opt("total", "3000"));
  const cluster = await BenchCluster.create({
    target: "etcetera",
    size: 3,
    nodeArgs: ["--trace-opt", "--trace-deopt", ...opt("node-args", "").split(",").filter((a) => a !== "")],
    serverJs: resolve(opt("server", SERVER_JS)),
  });
  const load = putLoad({ total, conns: opt("conns", "100"), clients: opt("clients", "1000"), toLeader: opt("all-members", "0") !== "1" });
  const role = opt("member", "leader");
  if (role !== "leader" && role !== "follower") throw new Error(`--member must be leader or follower, got ${role}`);
  const traces = cluster.members.map(() => "");
  try {
    const started = cluster.start(60_000, hasLeader);
    // Every member's trace from its first line (a member's process exists once start() spawned it).
    await new Promise((r) => setImmediate(r));
    cluster.members.forEach((_, i) => cluster.onStdout(i, (b) => (traces[i] += b.toString())));
    await started;
    const leader = await leaderIndex(cluster.endpoints);
    const traced = role === "leader" ? leader : (leader + 1) % cluster.members.length;
    await new Promise((r) => setTimeout(r, Number(opt("idle-ms", "1000"))));
    traces[traced] += `\n${RUN_START}\n`;
    const pid = cluster.pids()[traced] ?? 0;
    const before = sampleProcess(pid);
    const r = await runEtcdBenchmark(cluster.endpoints, load(total), { timeoutMs: 120_000 });
    const after = sampleProcess(pid);
    if (before === undefined || after === undefined) throw new Error(`the ${role} exited`);
    const cpu = cpuBetween(before, after, total);
    const keep = opt("keep", "");
    if (keep !== "") writeFileSync(keep, traces[traced] ?? "");
    const { compiles, deopts } = analyzeTrace(traces[traced] ?? "");
    const ms = compiles.reduce((a, c) => a + c.ms, 0);
    console.log(`${total} puts: ${Math.round(r.rps)} puts/s, p99 ${r.p99Ms.toFixed(1)} ms, ${role} ${cpu.usPerRequest.toFixed(0)} µs/put`);
    console.log(`TurboFan compiles in the run: ${compiles.length}, ${ms.toFixed(0)} ms`);
    for (const c of [...compiles].sort((a, b) => b.ms - a.ms)) {
      const opts = c.before.filter((h) => h === "opt").length;
      console.log(`  ${c.ms.toFixed(2).padStart(8)} ms  ${c.fn.padEnd(32)} before: ${opts} compiles${c.before.length > 0 ? `, last ${c.before.slice(-2).join(" / ")}` : ""}`);
    }
    console.log(`deoptimizations in the run: ${deopts.length}`);
    for (const d of deopts) console.log(`  ${d}`);
  } finally {
    await cluster.destroy();
  }
}

if (process.argv[1]?.endsWith("cold_compiles.ts")) void main();
