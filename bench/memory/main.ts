/**
 * Memory benchmarks mirroring etcd's published ones, for real etcd and etcetera:
 *
 *  keys       RSS per member of a 3-member cluster after 10k and after 100k puts of distinct
 *             8-byte keys with 256-byte values (etcd on GCE: 48 MB and 124 MB).
 *  watch      the watch memory model  memory = c0 + c1·connections + c2·streams + c3·watchers,
 *             fitted by least squares from RSS of one member holding real gRPC watch streams
 *             (etcd: c1 ≈ 17 KB, c2 ≈ 18 KB, c3 ≈ 350 B).
 *  checkperf  `etcdctl check perf --load=s` and `--load=m` against a 3-member cluster: PASS/FAIL
 *             and the figures it prints (60 s each).
 *
 *   npx tsx bench/memory/main.ts [--only=etcd|etcetera] [--sections=keys,watch,checkperf]
 *       [--conns-max=100] [--streams-max=1000] [--watchers-max=100000]   (etcd's scale: 1000/10000/1000000)
 *       [--watch-keys=1] (distinct keys the watchers spread over) [--out=bench/results]
 *
 * Writes bench/results/memory-<date>.json and .md.
 */
import { execFile } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Conn } from "../benchmark/conn.js";
import { WatchStream } from "../benchmark/watch-stream.js";
import { runBenchmarkChild } from "../compare/bench-child.js";
import { BenchCluster, ETCDCTL_BIN, ROOT, TARGETS, type Target } from "../compare/cluster.js";
import { hasLeader } from "../compare/ready.js";
import { watchDesign } from "./design.js";
import { leastSquares } from "./fit.js";

const MB = 1024 * 1024;
const log = (s: string) => process.stderr.write(`[memory] ${s}\n`);
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

interface Options {
  only: Target | undefined;
  sections: string[];
  connsMax: number;
  streamsMax: number;
  watchersMax: number;
  /** Distinct keys the watchers spread over (1 = all on one key, like `benchmark watch`'s default). */
  watchKeys: number;
  outDir: string;
}

function parseOptions(argv: string[]): Options {
  const o: Options = { only: undefined, sections: ["keys", "watch", "checkperf"], connsMax: 100, streamsMax: 1000, watchersMax: 100_000, watchKeys: 1, outDir: join(ROOT, "bench/results") };
  for (const a of argv) {
    const [k, v = ""] = a.split("=", 2) as [string, string?];
    if (k === "--only") {
      if (v !== "etcd" && v !== "etcetera") throw new Error("--only must be etcd or etcetera");
      o.only = v;
    } else if (k === "--sections") o.sections = v.split(",");
    else if (k === "--conns-max") o.connsMax = Number(v);
    else if (k === "--streams-max") o.streamsMax = Number(v);
    else if (k === "--watchers-max") o.watchersMax = Number(v);
    else if (k === "--watch-keys") o.watchKeys = Number(v);
    else if (k === "--out") o.outDir = v;
    else throw new Error(`unknown option ${a}`);
  }
  if (!(o.connsMax >= 10 && o.streamsMax >= o.connsMax && o.watchersMax >= o.streamsMax)) {
    throw new Error("need conns-max >= 10, streams-max >= conns-max, watchers-max >= streams-max");
  }
  return o;
}

/** RSS sampled four times, 500 ms apart, from `afterMs` after the load; the largest sample per member. */
async function settledRss(cluster: BenchCluster, afterMs = 2000): Promise<number[]> {
  await sleep(afterMs);
  let best = cluster.rss();
  for (let i = 0; i < 3; i++) {
    await sleep(500);
    best = cluster.rss().map((v, j) => Math.max(v, best[j] ?? 0));
  }
  return best;
}

/**
 * When the rested figure is read: a member that goes quiet gives its young generation back once
 * V8's allocation-rate samples cover only quiet time, 7-10 s after the load
 * (src/server/young_generation.ts); Go returns heap to the system on its own schedule too.
 */
const RESTED_AFTER_MS = 15_000;

async function withCluster<T>(target: Target, size: number, fn: (c: BenchCluster) => Promise<T>): Promise<T> {
  const c = await BenchCluster.create({ target, size });
  try {
    await c.start(30_000, hasLeader);
    return await fn(c);
  } finally {
    await c.destroy();
  }
}

// ---- keys ----

interface KeysResult {
  keys: number;
  rssBytes: number[];
  /** RSS RESTED_AFTER_MS after the last put. */
  restedRssBytes?: number[];
  peakRssBytes: number[];
  putRps: number;
}

