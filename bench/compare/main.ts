/**
 * Side-by-side: real etcd and etcetera, 3 members each on loopback with the same flags, the
 * seed matrix of issue 8 run in alternating rounds, medians, ratios, peak RSS per member.
 *
 *   npx tsx bench/compare/main.ts [--rounds=3] [--quick] [--only=etcd|etcetera] [--rows=id,id]
 *                                 [--driver=etcd|node] [--workers=N] [--out=bench/results] [--no-install]
 *                                 [--run-timeout=SEC] [--cold=N] [--warmup=N]
 *
 * The load comes from etcd's own benchmark tool (`--driver etcd`, the default: ../shared/bin/
 * etcd-benchmark or $ETCD_BENCHMARK, etcd-tool.ts) or from the project's Node.js generator
 * (`--driver node`; --workers applies to it only). Every (round, target, row) runs on a fresh
 * cluster, so rows do not inherit each other's data and peak RSS (VmHWM) belongs to that row.
 * On it: the cold run (the row's command for the cluster's first --cold requests, default 3,000
 * or the row's total if smaller, 0 = none), the warm-up (--warmup requests at 100 clients or
 * more, default 6,000), then the measured (warm) run. Around the cold and the warm run each
 * member's CPU is read from /proc per process and per thread (proc-cpu.ts), as µs per request. Round r runs etcd first when r is odd, etcetera
 * first when r is even. Writes bench/results/<date>.json, <date>.md and <date>.svg (and
 * latest.md / latest.svg). A cluster that fails to start is started again, fresh, up to
 * START_ATTEMPTS_MAX times (attempts.ts); a target is never dropped for later rows. A run that
 * fails is recorded as failed; the script goes on, and at the end it refuses to write a table
 * (md, svg, latest.*) whose cells hold unequal round counts: the JSON with every run is still
 * written, and the exit status is 1.
 */
import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { availableParallelism, cpus, totalmem } from "node:os";
import { join, relative } from "node:path";
import { Conn } from "../benchmark/conn.js";
import { METHODS, encodePut } from "../benchmark/proto.js";
import { withStartRetries } from "./attempts.js";
import { runBenchmarkChild } from "./bench-child.js";
import { BenchCluster, ETCD_BIN, ROOT, SERVER_JS, TARGETS, type Target } from "./cluster.js";
import { type DriverResult, etcdBenchmarkPath, requireEtcdBenchmark, runEtcdBenchmark } from "./etcd-tool.js";
import { type MatrixRow, RANGE_KEY, RANGE_VALUE_BYTES, rowEndpoints, seedMatrix } from "./matrix.js";
import { type MemberCpu, type ProcessSample, cpuBetween, sampleProcess } from "./proc-cpu.js";
import { hasLeader, leaderIndex } from "./ready.js";
import { coldCpuTable, markdownTable, svgChart } from "./render.js";
import { type PhaseRecord, type RunRecord, assertEqualRounds, summarizeRows } from "./summary.js";

export type Driver = "etcd" | "node";

interface CompareOptions {
  rounds: number;
  quick: boolean;
  only: Target | undefined;
  rows: string[] | undefined;
  workers: number | undefined;
  outDir: string;
  install: boolean;
  runTimeoutMs: number;
  /** Requests of the same command run (and not counted) before each measured run; 0 = none. */
  warmup: number | undefined;
  /** Who sends the load: etcd's benchmark tool or the Node.js generator. */
  driver: Driver;
  /** Requests of the cold run (a fresh cluster's first requests); 0 = no cold run. */
  cold: number;
}

