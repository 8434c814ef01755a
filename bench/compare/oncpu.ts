/**
 * Where the leader's main thread spends its CPU, counted only while it is on a CPU: `perf record
 * -e cpu-clock` on that one thread, with V8's jitdump (`node --perf-prof`, `perf inject --jit`)
 * so that JavaScript frames are named even after V8 moves or frees code. One fresh 3-member
 * etcetera cluster, etcd's benchmark tool putting to the leader (warm-up, then a measured run,
 * perf attached for `--seconds` in its middle).
 *
 *   npx tsx bench/compare/oncpu.ts [--conns=100] [--clients=1000] [--warmup=20000] [--total=50000]
 *                                  [--seconds=3] [--server=dist/server.js] [--out=DIR] [--env=K=V,...]
 *   npx tsx bench/compare/oncpu.ts --report=DIR/perf.script     (a saved run's table again)
 *
 * Why not profile.ts: V8's --cpu-prof samples a thread whether or not it runs, so a thread
 * preempted in a socket write (whose wake-up of the reader preempts the writer on 2 vCPUs) is
 * counted as busy there: its "busy" time was twice the thread's /proc CPU time at 1,000 clients,
 * and `writeBuffer` took 17% of it. perf's cpu-clock counts only time on a CPU. Needs `perf`
 * (linux-perf) with permission to trace the process; not part of CI.
 *
 * Prints each sample's area: the first project frame from the leaf up (kernel and native work
 * count for the project code that called it), GC with no JavaScript frame under it, else the leaf.
 */
