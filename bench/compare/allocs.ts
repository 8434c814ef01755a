/**
 * Where the leader's garbage comes from under put load (issue 18: the collector is 9–11% of the
 * leader's main thread on-CPU): one fresh 3-member etcetera cluster with --enable-pprof, etcd's
 * benchmark tool putting to the leader (warm-up, then a measured run), and the leader's
 * /debug/pprof/allocs (V8's sampling heap profiler, collected objects kept) for `--seconds` in its
 * middle. Prints bytes allocated per put by function (self), and by the first project frame from
 * the allocating one up, with the file:line.
 *
 *   npx tsx bench/compare/allocs.ts [--conns=100] [--clients=1000] [--warmup=20000] [--total=60000]
 *                                   [--seconds=4] [--server=dist/server.js] [--keep=FILE.heapprofile]
 *   npx tsx bench/compare/allocs.ts --report=FILE.heapprofile --puts=N   (a saved profile again)
 *
 * The puts in the sampled window are counted from etcd_mvcc_put_total before and after it.
 * Sampled bytes are V8's estimate (one sample per 32 KiB allocated, scaled), so a line below
 * ~0.5% of the total is noise; compare builds by their top lines.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { resolve } from "node:path";
import { BenchCluster, ROOT } from "./cluster.js";
import { runEtcdBenchmark } from "./etcd-tool.js";
import { putLoad, startAndWarm } from "./put_load.js";

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
  columnNumber: number;
}
interface ProfileNode {
  callFrame: CallFrame;
  selfSize: number;
  children: ProfileNode[];
}
export interface HeapProfile {
  head: ProfileNode;
}

function opt(name: string, dflt: string): string {
  const a = process.argv.find((x) => x.startsWith(`--${name}=`));
  return a === undefined ? dflt : a.slice(name.length + 3);
}

const PROJECT = /\/(dist|node_modules)\/(.+)$/;

function frameText(f: CallFrame): string {
  const m = PROJECT.exec(f.url);
  const where = m === null ? f.url : m[2]!;
  return `${f.functionName || "(anonymous)"} ${where}:${f.lineNumber + 1}`;
}

/**
 * Bytes by allocating function (self) and by the first project frame on the way up from it
 * (native and node: internals are charged to the project code that called them).
 */
export function allocationsBy(profile: HeapProfile): { self: Map<string, number>; project: Map<string, number>; total: number } {
  const self = new Map<string, number>();
  const project = new Map<string, number>();
  let total = 0;
  const walk = (n: ProfileNode, nearestProject: string | undefined): void => {
    const text = frameText(n.callFrame);
    const here = PROJECT.test(n.callFrame.url) ? text : nearestProject;
    if (n.selfSize > 0) {
      total += n.selfSize;
      self.set(text, (self.get(text) ?? 0) + n.selfSize);
      const p = here ?? "(no project frame)";
      project.set(p, (project.get(p) ?? 0) + n.selfSize);
    }
    for (const c of n.children) walk(c, here);
  };
  // Top-down, carrying the deepest project frame seen: the one nearest the allocation.
  walk(profile.head, undefined);
  return { self, project, total };
}

function top(map: Map<string, number>, puts: number, total: number, n: number): string {
  return [...map]
    .sort((a, b) => b[1] - a[1])
    .slice(0, n)
    .map(([k, v]) => `${(v / puts).toFixed(0).padStart(7)} B/put ${((100 * v) / total).toFixed(1).padStart(5)}%  ${k}`)
    .join("\n");
}

export function report(profile: HeapProfile, puts: number): string {
  const { self, project, total } = allocationsBy(profile);
  return [
    `sampled: ${(total / 1e6).toFixed(1)} MB over ${puts} puts, ${(total / puts).toFixed(0)} B per put`,
    "--- by allocating function (self):",
    top(self, puts, total, 30),
    "--- by the nearest project frame (dist/ or node_modules/) at or above the allocation:",
    top(project, puts, total, 30),
  ].join("\n");
}

async function putTotal(metricsUrl: string): Promise<number> {
  const text = await (await fetch(`${metricsUrl}/metrics`)).text();
  const m = /^etcd_mvcc_put_total (\d+(?:\.\d+)?(?:e\+\d+)?)$/m.exec(text);
  if (m === null) throw new Error("no etcd_mvcc_put_total in /metrics");
  return Number(m[1]);
}

async function main(): Promise<void> {
  const seconds = Number(opt("seconds", "4"));
  const total = Number(opt("total", "60000"));
  const load = putLoad({ total, conns: opt("conns", "100"), clients: opt("clients", "1000"), toLeader: true });
  const cluster = await BenchCluster.create({
    target: "etcetera",
    size: 3,
    extraArgs: ["--enable-pprof"],
    serverJs: resolve(ROOT, opt("server", "dist/server.js")),
  });
  try {
    const leader = await startAndWarm(cluster, load, Number(opt("warmup", "20000")));
    const url = cluster.members[leader]!.clientUrl;
    const run = runEtcdBenchmark(cluster.endpoints, load(total), { timeoutMs: 600_000 });
    await new Promise((r) => setTimeout(r, 1000));
    const before = await putTotal(url);
    const res = await fetch(`${url}/debug/pprof/allocs?seconds=${seconds}`);
    const after = await putTotal(url);
    if (res.status !== 200) throw new Error(`allocs: ${res.status} ${await res.text()}`);
    const text = await res.text();
    const r = await run;
    process.stdout.write(`leader: ${Math.round(r.rps)} req/s, avg ${r.avgMs.toFixed(2)} ms, p99 ${r.p99Ms.toFixed(2)} ms, ${r.errorCount} errors\n`);
    const keep = opt("keep", "");
    if (keep !== "") writeFileSync(keep, text);
    process.stdout.write(`${report(JSON.parse(text) as HeapProfile, after - before)}\n`);
  } finally {
    await cluster.stop();
  }
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === resolve(import.meta.filename)) {
  const saved = opt("report", "");
  if (saved !== "") process.stdout.write(`${report(JSON.parse(readFileSync(saved, "utf8")) as HeapProfile, Number(opt("puts", "1")))}\n`);
  else
    main().catch((err: unknown) => {
      process.stderr.write(`${String(err)}\n`);
      process.exit(1);
    });
}