function parseOptions(argv: string[]): CompareOptions {
  const o: CompareOptions = {
    rounds: 3,
    quick: false,
    only: undefined,
    rows: undefined,
    // One generator thread by default: on a small machine shared with the 3 members, more
    // threads only take CPU from the servers (see bench/compare/workers.ts for the evidence).
    workers: availableParallelism() >= 8 ? undefined : 1,
    outDir: join(ROOT, "bench/results"),
    install: true,
    runTimeoutMs: 300_000,
    warmup: undefined,
    driver: "etcd",
    cold: DEFAULT_COLD_REQUESTS,
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] as string;
    const [k, inline] = a.includes("=") ? [a.slice(0, a.indexOf("=")), a.slice(a.indexOf("=") + 1)] : [a, undefined];
    const val = () => inline ?? (argv[++i] as string);
    if (k === "--rounds") o.rounds = Number(val());
    else if (k === "--quick") o.quick = true;
    else if (k === "--only") {
      const t = val();
      if (t !== "etcd" && t !== "etcetera") throw new Error(`--only must be etcd or etcetera, got ${t}`);
      o.only = t;
    } else if (k === "--rows") o.rows = val().split(",");
    else if (k === "--workers") o.workers = Number(val());
    else if (k === "--out") o.outDir = val();
    else if (k === "--no-install") o.install = false;
    else if (k === "--run-timeout") o.runTimeoutMs = Number(val()) * 1000;
    else if (k === "--warmup") o.warmup = Number(val());
    else if (k === "--cold") o.cold = Math.max(0, Math.floor(Number(val())));
    else if (k === "--driver") {
      const d = val();
      if (d !== "etcd" && d !== "node") throw new Error(`--driver must be etcd or node, got ${d}`);
      o.driver = d;
    } else throw new Error(`unknown option ${a}`);
  }
  if (!(o.rounds >= 1)) throw new Error("--rounds must be at least 1");
  return o;
}

const log = (s: string) => process.stderr.write(`[compare] ${s}\n`);

/** Debian's etcd-server when /usr/bin/etcd is missing (root or sudo). */
function ensureEtcd(install: boolean): void {
  if (existsSync(ETCD_BIN)) return;
  if (!install) throw new Error(`${ETCD_BIN} missing and --no-install given`);
  log("installing Debian's etcd-server and etcd-client with apt-get");
  const sudo = process.getuid?.() === 0 ? [] : ["sudo"];
  const run = (args: string[]) => {
    const r = spawnSync(sudo[0] ?? args[0] as string, sudo.length > 0 ? args : args.slice(1), { stdio: "inherit", env: { ...process.env, DEBIAN_FRONTEND: "noninteractive" } });
    if (r.status !== 0) throw new Error(`${args.join(" ")} failed`);
  };
  run(["apt-get", "update"]);
  run(["apt-get", "install", "-y", "etcd-server", "etcd-client"]);
}

/** Builds dist/server.js when missing; false (with the reason logged) when it cannot. */
function ensureEtcetera(): string | undefined {
  if (existsSync(SERVER_JS)) return undefined;
  log("dist/server.js missing: npm run build");
  const r = spawnSync("npm", ["run", "build"], { cwd: ROOT, encoding: "utf8" });
  if (r.status === 0 && existsSync(SERVER_JS)) return undefined;
  return `build failed: ${(r.stderr || r.stdout || "").slice(-400)}`;
}

async function seedRangeKey(endpoints: string[]): Promise<void> {
  const c = new Conn(endpoints);
  try {
    await c.waitReady(10_000);
    await c.unary(METHODS.put, encodePut(Buffer.from(RANGE_KEY), Buffer.alloc(RANGE_VALUE_BYTES, 0x61)));
  } finally {
    c.close();
  }
}

/**
 * Requests of a row's own command sent before it is measured, on both targets alike. A fresh
 * Node.js process runs its first thousands of requests in the interpreter and baseline
 * compiler before the optimizing compiler has seen them; a Go binary has no such phase. Without a
 * warm-up a 1,000-request row measures mostly that phase (measured: a serializable range at one
 * client on a fresh cluster ran at 0.5-0.7× its steady speed over its first 6,000 requests).
 * Default: 6,000 requests at 100 clients or more (see warmupArgs), a second or two per run, so the
 * full matrix stays within its 15 minutes (put rows overwrite keys of their own key space, so the
 * key count is kept).
 */
const DEFAULT_WARMUP_REQUESTS = 6_000;
/** A fresh member's first requests, measured on their own (issue 18: 0.50× etcd at one client). */
const DEFAULT_COLD_REQUESTS = 3_000;
const WARMUP_CLIENTS_MIN = 100;
const WARMUP_CONNS_MIN = 10;

function warmupRequests(opts: CompareOptions): number {
  return opts.warmup !== undefined ? Math.max(0, Math.floor(opts.warmup)) : DEFAULT_WARMUP_REQUESTS;
}