import { execFileSync, spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { BenchCluster, ROOT } from "./cluster.js";
import { runEtcdBenchmark } from "./etcd-tool.js";
import { putLoad, startAndWarm } from "./put_load.js";

const GC_LEAF = /Scaveng|MarkCompact|Marking|GCTracer|Heap::|MinorGC|Sweeper|Evacuat|ConcurrentMarking|IncrementalMarking/;
const PROJECT_FRAME = /\/(dist|node_modules)\/(.+?)\.js/;

/** The area a stack (leaf first) is charged to. */
export function areaOf(stack: readonly string[]): string {
  const leaf = stack[0] ?? "";
  const js = stack.slice(0, 3).some((f) => f.startsWith("JS:"));
  if (GC_LEAF.test(leaf) && !js) return "garbage collection";
  for (const frame of stack) {
    const m = PROJECT_FRAME.exec(frame);
    if (m === null) continue;
    if (m[1] === "node_modules") return m[2]!.startsWith("sorted-btree") ? "mvcc" : `node_modules/${m[2]!.split("/")[0]}`;
    return areaOfFile(m[2]!);
  }
  if (stack.some((f) => f.startsWith("JS:") && f.includes("node:"))) return "node internals (no project frame)";
  return `native: ${leaf.slice(0, 48)}`;
}

function areaOfFile(file: string): string {
  const [dir, sub] = file.split("/");
  if (dir === "grpc") return sub === "h2" ? "client port: HTTP/2 (grpc/h2)" : "client port: gRPC calls (grpc)";
  if (dir === "server" && sub === "api") return "client port: services (server/api)";
  if (dir === "server" && sub === "transport") return "peer transport";
  if (dir === "server" && sub === "front_end") return "front-end hand-off";
  if (dir === "server") return `server: ${sub}`;
  if (dir === "pb") return "protobuf";
  return dir ?? file;
}

/** perf script's output (`-F ip,sym`): one stack per blank-line-separated block, leaf first. */
export function parseStacks(text: string): string[][] {
  return text
    .split("\n\n")
    .map((block) =>
      block
        .split("\n")
        .map((l) => l.trim())
        .filter((l) => l !== "")
        .map((l) => {
          const sp = l.indexOf(" ");
          return sp < 0 ? l : l.slice(sp + 1);
        }),
    )
    .filter((s) => s.length > 0);
}

function opt(name: string, dflt: string): string {
  const a = process.argv.find((x) => x.startsWith(`--${name}=`));
  return a === undefined ? dflt : a.slice(name.length + 3);
}

async function main(): Promise<void> {
  const outDir = resolve(opt("out", mkdtempSync(join(tmpdir(), "oncpu-"))));
  mkdirSync(outDir, { recursive: true });
  const seconds = Number(opt("seconds", "3"));
  const total = Number(opt("total", "50000"));
  const env = Object.fromEntries(
    opt("env", "")
      .split(",")
      .filter((kv) => kv.includes("="))
      .map((kv) => [kv.slice(0, kv.indexOf("=")), kv.slice(kv.indexOf("=") + 1)]),
  );
  // V8 writes each member's jit-<pid>.dump into its working directory: the members inherit ours.
  process.chdir(outDir);
  const load = putLoad({ total, conns: opt("conns", "100"), clients: opt("clients", "1000"), toLeader: true });
  const cluster = await BenchCluster.create({
    target: "etcetera",
    size: 3,
    nodeArgs: ["--perf-prof"],
    env,
    serverJs: resolve(ROOT, opt("server", "dist/server.js")),
  });
  try {
    const leader = await startAndWarm(cluster, load, Number(opt("warmup", "20000")));
    const pid = cluster.pids()[leader];
    if (pid === undefined) throw new Error("no leader pid");
    const run = runEtcdBenchmark(cluster.endpoints, load(total), { timeoutMs: 600_000 });
    await new Promise((r) => setTimeout(r, 1000));
    const raw = join(outDir, "perf.raw");
    // -k 1: the monotonic clock jitdump's records are stamped with; -t: the main thread only (its tid is the pid).
    const rec = spawnSync("perf", ["record", "-k", "1", "-e", "cpu-clock", "-F", "2000", "-g", "-t", String(pid), "-o", raw, "--", "sleep", String(seconds)], { encoding: "utf8" });
    if (rec.status !== 0) throw new Error(`perf record failed: ${rec.stderr}`);
    const r = await run;
    process.stdout.write(`leader: ${Math.round(r.rps)} req/s, avg ${r.avgMs.toFixed(2)} ms, p99 ${r.p99Ms.toFixed(2)} ms, ${r.errorCount} errors\n`);
    const jitted = join(outDir, "perf.data");
    execFileSync("perf", ["inject", "--jit", "-i", raw, "-o", jitted], { stdio: "ignore", cwd: outDir });
    const script = execFileSync("perf", ["script", "-i", jitted, "-F", "ip,sym"], { encoding: "utf8", maxBuffer: 1 << 30, stdio: ["ignore", "pipe", "ignore"] });
    writeFileSync(join(outDir, "perf.script"), script);
    report(parseStacks(script));
  } finally {
    await cluster.stop();
  }
}

/** The function a stack is charged to: its first project (or node_modules) frame from the leaf up, else the leaf. */
export function functionOf(stack: readonly string[]): string {
  for (const frame of stack) {
    if (PROJECT_FRAME.test(frame)) return frame.replace(/^JS:/, "").replace(/\S*?\/(dist|node_modules)\//, "").slice(0, 80);
  }
  return stack[0] ?? "";
}

function shares(stacks: string[][], key: (s: string[]) => string, top: number, digits: number): void {
  const counts = new Map<string, number>();
  for (const s of stacks) {
    const k = key(s);
    counts.set(k, (counts.get(k) ?? 0) + 1);
  }
  for (const [k, n] of [...counts].sort((x, y) => y[1] - x[1]).slice(0, top)) {
    process.stdout.write(`${((100 * n) / stacks.length).toFixed(digits).padStart(6)}%  ${k}\n`);
  }
}

function report(stacks: string[][]): void {
  process.stdout.write(`leader main thread: ${stacks.length} on-CPU samples; share by area:\n`);
  shares(stacks, areaOf, 30, 1);
  process.stdout.write("--- by function (first project or node_modules frame from the leaf):\n");
  shares(stacks, functionOf, 45, 2);
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === resolve(import.meta.filename)) {
  // --report=DIR/perf.script reads a saved run again instead of making one.
  const saved = opt("report", "");
  if (saved !== "") report(parseStacks(readFileSync(saved, "utf8")));
  else
    main().catch((err: unknown) => {
      process.stderr.write(`${String(err)}\n`);
      process.exit(1);
    });
}
