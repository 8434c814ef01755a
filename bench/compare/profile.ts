/**
 * Where a put spends its CPU on each member: one fresh 3-member etcetera cluster run under
 * `node --cpu-prof`, loaded by etcd's benchmark tool (etcd-tool.ts), with each member's CPU per
 * thread read from /proc around the measured run (proc-cpu.ts). Prints, per member (leader
 * first), µs per request by process and thread, then the profile's self time over the measured
 * run only (samples outside it are dropped), as shares by function and by source file.
 *
 *   npx tsx bench/compare/profile.ts [--all] [--conns=100] [--clients=1000] [--total=30000]
 *                                    [--warmup=6000] [--top=40] [--out=DIR] [--env=K=V,...] [-- extra put flags]
 *
 * `--env` sets the members' environment, e.g. `--env=ETCD_EXPERIMENTAL_FRONT_ENDS=2` to profile a
 * core whose client port is in front-end processes (their profiles land in DIR too, unsummarized).
 *
 * Under a loaded machine the shares hold, the absolute µs do not (issue 18).
 */
import { mkdirSync, readFileSync, readdirSync, renameSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { BenchCluster, ROOT } from "./cluster.js";
import { runEtcdBenchmark } from "./etcd-tool.js";
import { cpuBetween, sampleProcess } from "./proc-cpu.js";
import { putLoad, startAndWarm } from "./put_load.js";

export interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
export interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

/** Self time (µs) per node id of the samples taken within [fromUs, toUs] (V8's monotonic clock). */
export function selfTimes(p: CpuProfile, fromUs: number, toUs: number): Map<number, number> {
  const self = new Map<number, number>();
  let t = p.startTime;
  for (let i = 0; i < p.samples.length; i++) {
    t += p.timeDeltas[i] ?? 0;
    const next = i + 1 < p.samples.length ? (p.timeDeltas[i + 1] ?? 0) : 0;
    if (t < fromUs || t > toUs) continue;
    const id = p.samples[i] as number;
    self.set(id, (self.get(id) ?? 0) + next);
  }
  return self;
}

function shortUrl(url: string): string {
  if (url === "") return "(native)";
  const u = url.replace(/^file:\/\//, "");
  const nm = u.lastIndexOf("node_modules/");
  if (nm >= 0) return u.slice(nm + "node_modules/".length);
  return u.startsWith(ROOT) ? relative(ROOT, u) : u;
}

function top(map: Map<string, number>, total: number, n: number): string[] {
  return [...map.entries()]
    .sort((a, b) => b[1] - a[1])
    .slice(0, n)
    .map(([k, v]) => `  ${((100 * v) / total).toFixed(1).padStart(5)}%  ${k}`);
}

function summarize(p: CpuProfile, fromUs: number, toUs: number, n: number): string {
  const self = selfTimes(p, fromUs, toUs);
  const byId = new Map(p.nodes.map((x) => [x.id, x]));
  const byFn = new Map<string, number>();
  const byFile = new Map<string, number>();
  let total = 0;
  for (const [id, us] of self) {
    const cf = (byId.get(id) as ProfileNode).callFrame;
    const file = shortUrl(cf.url);
    const fn = `${cf.functionName || "(anonymous)"} ${file}:${cf.lineNumber + 1}`;
    byFn.set(fn, (byFn.get(fn) ?? 0) + us);
    if (cf.functionName !== "(idle)") byFile.set(file, (byFile.get(file) ?? 0) + us);
    total += us;
  }
  const idle = [...self].filter(([id]) => (byId.get(id) as ProfileNode).callFrame.functionName === "(idle)").reduce((s, [, us]) => s + us, 0);
  const busy = Math.max(1, total - idle);
  return [
    `main thread busy ${(busy / 1000).toFixed(0)} ms of ${(total / 1000).toFixed(0)} ms sampled; shares of busy time:`,
    " by function (self):",
    ...top(new Map([...byFn].filter(([k]) => !k.startsWith("(idle)"))), busy, n),
    " by file (self):",
    ...top(byFile, busy, 25),
  ].join("\n");
}

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  const opt = (name: string, dflt: string) => argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? dflt;
  const all = argv.includes("--all");
  const extra = argv.includes("--") ? argv.slice(argv.indexOf("--") + 1) : [];
  const total = Number(opt("total", "30000"));
  const outDir = opt("out", join(tmpdir(), `etcetera-profile-${Date.now()}`));
  mkdirSync(outDir, { recursive: true });
  const load = putLoad({ total, conns: opt("conns", "100"), clients: opt("clients", "1000"), toLeader: !all, extra });
  const env = Object.fromEntries(opt("env", "").split(",").filter((x) => x.includes("=")).map((x) => [x.slice(0, x.indexOf("=")), x.slice(x.indexOf("=") + 1)]));
  const cluster = await BenchCluster.create({ target: "etcetera", size: 3, nodeArgs: ["--cpu-prof", `--cpu-prof-dir=${outDir}`], env });
  try {
    const leader = await startAndWarm(cluster, load, Number(opt("warmup", "6000")));
    const pids = cluster.pids();
    const before = pids.map((pid) => sampleProcess(pid));
    const fromUs = Number(process.hrtime.bigint() / 1000n);
    const r = await runEtcdBenchmark(cluster.endpoints, load(total), { timeoutMs: 600_000 });
    const toUs = Number(process.hrtime.bigint() / 1000n);
    const after = pids.map((pid) => sampleProcess(pid));
    // The measured window on V8's clock (CLOCK_MONOTONIC µs), for further analysis of the profiles.
    writeFileSync(join(outDir, "window.json"), JSON.stringify({ fromUs, toUs, requests: r.count + r.errorCount, leader: cluster.members[leader]?.name }) + "\n");
    process.stdout.write(`${all ? "all members" : "leader"}: ${Math.round(r.rps)} req/s, avg ${r.avgMs.toFixed(2)} ms, p99 ${r.p99Ms.toFixed(2)} ms, ${r.errorCount} errors\n`);
    // SIGTERM: a clean stop writes each member's profile.
    await Promise.all(
      cluster.members.map(
        (m) =>
          new Promise<void>((res) => {
            if (m.proc === undefined) return res();
            m.proc.once("exit", () => res());
            m.proc.kill("SIGTERM");
          }),
      ),
    );
    const files = readdirSync(outDir).filter((f) => f.endsWith(".cpuprofile"));
    const order = [leader, ...pids.map((_, i) => i).filter((i) => i !== leader)];
    for (const i of order) {
      const pid = pids[i] as number;
      const role = i === leader ? "leader" : "follower";
      const b = before[i];
      const a = after[i];
      process.stdout.write(`\n==== ${cluster.members[i]?.name} (${role}, pid ${pid})\n`);
      if (b !== undefined && a !== undefined) {
        const c = cpuBetween(b, a, r.count + r.errorCount);
        process.stdout.write(`CPU ${c.usPerRequest.toFixed(1)} µs/req: ${c.threads.map((t) => `${t.comm}${t.main ? "(main)" : ""} ${t.usPerRequest.toFixed(1)}`).join(", ")}\n`);
        if (c.syscallsPerRequest !== undefined) process.stdout.write(`system calls per request: ${c.syscallsPerRequest.reads.toFixed(2)} reads, ${c.syscallsPerRequest.writes.toFixed(2)} writes\n`);
      }
      const f = files.find((x) => x.split(".")[3] === String(pid)); // CPU.<date>.<time>.<pid>.<tid>.<seq>.cpuprofile
      if (f === undefined) {
        process.stdout.write("no profile written\n");
        continue;
      }
      const named = join(outDir, `${cluster.members[i]?.name}-${role}.cpuprofile`);
      renameSync(join(outDir, f), named);
      process.stdout.write(`${named}\n${summarize(JSON.parse(readFileSync(named, "utf8")) as CpuProfile, fromUs, toUs, Number(opt("top", "40")))}\n`);
    }
  } finally {
    await cluster.destroy();
  }
}

// Run only as a script: handoff_share.ts imports selfTimes from here.
if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main().then(
    () => process.exit(0),
    (e: unknown) => {
      process.stderr.write(`profile: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
      process.exit(1);
    },
  );
}