/**
 * The row's own command with `total` requests, sent by at least 100 clients over 10 connections:
 * the same code paths as the row, warmed in a second or two even for a one-client row.
 */
function warmupArgs(args: string[], total: number): string[] {
  invariantArg(args.some((a) => a.startsWith("--total=")), `row arguments carry no --total: ${args.join(" ")}`);
  const atLeast = (a: string, flag: string, min: number): string => (a.startsWith(`${flag}=`) ? `${flag}=${Math.max(min, Number(a.slice(flag.length + 1)))}` : a);
  return args.map((a) => (a.startsWith("--total=") ? `--total=${total}` : atLeast(atLeast(a, "--clients", WARMUP_CLIENTS_MIN), "--conns", WARMUP_CONNS_MIN)));
}

function invariantArg(ok: boolean, message: string): asserts ok {
  if (!ok) throw new Error(message);
}

/** The row's command with another --total. */
function withTotal(args: string[], total: number): string[] {
  invariantArg(args.some((a) => a.startsWith("--total=")), `row arguments carry no --total: ${args.join(" ")}`);
  return args.map((a) => (a.startsWith("--total=") ? `--total=${total}` : a));
}

/** One run of the chosen load driver. */
async function runDriver(endpoints: string[], args: string[], opts: CompareOptions): Promise<DriverResult> {
  if (opts.driver === "etcd") return runEtcdBenchmark(endpoints, args, { timeoutMs: opts.runTimeoutMs });
  const childOpts = { ...(opts.workers !== undefined ? { workers: opts.workers } : {}), timeoutMs: opts.runTimeoutMs };
  const j = await runBenchmarkChild(endpoints, args, childOpts);
  const s = j.series[0];
  if (s === undefined) throw new Error("benchmark printed no series");
  const firstError = Object.keys(s.errors)[0];
  return { count: s.count, errorCount: s.errorCount, rps: s.rps, avgMs: s.averageSec * 1000, p99Ms: s.p99Sec * 1000, ...(firstError !== undefined ? { firstError } : {}) };
}

/** Each member's process and threads now (undefined for a member that is gone). */
function sampleMembers(cluster: BenchCluster): Array<ProcessSample | undefined> {
  return cluster.pids().map((pid) => (pid > 0 ? sampleProcess(pid) : undefined));
}

/** A driver run with every member's CPU read from /proc before and after it. */
async function measured(cluster: BenchCluster, leader: number, run: () => Promise<DriverResult>): Promise<PhaseRecord & { count: number; errorCount: number; firstError?: string }> {
  const before = sampleMembers(cluster);
  const r = await run();
  const after = sampleMembers(cluster);
  const cpu: MemberCpu[] = [];
  cluster.members.forEach((mem, i) => {
    const b = before[i];
    const a = after[i];
    if (b === undefined || a === undefined || a.pid !== b.pid) return;
    cpu.push({ name: mem.name, role: i === leader ? "leader" : "follower", ...cpuBetween(b, a, r.count + r.errorCount) });
  });
  return { ...r, cpu };
}

/** "leader 120 µs (main 80), followers 60/58 µs" for the log. */
function cpuNote(cpu: MemberCpu[] | undefined): string {
  if (cpu === undefined || cpu.length === 0) return "no CPU figures";
  const f = (v: number) => v.toFixed(0);
  const leader = cpu.find((c) => c.role === "leader");
  const followers = cpu.filter((c) => c.role === "follower").map((c) => f(c.usPerRequest));
  const busiest = leader?.threads[0];
  const sys = leader?.syscallsPerRequest;
  return (
    `leader ${leader !== undefined ? f(leader.usPerRequest) : "?"} µs/req (busiest thread ${busiest !== undefined ? `${busiest.comm} ${f(busiest.usPerRequest)}` : "?"}` +
    `${sys !== undefined ? `, ${sys.reads.toFixed(2)} reads + ${sys.writes.toFixed(2)} writes/req` : ""}), followers ${followers.join("/")} µs/req`
  );
}

/** The cluster did not come up: the run is tried again on a fresh cluster (attempts.ts). */
class StartFailed extends Error {}