async function keysSection(target: Target): Promise<KeysResult[]> {
  const out: KeysResult[] = [];
  for (const keys of [10_000, 100_000]) {
    out.push(
      await withCluster(target, 3, async (c) => {
        const r = await runBenchmarkChild(
          c.endpoints,
          ["--conns=100", "--clients=1000", "put", "--key-size=8", "--val-size=256", "--sequential-keys", `--key-space-size=${keys}`, `--total=${keys}`],
          { timeoutMs: 600_000 },
        );
        const done = performance.now();
        const peakRssBytes = c.peakRss().sort((a, b) => b - a);
        const rssBytes = (await settledRss(c)).sort((a, b) => b - a);
        const restedRssBytes = (await settledRss(c, Math.max(0, RESTED_AFTER_MS - (performance.now() - done)))).sort((a, b) => b - a);
        const res = { keys, rssBytes, restedRssBytes, peakRssBytes, putRps: r.series[0]?.rps ?? 0 };
        const mbs = (v: number[]) => v.map((b) => (b / MB).toFixed(1)).join(" / ");
        log(`${target} after ${keys} keys: RSS ${mbs(res.rssBytes)} MB 2 s after, ${mbs(res.restedRssBytes)} MB ${RESTED_AFTER_MS / 1000} s after, peak ${mbs(res.peakRssBytes)} MB`);
        return res;
      }),
    );
  }
  return out;
}

// ---- watch ----

interface WatchPoint {
  conns: number;
  streams: number;
  watchers: number;
  rssBytes: number;
  createSec: number;
}

interface WatchModel {
  points: WatchPoint[];
  c0Bytes: number;
  c1BytesPerConn: number;
  c2BytesPerStream: number;
  c3BytesPerWatcher: number;
  r2: number;
}

async function watchPoint(target: Target, conns: number, streams: number, watchers: number, keys: number): Promise<WatchPoint> {
  return withCluster(target, 1, async (c) => {
    const ep = c.endpoints;
    const cs = Array.from({ length: conns }, () => new Conn(ep, "grpc-js"));
    const ss: WatchStream[] = [];
    try {
      await Promise.all(cs.map((x) => x.waitReady(10_000)));
      for (let i = 0; i < streams; i++) ss.push(new WatchStream(cs[i % conns] as Conn));
      const t0 = performance.now();
      const noop = () => {};
      await Promise.all(
        ss.map(async (s, si) => {
          const mine: Array<Promise<number>> = [];
          for (let w = si; w < watchers; w += streams) mine.push(s.create(Buffer.from(`watch-mem/${w % keys}`), noop));
          await Promise.all(mine);
        }),
      );
      const createSec = (performance.now() - t0) / 1000;
      const rss = (await settledRss(c))[0] ?? 0;
      log(`${target} conns=${conns} streams=${streams} watchers=${watchers}: RSS ${(rss / MB).toFixed(1)} MB (created in ${createSec.toFixed(1)} s)`);
      return { conns, streams, watchers, rssBytes: rss, createSec };
    } finally {
      for (const s of ss) s.close();
      for (const x of cs) x.close();
    }
  });
}

async function watchSection(target: Target, o: Options): Promise<WatchModel> {
  const points: WatchPoint[] = [];
  for (const [c, s, w] of watchDesign(o.connsMax, o.streamsMax, o.watchersMax)) points.push(await watchPoint(target, c, s, w, o.watchKeys));
  const fit = leastSquares(
    points.map((p) => [p.conns, p.streams, p.watchers]),
    points.map((p) => p.rssBytes),
  );
  const [c0, c1, c2, c3] = fit.coefficients as [number, number, number, number];
  return { points, c0Bytes: c0, c1BytesPerConn: c1, c2BytesPerStream: c2, c3BytesPerWatcher: c3, r2: fit.r2 };
}

// ---- etcdctl check perf ----

interface CheckPerf {
  load: string;
  pass: boolean;
  lines: string[];
  exitCode: number;
}

function checkPerf(endpoints: string[], load: "s" | "m"): Promise<CheckPerf> {
  return new Promise((res) => {
    execFile(
      ETCDCTL_BIN,
      [`--endpoints=${endpoints.join(",")}`, "check", "perf", `--load=${load}`],
      { env: { ...process.env, ETCDCTL_API: "3" }, timeout: 180_000, maxBuffer: 16 * MB },
      (err, stdout, stderr) => {
        const text = `${stdout}\n${stderr}`;
        const lines = text.split(/\r|\n/).map((l) => l.trim()).filter((l) => /^(PASS|FAIL)/.test(l));
        const code = err === null ? 0 : typeof err.code === "number" ? err.code : 1;
        res({ load, pass: code === 0 && lines.length > 0 && lines.every((l) => l.startsWith("PASS")), lines, exitCode: code });
      },
    );
  });
}

async function checkPerfSection(target: Target): Promise<CheckPerf[]> {
  const out: CheckPerf[] = [];
  for (const load of ["s", "m"] as const) {
    out.push(await withCluster(target, 3, (c) => checkPerf(c.endpoints, load)));
    const r = out[out.length - 1] as CheckPerf;
    log(`${target} check perf --load=${load}: ${r.pass ? "PASS" : "FAIL"} ${r.lines.join(" | ")}`);
  }
  return out;
}

// ---- report ----

