/**
 * CPU time per process and per thread from /proc (utime + stime of /proc/<pid>/stat and
 * /proc/<pid>/task/<tid>/stat, and each thread's comm), sampled before and after a measured run
 * so that every row shows where its CPU went: a Node.js member's main thread, its libuv pool and
 * V8's helpers, or etcd's Go threads (issue 18).
 */
import { execFileSync } from "node:child_process";
import { readFileSync, readdirSync } from "node:fs";

/** Clock ticks per second of utime/stime (sysconf(_SC_CLK_TCK), 100 on Linux x86). */
export const CLK_TCK = (() => {
  try {
    const v = Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim());
    return v > 0 ? v : 100;
  } catch {
    return 100;
  }
})();

export interface StatFields {
  comm: string;
  /** utime + stime, clock ticks. */
  ticks: number;
}

/**
 * Parses a /proc stat line. comm sits in parentheses and may itself hold spaces and ')' (a
 * thread may name itself anything), so the fields after it are found from the last ')'.
 */
export function parseStat(line: string): StatFields {
  const open = line.indexOf("(");
  const close = line.lastIndexOf(")");
  if (open < 0 || close < open) throw new Error(`not a /proc stat line: ${line.slice(0, 120)}`);
  // After ") ": state(3) ppid(4) ... utime(14) stime(15): index 0 is field 3.
  const rest = line.slice(close + 2).split(" ");
  const utime = Number(rest[14 - 3]);
  const stime = Number(rest[15 - 3]);
  if (!Number.isFinite(utime) || !Number.isFinite(stime)) throw new Error(`no utime/stime in: ${line.slice(0, 200)}`);
  return { comm: line.slice(open + 1, close), ticks: utime + stime };
}

export interface ThreadSample {
  tid: number;
  comm: string;
  ticks: number;
}

export interface ProcessSample {
  pid: number;
  /** The whole process, threads that already exited included. */
  ticks: number;
  threads: ThreadSample[];
  /** read and write system calls so far (/proc/<pid>/io syscr, syscw), when readable. */
  syscalls?: { reads: number; writes: number };
}

/** syscr and syscw of a /proc/<pid>/io text. */
export function parseIo(text: string): { reads: number; writes: number } | undefined {
  const r = /^syscr:\s+(\d+)$/m.exec(text);
  const w = /^syscw:\s+(\d+)$/m.exec(text);
  return r === null || w === null ? undefined : { reads: Number(r[1]), writes: Number(w[1]) };
}

function readStat(path: string): StatFields | undefined {
  try {
    return parseStat(readFileSync(path, "utf8"));
  } catch {
    return undefined;
  }
}

/** The process and its live threads now; undefined when the process is gone. */
export function sampleProcess(pid: number): ProcessSample | undefined {
  const proc = readStat(`/proc/${pid}/stat`);
  if (proc === undefined) return undefined;
  const threads: ThreadSample[] = [];
  let tids: string[] = [];
  try {
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    return undefined;
  }
  for (const t of tids) {
    const s = readStat(`/proc/${pid}/task/${t}/stat`);
    if (s !== undefined) threads.push({ tid: Number(t), comm: s.comm, ticks: s.ticks });
  }
  let syscalls: { reads: number; writes: number } | undefined;
  try {
    syscalls = parseIo(readFileSync(`/proc/${pid}/io`, "utf8"));
  } catch {
    syscalls = undefined;
  }
  return { pid, ticks: proc.ticks, threads, ...(syscalls !== undefined ? { syscalls } : {}) };
}

export interface ThreadCpu {
  tid: number;
  comm: string;
  /** CPU µs per request over the measured run. */
  usPerRequest: number;
  /** The process's main thread (tid = pid): a Node.js member's event loop. */
  main: boolean;
}

export interface MemberCpu {
  name: string;
  role: "leader" | "follower";
  /** CPU µs per request of the whole process over the measured run. */
  usPerRequest: number;
  /** Threads that used CPU during the run, busiest first. */
  threads: ThreadCpu[];
  /**
   * read and write system calls per request (sockets, pipes, files alike): how many wake-ups and
   * writes a request costs, batching made visible.
   */
  syscallsPerRequest?: { reads: number; writes: number };
}

/**
 * CPU per request between two samples of one process. A thread born during the run counts from
 * zero; a thread that died during it is in the process total only.
 */
export function cpuBetween(before: ProcessSample, after: ProcessSample, requests: number, tck = CLK_TCK): Omit<MemberCpu, "name" | "role"> {
  if (before.pid !== after.pid) throw new Error(`samples of different processes: ${before.pid} and ${after.pid}`);
  const n = Math.max(1, requests);
  const us = (ticks: number) => ((ticks / tck) * 1e6) / n;
  const was = new Map(before.threads.map((t) => [t.tid, t.ticks]));
  const threads = after.threads
    .map((t) => ({ tid: t.tid, comm: t.comm, usPerRequest: us(t.ticks - (was.get(t.tid) ?? 0)), main: t.tid === after.pid }))
    .filter((t) => t.usPerRequest > 0)
    .sort((a, b) => b.usPerRequest - a.usPerRequest);
  const out: Omit<MemberCpu, "name" | "role"> = { usPerRequest: us(after.ticks - before.ticks), threads };
  if (before.syscalls !== undefined && after.syscalls !== undefined) {
    out.syscallsPerRequest = { reads: (after.syscalls.reads - before.syscalls.reads) / n, writes: (after.syscalls.writes - before.syscalls.writes) / n };
  }
  return out;
}