async function runOne(target: Target, row: MatrixRow, round: number, opts: CompareOptions, unavailable: string | undefined): Promise<RunRecord> {
  const rec: RunRecord = { row: row.id, target, round, ok: false };
  if (unavailable !== undefined) return { ...rec, error: unavailable };
  const t0 = performance.now();
  let cluster: BenchCluster | undefined;
  try {
    cluster = await BenchCluster.create({ target, size: 3 });
    await cluster.start(30_000, hasLeader).catch((e: unknown) => {
      throw new StartFailed(`cluster did not start: ${e instanceof Error ? e.message : String(e)}`);
    });
    if (row.seedRangeKey) await seedRangeKey(cluster.endpoints);
    const leader = await leaderIndex(cluster.endpoints);
    const endpoints = rowEndpoints(cluster.endpoints, leader, row.firstEndpoint);
    const drive = (args: string[]) => runDriver(endpoints, args, opts);
    const coldTotal = Math.min(opts.cold, row.total);
    const cold = coldTotal > 0 ? await measured(cluster, leader, () => drive(withTotal(row.args, coldTotal))) : undefined;
    const warm = warmupRequests(opts);
    if (warm > 0) await drive(warmupArgs(row.args, warm));
    const m = await measured(cluster, leader, () => drive(row.args));
    if (m.count === 0) throw new Error(`every request failed: ${m.firstError ?? "?"}`);
    const dead = cluster.members.filter((mem) => mem.proc === undefined).map((mem) => mem.name);
    if (dead.length > 0) throw new Error(`member(s) ${dead.join(", ")} died during the run`);
    return {
      ...rec,
      ok: true,
      driver: opts.driver,
      rps: m.rps,
      avgMs: m.avgMs,
      p99Ms: m.p99Ms,
      errorCount: m.errorCount,
      cpu: m.cpu,
      ...(cold !== undefined ? { cold } : {}),
      peakRssBytes: cluster.peakRss().sort((a, b) => b - a),
      wallSec: (performance.now() - t0) / 1000,
    };
  } catch (e) {
    return { ...rec, error: e instanceof Error ? e.message : String(e), wallSec: (performance.now() - t0) / 1000, startFailed: e instanceof StartFailed };
  } finally {
    await cluster?.destroy();
  }
}

function machine(): Record<string, unknown> {
  const etcdVersion = (() => {
    try {
      return execFileSync(ETCD_BIN, ["--version"], { encoding: "utf8" }).split("\n")[0];
    } catch {
      return "unknown";
    }
  })();
  return {
    cpus: availableParallelism(),
    cpuModel: cpus()[0]?.model ?? "unknown",
    memBytes: totalmem(),
    kernel: (() => {
      try {
        return readFileSync("/proc/version", "utf8").trim();
      } catch {
        return "unknown";
      }
    })(),
    node: process.version,
    etcd: etcdVersion,
    loadAverageAtStart: readFileSync("/proc/loadavg", "utf8").trim(),
    etcdBenchmark: etcdBenchmarkPath(),
  };
}

