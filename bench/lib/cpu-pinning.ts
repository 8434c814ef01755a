/**
 * CPU pinning for benchmarks on a small machine: the server under test gets
 * its own CPU(s) and the load driver the others (Linux `taskset`), so the
 * server's throughput is bounded by its own CPU cost and not by the load
 * generator stealing its core. Without pinning, on 2 cores, a faster server
 * just hands more CPU to the driver and ratios are compressed toward 1.
 */

import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";

export interface CpuPlan {
  /** taskset CPU list for the server child, e.g. "0". */
  server: string;
  /** taskset CPU list for the driver (this process and its worker threads), e.g. "1". */
  driver: string;
  /** Absolute path of taskset. */
  taskset: string;
}

function whichTaskset(): string | undefined {
  const r = spawnSync("sh", ["-c", "command -v taskset"], { encoding: "utf8" });
  const path = r.status === 0 ? r.stdout.trim() : "";
  return path === "" ? undefined : path;
}

/** Expands a CPU list ("0-2,5") to CPU numbers. */
export function parseCpuList(list: string): number[] {
  const cpus: number[] = [];
  for (const part of list.trim().split(",")) {
    if (part === "") continue;
    const [lo, hi] = part.split("-").map(Number);
    for (let c = lo!; c <= (hi ?? lo!); c++) cpus.push(c);
  }
  return cpus;
}

/** The CPU list a process (or one of its threads) may run on, from /proc. */
export function allowedCpus(pid: number | "self", tid?: number): string {
  const path = tid === undefined ? `/proc/${pid}/status` : `/proc/${pid}/task/${tid}/status`;
  const m = /^Cpus_allowed_list:\s*(\S+)/m.exec(readFileSync(path, "utf8"));
  if (!m) throw new Error(`no Cpus_allowed_list in ${path}`);
  return m[1]!;
}

/**
 * "off" → no pinning; "auto" → pinning when taskset exists and this process
 * may use ≥2 CPUs (server on the first, driver on the rest); "S/D" → the given
 * taskset lists, e.g. "0/1".
 */
export function planCpus(mode: string): CpuPlan | undefined {
  if (mode === "off") return undefined;
  const taskset = whichTaskset();
  if (mode !== "auto") {
    const [server, driver] = mode.split("/");
    if (!taskset || !server || !driver) throw new Error(`--pin ${mode}: expected SERVER/DRIVER cpu lists and taskset installed`);
    return { server, driver, taskset };
  }
  if (!taskset) return undefined;
  const cpus = parseCpuList(allowedCpus("self"));
  if (cpus.length < 2) return undefined;
  return { server: String(cpus[0]), driver: cpus.slice(1).join(","), taskset };
}

/** Pins every thread of this process (new threads inherit it): call before starting worker threads. */
export function pinSelf(plan: CpuPlan): void {
  const r = spawnSync(plan.taskset, ["-a", "-p", "-c", plan.driver, String(process.pid)], { encoding: "utf8" });
  if (r.status !== 0) throw new Error(`taskset failed: ${r.stderr}`);
}
