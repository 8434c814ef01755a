import { describe, expect, it } from "vitest";
import { ETCD_BENCHMARK_ENV, etcdBenchmarkPath, parseEtcdReport, requireEtcdBenchmark } from "../../bench/compare/etcd-tool.js";
import { cpuBetween, parseIo, parseStat, sampleProcess } from "../../bench/compare/proc-cpu.js";
import { coldCpuTable } from "../../bench/compare/render.js";
import { type RunRecord, summarizeCpu, summarizeRows } from "../../bench/compare/summary.js";
import type { MemberCpu } from "../../bench/compare/proc-cpu.js";

// The report of etcd v3.4's tools/benchmark (pkg/report) with --precise, errors included.
const REPORT = [
  "",
  "Summary:",
  "  Total:\t2.5 secs.",
  "  Slowest:\t0.0301 secs.",
  "  Fastest:\t0.000412 secs.",
  "  Average:\t0.00184 secs.",
  "  Stddev:\t0.0004 secs.",
  "  Requests/sec:\t400",
  "",
  "Response time histogram:",
  "  0.000412 [1]\t|",
  "  0.0301 [999]\t|∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎∎",
  "",
  "Latency distribution:",
  "  10% in 0.0011 secs.",
  "  90% in 0.0025 secs.",
  "  99% in 0.00788 secs.",
  "  99.9% in 0.0291 secs.",
  "",
  "Error distribution:",
  "  [3]\trpc error: code = Unavailable desc = transport is closing",
  "  [2]\tetcdserver: request timed out",
  "",
].join("\n");

describe("etcd benchmark tool driver", () => {
  it("parses Requests/sec, Average, the 99th percentile (not 99.9) and the error distribution", () => {
    const r = parseEtcdReport(REPORT);
    expect(r.rps).toBe(400);
    expect(r.count).toBe(1000);
    expect(r.avgMs).toBeCloseTo(1.84, 9);
    expect(r.p99Ms).toBeCloseTo(7.88, 9);
    expect(r.errorCount).toBe(5);
    expect(r.firstError).toBe("rpc error: code = Unavailable desc = transport is closing");
  });

  it("a report without a summary (every request failed) is an error naming the first failure", () => {
    expect(() => parseEtcdReport("\nError distribution:\n  [10]\tcontext deadline exceeded\n")).toThrow(/no summary \(10 errors, first: context deadline exceeded\)/);
  });

  it("the tool is ../shared/bin/etcd-benchmark beside the repository unless ETCD_BENCHMARK names another; a missing one says what to do", () => {
    expect(etcdBenchmarkPath({})).toMatch(/\/shared\/bin\/etcd-benchmark$/);
    expect(etcdBenchmarkPath({ [ETCD_BENCHMARK_ENV]: "/opt/x/benchmark" })).toBe("/opt/x/benchmark");
    expect(() => requireEtcdBenchmark({ [ETCD_BENCHMARK_ENV]: "/nonexistent/benchmark" })).toThrow(/not found at \/nonexistent\/benchmark.*ETCD_BENCHMARK.*--driver node/);
  });
});

describe("CPU from /proc", () => {
  it("parses utime + stime after a comm holding spaces and parentheses", () => {
    const line = "4242 (V8 Default) Wo)rk) S 1 4242 4242 0 -1 4194304 100 0 0 0 1234 567 0 0 20 0 11 0 999 1000000 2000 18446744073709551615";
    expect(parseStat(line)).toEqual({ comm: "V8 Default) Wo)rk", ticks: 1234 + 567 });
  });

  it("reads this process and its main thread", () => {
    const s = sampleProcess(process.pid);
    expect(s).toBeDefined();
    expect(s!.threads.some((t) => t.tid === process.pid)).toBe(true);
    expect(s!.ticks).toBeGreaterThanOrEqual(Math.max(...s!.threads.map((t) => t.ticks)));
    expect(sampleProcess(0x7ffffff0)).toBeUndefined();
  });

  it("µs per request between two samples, per thread, busiest first; threads born during the run count from zero", () => {
    const before = { pid: 10, ticks: 100, threads: [{ tid: 10, comm: "node", ticks: 80 }, { tid: 11, comm: "libuv-worker", ticks: 20 }] };
    const after = { pid: 10, ticks: 300, threads: [{ tid: 10, comm: "node", ticks: 180 }, { tid: 11, comm: "libuv-worker", ticks: 20 }, { tid: 12, comm: "V8 DefaultWorke", ticks: 50 }] };
    const c = cpuBetween(before, after, 1000, 100);
    expect(c.usPerRequest).toBeCloseTo(2000, 9); // 200 ticks = 2 s over 1,000 requests
    expect(c.threads).toEqual([
      { tid: 10, comm: "node", usPerRequest: 1000, main: true },
      { tid: 12, comm: "V8 DefaultWorke", usPerRequest: 500, main: false },
    ]);
    expect(() => cpuBetween(before, { ...after, pid: 11 }, 1000, 100)).toThrow(/different processes/);
    expect(c.syscallsPerRequest).toBeUndefined();
    const io = cpuBetween({ ...before, syscalls: { reads: 100, writes: 50 } }, { ...after, syscalls: { reads: 1600, writes: 2050 } }, 1000, 100);
    expect(io.syscallsPerRequest).toEqual({ reads: 1.5, writes: 2 });
  });

  it("reads syscr and syscw of /proc/<pid>/io", () => {
    expect(parseIo("rchar: 6976\nwchar: 0\nsyscr: 10\nsyscw: 3\nread_bytes: 0\n")).toEqual({ reads: 10, writes: 3 });
    expect(parseIo("rchar: 1\n")).toBeUndefined();
    expect(sampleProcess(process.pid)?.syscalls?.reads).toBeGreaterThan(0);
  });
});