async function main(): Promise<void> {
  const opts = parseOptions(process.argv.slice(2));
  if (opts.driver === "etcd") requireEtcdBenchmark();
  const targets = opts.only !== undefined ? [opts.only] : [...TARGETS];
  if (targets.includes("etcd")) ensureEtcd(opts.install);
  const buildError = targets.includes("etcetera") ? ensureEtcetera() : undefined;
  if (buildError !== undefined) log(`etcetera unavailable, its rows will be marked failed: ${buildError}`);
  const rows = seedMatrix({ quick: opts.quick }).filter((r) => opts.rows === undefined || opts.rows.includes(r.id));
  if (rows.length === 0) throw new Error("no rows selected");
  const startedAt = new Date();
  const info = machine();
  const runs: RunRecord[] = [];
  for (let round = 1; round <= opts.rounds; round++) {
    const order = round % 2 === 1 ? targets : [...targets].reverse();
    for (const target of order) {
      for (const row of rows) {
        const unavailable = target === "etcetera" ? buildError : undefined;
        const rec = await withStartRetries(
          () => runOne(target, row, round, opts, unavailable),
          undefined,
          (failed, n) => log(`round ${round} ${target} ${row.id}: start ${n} failed, starting a fresh cluster: ${(failed.error ?? "").split("\n")[0]}`),
        );
        runs.push(rec);
        log(
          `round ${round} ${target.padEnd(8)} ${row.id.padEnd(20)} ` +
            (rec.ok
              ? `${Math.round(rec.rps ?? 0)} req/s avg ${(rec.avgMs ?? 0).toFixed(2)} ms p99 ${(rec.p99Ms ?? 0).toFixed(2)} ms peak RSS ${(rec.peakRssBytes ?? []).map((b) => (b / 1048576).toFixed(0)).join("/")} MB, ${cpuNote(rec.cpu)}` +
                (rec.cold !== undefined ? `; cold ${Math.round(rec.cold.rps)} req/s p99 ${rec.cold.p99Ms.toFixed(2)} ms, ${cpuNote(rec.cold.cpu)}` : "") +
                ` (${(rec.wallSec ?? 0).toFixed(1)} s)`
              : `FAILED: ${(rec.error ?? "").split("\n")[0]}`),
        );
      }
    }
  }
  const summary = summarizeRows(rows, runs);
  let refusal: string | undefined;
  try {
    assertEqualRounds(summary);
  } catch (e) {
    refusal = e instanceof Error ? e.message : String(e);
  }
  const stamp = startedAt.toISOString().replace(/[:]/g, "-").replace(/\.\d+Z$/, "Z");
  mkdirSync(opts.outDir, { recursive: true });
  const warmNote = opts.warmup === 0 ? "no warm-up" : opts.warmup !== undefined ? `${opts.warmup}-request warm-up per run` : `${DEFAULT_WARMUP_REQUESTS}-request warm-up per run`;
  const coldNote = opts.cold > 0 ? `cold = a fresh cluster's first ${opts.cold.toLocaleString("en-US")} requests (or the row's total if smaller)` : "no cold run";
  const subtitle = `${opts.driver === "etcd" ? "etcd's benchmark tool" : "Node.js load generator"}, ${opts.quick ? "quick totals" : "full totals"}, median of ${opts.rounds} round(s), ${warmNote}, ${info.cpus} CPUs, ${String(info.etcd)}, node ${process.version}, ${startedAt.toISOString()}`;
  const md =
    `### etcetera vs etcd (${startedAt.toISOString().slice(0, 10)}, ${subtitle})\n\n` +
    markdownTable(summary) +
    `\nRatios are etcetera / etcd (req/s: higher is better; p99: lower is better). (n; range): rounds each median is taken over, and the lowest and highest round. Peak RSS is VmHWM per member, largest first.\n\n` +
    `Cold (${coldNote}) and CPU per request (utime + stime from /proc/<pid>/stat and /proc/<pid>/task/<tid>/stat over the measured warm run, divided by its requests; busiest thread: its comm):\n\n` +
    coldCpuTable(summary) +
    `\nEvery run, with every member's threads: \`${relative(ROOT, join(opts.outDir, stamp))}.json\`.\n`;
  const svg = svgChart(summary, subtitle);
  const wallSec = (Date.now() - startedAt.getTime()) / 1000;
  const json = { startedAt: startedAt.toISOString(), wallSec, options: opts, machine: info, rows, runs, summary, ...(refusal !== undefined ? { refusal } : {}) };
  const base = join(opts.outDir, stamp);
  writeFileSync(`${base}.json`, JSON.stringify(json, null, 2) + "\n");
  if (refusal !== undefined) {
    log(`wrote ${base}.json (every run); no table: ${refusal}`);
    process.exitCode = 1;
    return;
  }
  writeFileSync(`${base}.md`, md);
  writeFileSync(`${base}.svg`, svg);
  writeFileSync(join(opts.outDir, "latest.md"), md);
  writeFileSync(join(opts.outDir, "latest.svg"), svg);
  process.stdout.write(md);
  log(`wrote ${base}.{json,md,svg} in ${wallSec.toFixed(0)} s`);
}

main().then(
  () => process.exit(process.exitCode ?? 0),
  (e: unknown) => {
    process.stderr.write(`compare: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
    process.exit(1);
  },
);
