/**
 * Process metrics etcd 3.4 exports that prom-client's default collectors do not: os_fd_used and
 * os_fd_limit (etcd's pkg/runtime, read on every scrape) and process_virtual_memory_max_bytes
 * (client_golang's process collector). Linux only, as /proc is: elsewhere they read -1.
 * prom-client's collectDefaultMetrics gives the other process_* families under etcd's names
 * (process_cpu_seconds_total, process_open_fds, process_max_fds, process_resident_memory_bytes,
 * process_virtual_memory_bytes, process_start_time_seconds).
 */
import { readdirSync, readFileSync } from "node:fs";
import type { Registry } from "prom-client";
import { gauge } from "../mvcc/metrics.js";

/** client_golang reports an unlimited address space as the largest uint64, as a float. */
const UNLIMITED = 2 ** 64;

/** The soft limit of one line of /proc/self/limits ("Max open files  20000  20000  files"). */
export function softLimit(limitsText: string, name: string): number | undefined {
  const line = limitsText.split("\n").find((l) => l.startsWith(name));
  if (line === undefined) return undefined;
  const soft = line.slice(name.length).trim().split(/\s+/)[0];
  if (soft === "unlimited") return UNLIMITED;
  const n = Number(soft);
  return Number.isFinite(n) ? n : undefined;
}

function limits(): string {
  try {
    return readFileSync("/proc/self/limits", "utf8");
  } catch {
    return "";
  }
}

function fdsUsed(): number {
  try {
    return readdirSync("/proc/self/fd").length;
  } catch {
    return -1;
  }
}

export function registerProcessMetrics(registry: Registry): void {
  gauge(registry, "os_fd_used", "The number of used file descriptors.", fdsUsed);
  gauge(registry, "os_fd_limit", "The file descriptor limit.", () => softLimit(limits(), "Max open files") ?? -1);
  gauge(registry, "process_virtual_memory_max_bytes", "Maximum amount of virtual memory available in bytes.", () => softLimit(limits(), "Max address space") ?? -1);
}