function member(name: string, role: "leader" | "follower", us: number, threads: Array<[string, number, boolean]>): MemberCpu {
  return { name, role, usPerRequest: us, threads: threads.map(([comm, u, main], i) => ({ tid: i + 1, comm, usPerRequest: u, main })) };
}

describe("cold and CPU columns", () => {
  it("medians of the leader's process, main and busiest thread and of the busier follower", () => {
    const r1 = [member("n1", "follower", 50, [["node", 40, true]]), member("n2", "leader", 120, [["node", 80, true], ["libuv-worker", 20, false]]), member("n3", "follower", 60, [])];
    const r2 = [member("n1", "leader", 140, [["node", 90, true]]), member("n2", "follower", 70, []), member("n3", "follower", 65, [])];
    const r3 = [member("n1", "leader", 100, [["libuv-worker", 70, false], ["node", 20, true]]), member("n2", "follower", 40, [])];
    expect(summarizeCpu([r1, r2, r3, undefined])).toEqual({ leaderUs: 120, leaderMainUs: 80, leaderBusiestUs: 80, leaderBusiestComm: "node", followerUs: 60, clusterUs: 230 });
    expect(summarizeCpu([undefined])).toBeUndefined();
  });

  it("the table shows cold req/s and its ratio, and CPU per request with the leader CPU ratio", () => {
    const etcdCpu = [member("n1", "leader", 75, [["etcd", 19, false], ["etcd", 0, true]]), member("n2", "follower", 40, [])];
    const nodeCpu = [member("n1", "leader", 150, [["node", 90, true], ["libuv-worker", 30, false]]), member("n2", "follower", 80, [])];
    const base = { ok: true, avgMs: 1, p99Ms: 2, peakRssBytes: [1, 1, 1] };
    const runs: RunRecord[] = [
      { ...base, row: "r", target: "etcd", round: 1, rps: 1000, cpu: etcdCpu, cold: { rps: 800, avgMs: 1.5, p99Ms: 4, cpu: etcdCpu } },
      { ...base, row: "r", target: "etcetera", round: 1, rps: 900, cpu: nodeCpu, cold: { rps: 400, avgMs: 3, p99Ms: 12, cpu: nodeCpu } },
    ];
    const [s] = summarizeRows([{ id: "r", title: "Row" }], runs);
    expect(s!.coldRpsRatio).toBeCloseTo(0.5, 12);
    expect(s!.leaderCpuRatio).toBeCloseTo(2, 12);
    const lines = coldCpuTable([s!]).trim().split("\n");
    expect(lines).toHaveLength(3);
    expect(lines[2]).toBe("| Row | 800 | 400 | 0.50× | 1.50 / 4.00 | 3.00 / 12.0 | 75 (0.0 / etcd 19) · 40 · Σ 115 | 150 (90 / node 90) · 80 · Σ 230 | 2.00× | 75 (0.0 / etcd 19) · 40 · Σ 115 | 150 (90 / node 90) · 80 · Σ 230 |");
    expect(lines[0]!.split("|")).toHaveLength(lines[2]!.split("|").length);
  });
});