interface TargetReport {
  target: Target;
  keys?: KeysResult[];
  watch?: WatchModel;
  checkPerf?: CheckPerf[];
  errors: Record<string, string>;
}

function markdown(reports: TargetReport[], o: Options): string {
  const mb = (b: number) => (b / MB).toFixed(1);
  const lines: string[] = [`### Memory (${new Date().toISOString().slice(0, 10)})`, ""];
  lines.push("| | " + reports.map((r) => r.target).join(" | ") + " | etcd published (GCE) |", "|---|" + reports.map(() => "---:|").join("") + "---:|");
  for (const [i, keys] of [10_000, 100_000].entries()) {
    const published = i === 0 ? "48 MB" : "124 MB";
    const row = (what: string, f: (k: KeysResult) => number[] | undefined, pub: string) =>
      lines.push(`| ${what} | ` + reports.map((r) => (r.keys?.[i] ? (f(r.keys[i])?.map(mb).join(" / ") ?? "—") : (r.errors.keys ?? "—"))).join(" | ") + ` | ${pub} |`);
    const n = keys.toLocaleString("en-US");
    row(`RSS per member after ${n} keys, 2 s after the last put (MB, largest first)`, (k) => k.rssBytes, published);
    row(`RSS per member after ${n} keys, ${RESTED_AFTER_MS / 1000} s after the last put (MB)`, (k) => k.restedRssBytes, "");
    row(`peak RSS per member from its start to the last of ${n} puts (VmHWM, MB)`, (k) => k.peakRssBytes, "");
  }
  const coef = (f: (m: WatchModel) => number, unit: number, digits: number) => reports.map((r) => (r.watch ? (f(r.watch) / unit).toFixed(digits) : (r.errors.watch ?? "—"))).join(" | ");
  lines.push(`| watch c1 per connection (KB) | ${coef((m) => m.c1BytesPerConn, 1024, 1)} | 17 |`);
  lines.push(`| watch c2 per stream (KB) | ${coef((m) => m.c2BytesPerStream, 1024, 1)} | 18 |`);
  lines.push(`| watch c3 per watcher (B) | ${coef((m) => m.c3BytesPerWatcher, 1, 0)} | 350 |`);
  lines.push(`| watch fit intercept c0 (MB) / R² | ${reports.map((r) => (r.watch ? `${mb(r.watch.c0Bytes)} / ${r.watch.r2.toFixed(3)}` : "—")).join(" | ")} | |`);
  for (const load of ["s", "m"]) {
    lines.push(
      `| etcdctl check perf --load=${load} | ` +
        reports.map((r) => {
          const c = r.checkPerf?.find((x) => x.load === load);
          return c ? `${c.pass ? "PASS" : "FAIL"}: ${c.lines.join("; ").replace(/\|/g, "/")}` : (r.errors.checkperf ?? "—");
        }).join(" | ") +
        " | |",
    );
  }
  lines.push("", `Watch model from ${watchDesign(o.connsMax, o.streamsMax, o.watchersMax).length} points up to ${o.connsMax} connections / ${o.streamsMax} streams / ${o.watchersMax} watchers on one member, watchers spread over ${o.watchKeys} key(s) (RSS = VmRSS after 2 s settle; a garbage-collected runtime's RSS includes uncollected garbage).`);
  return lines.join("\n") + "\n";
}

async function main(): Promise<void> {
  const o = parseOptions(process.argv.slice(2));
  const targets = o.only !== undefined ? [o.only] : [...TARGETS];
  const reports: TargetReport[] = [];
  for (const target of targets) {
    const rep: TargetReport = { target, errors: {} };
    const guard = async <T>(section: string, fn: () => Promise<T>): Promise<T | undefined> => {
      if (!o.sections.includes(section)) return undefined;
      try {
        return await fn();
      } catch (e) {
        rep.errors[section] = `failed: ${(e instanceof Error ? e.message : String(e)).split("\n")[0]}`;
        log(`${target} ${section} ${rep.errors[section]}`);
        return undefined;
      }
    };
    const keys = await guard("keys", () => keysSection(target));
    if (keys) rep.keys = keys;
    const watch = await guard("watch", () => watchSection(target, o));
    if (watch) rep.watch = watch;
    const cp = await guard("checkperf", () => checkPerfSection(target));
    if (cp) rep.checkPerf = cp;
    reports.push(rep);
  }
  const md = markdown(reports, o);
  mkdirSync(o.outDir, { recursive: true });
  const stamp = new Date().toISOString().replace(/[:]/g, "-").replace(/\.\d+Z$/, "Z");
  writeFileSync(join(o.outDir, `memory-${stamp}.json`), JSON.stringify({ options: o, reports }, null, 2) + "\n");
  writeFileSync(join(o.outDir, `memory-${stamp}.md`), md);
  process.stdout.write(md);
}

main().then(
  () => process.exit(0),
  (e: unknown) => {
    process.stderr.write(`memory: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
    process.exit(1);
  },
);
