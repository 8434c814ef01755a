/** Runs the load generator (bench/benchmark/main.ts) as a child process and parses its --json line. */
import { spawn } from "node:child_process";
import { join } from "node:path";
import type { BenchmarkJson } from "../benchmark/main.js";
import { ROOT } from "./cluster.js";

export interface ChildOptions {
  workers?: number;
  timeoutMs: number;
}

export function runBenchmarkChild(endpoints: string[], args: string[], opts: ChildOptions): Promise<BenchmarkJson> {
  const argv = [
    "--import",
    "tsx",
    join(ROOT, "bench/benchmark/main.ts"),
    `--endpoints=${endpoints.join(",")}`,
    "--json",
    "--progress=false",
    "--dial-timeout=10s",
    ...(opts.workers !== undefined ? [`--workers=${opts.workers}`] : []),
    ...args,
  ];
  return new Promise((res, rej) => {
    const child = spawn(process.execPath, argv, { cwd: ROOT, stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    let err = "";
    child.stdout.on("data", (b: Buffer) => (out += b.toString()));
    child.stderr.on("data", (b: Buffer) => (err = (err + b.toString()).slice(-4000)));
    const timer = setTimeout(() => child.kill("SIGKILL"), opts.timeoutMs);
    child.on("exit", (code, signal) => {
      clearTimeout(timer);
      const line = out.split("\n").find((l) => l.startsWith("{"));
      if (code !== 0 || line === undefined) {
        return rej(new Error(`benchmark ${signal === "SIGKILL" ? "timed out" : `exited ${code}`}: ${err.trim().slice(-600)}`));
      }
      res(JSON.parse(line) as BenchmarkJson);
    });
  });
}
