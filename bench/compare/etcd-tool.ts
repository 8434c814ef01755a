/**
 * etcd's own benchmark tool (tools/benchmark of etcd v3.4.23, a Go binary in ../shared/bin) as
 * the load driver of bench:compare: it spends far less CPU per request than the Node.js
 * generator, so on a small machine shared with the members it leaves the cores to the servers
 * under test (issue 18). Its text report is parsed here; the Node.js generator stays available
 * (`--driver node`, bench-child.ts) and both give a DriverResult.
 */
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { join, resolve } from "node:path";
import { ROOT } from "./cluster.js";

/** What a measured run of either driver gives. */
export interface DriverResult {
  /** Requests that succeeded. */
  count: number;
  errorCount: number;
  rps: number;
  avgMs: number;
  p99Ms: number;
  firstError?: string;
}

/** The environment variable naming another etcd benchmark binary. */
export const ETCD_BENCHMARK_ENV = "ETCD_BENCHMARK";

/** The tool: $ETCD_BENCHMARK, else ../shared/bin/etcd-benchmark beside the repository. */
export function etcdBenchmarkPath(env: NodeJS.ProcessEnv = process.env): string {
  const override = env[ETCD_BENCHMARK_ENV];
  return override !== undefined && override !== "" ? resolve(override) : resolve(ROOT, "../shared/bin/etcd-benchmark");
}

/** Throws with what to do when the tool is not there. */
export function requireEtcdBenchmark(env: NodeJS.ProcessEnv = process.env): string {
  const path = etcdBenchmarkPath(env);
  if (!existsSync(path)) {
    throw new Error(
      `etcd's benchmark tool not found at ${path}: build it from etcd v3.4's tools/benchmark (see ../shared/bin/README.md) ` +
        `or point ${ETCD_BENCHMARK_ENV}=/path/to/benchmark at one; '--driver node' uses the Node.js generator instead`,
    );
  }
  return path;
}

const SECS = String.raw`([0-9.eE+-]+) secs`;

/**
 * Parses the report etcd's tool prints (pkg/report of etcd 3.4): "Summary:" with Total,
 * Average and Requests/sec, "Latency distribution:" with "99% in X secs.", and "Error
 * distribution:" with "[count]\terror" lines. Throws when the summary is missing (every request
 * failed, or the tool did not run).
 */
export function parseEtcdReport(text: string): DriverResult {
  const num = (re: RegExp, what: string): number => {
    const m = re.exec(text);
    if (m === null) throw new Error(`etcd benchmark report has no ${what}: ${text.slice(-600)}`);
    return Number(m[1]);
  };
  const errors = [...text.matchAll(/^\s*\[(\d+)\]\s+(.*)$/gm)];
  const errorCount = errors.reduce((n, m) => n + Number(m[1]), 0);
  const firstError = errors[0]?.[2]?.trim();
  if (!/^Summary:/m.test(text)) {
    throw new Error(`etcd benchmark printed no summary${firstError !== undefined ? ` (${errorCount} errors, first: ${firstError})` : ""}: ${text.slice(-600)}`);
  }
  const totalSec = num(new RegExp(`Total:\\s+${SECS}`), "Total");
  const rps = num(/Requests\/sec:\s+([0-9.eE+-]+)/, "Requests/sec");
  const result: DriverResult = {
    count: Math.round(rps * totalSec),
    errorCount,
    rps,
    avgMs: num(new RegExp(`Average:\\s+${SECS}`), "Average") * 1000,
    p99Ms: num(new RegExp(`^\\s*99% in ${SECS}`, "m"), "99th percentile") * 1000,
  };
  if (firstError !== undefined) result.firstError = firstError;
  return result;
}

export interface ToolOptions {
  timeoutMs: number;
}

/** Runs the tool once with the row's arguments (etcd's own CLI) and parses its report. */
export function runEtcdBenchmark(endpoints: string[], args: string[], opts: ToolOptions): Promise<DriverResult> {
  const bin = requireEtcdBenchmark();
  const argv = [`--endpoints=${endpoints.join(",")}`, "--dial-timeout=10s", "--precise", ...args];
  return new Promise((res, rej) => {
    const child = spawn(bin, argv, { cwd: join(ROOT), stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    let err = "";
    child.stdout.on("data", (b: Buffer) => (out = (out + b.toString()).slice(-200_000)));
    child.stderr.on("data", (b: Buffer) => (err = (err + b.toString()).slice(-4000)));
    const timer = setTimeout(() => child.kill("SIGKILL"), opts.timeoutMs);
    child.on("error", (e) => {
      clearTimeout(timer);
      rej(e);
    });
    child.on("exit", (code, signal) => {
      clearTimeout(timer);
      if (code !== 0) return rej(new Error(`etcd benchmark ${signal === "SIGKILL" ? "timed out" : `exited ${code}`}: ${(err || out).trim().slice(-600)}`));
      try {
        res(parseEtcdReport(out));
      } catch (e) {
        rej(e instanceof Error ? e : new Error(String(e)));
      }
    });
  });
}
