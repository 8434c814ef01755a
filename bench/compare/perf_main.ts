/**
 * Where a member's main thread spends a put, kernel included: one fresh 3-member etcetera cluster
 * run with `node --perf-basic-prof` (so perf names JavaScript frames), loaded by etcd's benchmark
 * tool; `perf record -g` samples the chosen members' main threads over the measured run only, and
 * each sample is sorted into a category (perf_categories.ts). Each share is turned into µs per put
 * with the thread's CPU read from /proc over the same window.
 *
 *   npx tsx bench/compare/perf_main.ts [--all-members] [--followers] [--all-threads] [--conns=100]
 *        [--clients=1000] [--total=30000] [--warmup=6000] [--top=30] [--freq=1999] [--keep=DIR]
 *
 * --followers samples the followers' main threads too; --all-threads samples every thread of the
 * sampled members (libuv's pool, V8's helpers) and breaks each busy one down; --all-members spreads
 * the puts over every member. Needs perf (linux-perf) and the right to sample the members (root, or
 * kernel.perf_event_paranoid <= 1). Unlike V8's profiler (profile.ts) it does not charge a system
 * call or a page fault to the JavaScript frame that happened to be on top.
 */
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BenchCluster } from "./cluster.js";
import { runEtcdBenchmark } from "./etcd-tool.js";
import { breakdown, formatBreakdown, parsePerfScript } from "./perf_categories.js";
import { cpuBetween, sampleProcess } from "./proc-cpu.js";
import { putLoad, startAndWarm } from "./put_load.js";

function opt(argv: string[], name: string, dflt: string): string {
  return argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? dflt;
}

function requirePerf(): void {
  const r = spawnSync("perf", ["--version"], { encoding: "utf8" });
  if (r.status !== 0) throw new Error("perf_main: needs `perf` on PATH (Debian: apt-get install linux-perf)");
}

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  requirePerf();
  const total = Number(opt(argv, "total", "30000"));
  const top = Number(opt(argv, "top", "30"));
  const freq = opt(argv, "freq", "1999");
  const keep = opt(argv, "keep", "");
  const dir = keep !== "" ? keep : mkdtempSync(join(tmpdir(), "etcetera-perf-"));
  const load = putLoad({ total, conns: opt(argv, "conns", "100"), clients: opt(argv, "clients", "1000"), toLeader: !argv.includes("--all-members") });
  const cluster = await BenchCluster.create({ target: "etcetera", size: 3, nodeArgs: ["--perf-basic-prof"] });
  let pids: number[] = [];
  try {
    const leader = await startAndWarm(cluster, load, Number(opt(argv, "warmup", "6000")));
    pids = cluster.pids();
    const order = [leader, ...pids.map((_, i) => i).filter((i) => i !== leader)];
    const sampled = argv.includes("--followers") ? order : [leader];
    // A process's main thread has the process's id as its thread id.
    const tids = sampled.map((i) => pids[i] as number);
    const allThreads = argv.includes("--all-threads");
    const data = join(dir, "perf.data");
    const target = allThreads ? ["-p", tids.join(",")] : ["-t", tids.join(",")];
    const rec = spawn("perf", ["record", "-g", "-F", freq, ...target, "-o", data], { stdio: ["ignore", "ignore", "pipe"] });
    let recErr = "";
    rec.stderr.on("data", (c: Buffer) => (recErr += c.toString()));
    await new Promise((r) => setTimeout(r, 300)); // perf attaches
    const before = pids.map((pid) => sampleProcess(pid));
    const r = await runEtcdBenchmark(cluster.endpoints, load(total), { timeoutMs: 600_000 });
    const after = pids.map((pid) => sampleProcess(pid));
    await new Promise<void>((res) => {
      rec.once("exit", () => res());
      rec.kill("SIGINT");
    });
    const script = spawnSync("perf", ["script", "-i", data, "-F", "comm,tid,time,ip,sym,dso"], { encoding: "utf8", maxBuffer: 1 << 30 });
    if (script.status !== 0) throw new Error(`perf script failed: ${script.stderr}\n${recErr}`);
    writeFileSync(join(dir, "window.json"), JSON.stringify({ requests: r.count, rps: r.rps }) + "\n");
    const samples = parsePerfScript(script.stdout);
    const requests = r.count + r.errorCount;
    process.stdout.write(`${argv.includes("--all-members") ? "all members" : "leader"}: ${Math.round(r.rps)} req/s, p99 ${r.p99Ms.toFixed(2)} ms, ${r.errorCount} errors\n`);
    for (const i of sampled) {
      const pid = pids[i] as number;
      const b = before[i];
      const a = after[i];
      const threads = b !== undefined && a !== undefined ? cpuBetween(b, a, requests).threads : [];
      const mainUs = threads.find((t) => t.main)?.usPerRequest ?? 0;
      const mine = samples.filter((s) => s.tid === pid);
      process.stdout.write(`\n==== ${cluster.members[i]?.name} (${i === leader ? "leader" : "follower"}, pid ${pid}): main thread ${mainUs.toFixed(1)} µs/put (/proc)\n`);
      process.stdout.write(formatBreakdown(breakdown(mine), mainUs, top).join("\n") + "\n");
      if (!allThreads) continue;
      // The other threads that took at least 1 µs per put, each broken down the same way.
      for (const t of threads.filter((x) => !x.main && x.usPerRequest >= 1).sort((x, y) => y.usPerRequest - x.usPerRequest)) {
        process.stdout.write(`\n  -- thread ${t.tid} (${t.comm}): ${t.usPerRequest.toFixed(1)} µs/put (/proc)\n`);
        process.stdout.write(formatBreakdown(breakdown(samples.filter((s) => s.tid === t.tid)), t.usPerRequest, Math.min(top, 12)).join("\n") + "\n");
      }
    }
  } finally {
    await cluster.stop();
    if (keep === "") rmSync(dir, { recursive: true, force: true });
    // --perf-basic-prof leaves one map per member in /tmp.
    for (const pid of pids) rmSync(`/tmp/perf-${pid}.map`, { force: true });
  }
}

await main();
