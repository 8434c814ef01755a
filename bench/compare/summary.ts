/**
 * From raw runs to the comparison table: medians over rounds per (row, target), and the ratio
 * etcetera/etcd per row. Pure.
 */
import type { Target } from "./cluster.js";
import type { MemberCpu } from "./proc-cpu.js";

/** A measured phase of a run (the cold run, or the warm run's figures in RunRecord itself). */
export interface PhaseRecord {
  rps: number;
  avgMs: number;
  p99Ms: number;
  /** CPU per request of each member still running, leader first or not. */
  cpu: MemberCpu[];
}

/** One benchmark run of one row against one target in one round. */
export interface RunRecord {
  row: string;
  target: Target;
  round: number;
  ok: boolean;
  error?: string;
  rps?: number;
  avgMs?: number;
  p99Ms?: number;
  /** Requests that failed inside an otherwise completed run. */
  errorCount?: number;
  /** Load driver: etcd's benchmark tool or the Node.js generator. */
  driver?: string;
  /** CPU per request of each member over the measured (warm) run. */
  cpu?: MemberCpu[];
  /** The fresh cluster's first requests, before the warm-up. */
  cold?: PhaseRecord;
  /** VmHWM of each member at the end of the run, bytes, largest first. */
  peakRssBytes?: number[];
  wallSec?: number;
  /** The cluster itself did not come up (as opposed to the benchmark failing). */
  startFailed?: boolean;
  /** Clusters started for this run (a start that failed is retried: attempts.ts). */
  attempts?: number;
  /** First lines of the errors of the starts that failed before this record's attempt. */
  earlierStartErrors?: string[];
}

export interface TargetSummary {
  /** Successful rounds the medians are taken over. */
  rounds: number;
  failed: number;
  rps: number;
  /** Lowest and highest requests/s over the successful rounds: how far rounds differ. */
  rpsMin: number;
  rpsMax: number;
  avgMs: number;
  p99Ms: number;
  /** Median over rounds of the largest-first member peak RSS, bytes. */
  peakRssBytes: number[];
  firstError?: string;
  /** Medians of the warm run's CPU figures, when the runs carry them. */
  cpu?: CpuSummary;
  cold?: { rps: number; avgMs: number; p99Ms: number; cpu?: CpuSummary };
}

/** CPU µs per request, medians over rounds. */
export interface CpuSummary {
  leaderUs: number;
  /** The leader's main thread (a Node.js member's event loop; for etcd one of its Go threads). */
  leaderMainUs: number;
  /** The leader's busiest thread and its comm (the comm of the first round's). */
  leaderBusiestUs: number;
  leaderBusiestComm: string;
  /** The busier follower's process. */
  followerUs: number;
  /** Every member's process together: the cluster's CPU per request. */
  clusterUs: number;
}

export function summarizeCpu(perRound: ReadonlyArray<readonly MemberCpu[] | undefined>): CpuSummary | undefined {
  const rounds = perRound.filter((c): c is readonly MemberCpu[] => c !== undefined && c.some((m) => m.role === "leader"));
  if (rounds.length === 0) return undefined;
  const leaders = rounds.map((c) => c.find((m) => m.role === "leader") as MemberCpu);
  return {
    leaderUs: median(leaders.map((l) => l.usPerRequest)),
    leaderMainUs: median(leaders.map((l) => l.threads.find((t) => t.main)?.usPerRequest ?? 0)),
    leaderBusiestUs: median(leaders.map((l) => l.threads[0]?.usPerRequest ?? 0)),
    leaderBusiestComm: leaders[0]?.threads[0]?.comm ?? "?",
    followerUs: median(rounds.map((c) => Math.max(0, ...c.filter((m) => m.role === "follower").map((m) => m.usPerRequest)))),
    clusterUs: median(rounds.map((c) => c.reduce((sum, m) => sum + m.usPerRequest, 0))),
  };
}

export interface RowSummary {
  row: string;
  title: string;
  etcd?: TargetSummary;
  etcetera?: TargetSummary;
  /** etcetera / etcd: requests/s (higher is better) and p99 latency (lower is better). */
  rpsRatio?: number;
  p99Ratio?: number;
  rssRatio?: number;
  /** etcetera / etcd over the cold runs. */
  coldRpsRatio?: number;
  /** etcetera / etcd: the leader process's CPU per request over the warm run. */
  leaderCpuRatio?: number;
}

export function median(values: readonly number[]): number {
  if (values.length === 0) return NaN;
  const s = [...values].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 === 1 ? (s[mid] as number) : ((s[mid - 1] as number) + (s[mid] as number)) / 2;
}

export function summarizeTarget(runs: readonly RunRecord[]): TargetSummary | undefined {
  if (runs.length === 0) return undefined;
  const ok = runs.filter((r) => r.ok);
  const members = Math.max(0, ...ok.map((r) => r.peakRssBytes?.length ?? 0));
  const summary: TargetSummary = {
    rounds: ok.length,
    failed: runs.length - ok.length,
    rps: median(ok.map((r) => r.rps ?? NaN)),
    rpsMin: Math.min(...ok.map((r) => r.rps ?? NaN)),
    rpsMax: Math.max(...ok.map((r) => r.rps ?? NaN)),
    avgMs: median(ok.map((r) => r.avgMs ?? NaN)),
    p99Ms: median(ok.map((r) => r.p99Ms ?? NaN)),
    peakRssBytes: Array.from({ length: members }, (_, i) => median(ok.map((r) => r.peakRssBytes?.[i] ?? NaN))),
  };
  const firstError = runs.find((r) => !r.ok)?.error;
  if (firstError !== undefined) summary.firstError = firstError;
  const cpu = summarizeCpu(ok.map((r) => r.cpu));
  if (cpu !== undefined) summary.cpu = cpu;
  const colds = ok.flatMap((r) => (r.cold !== undefined ? [r.cold] : []));
  if (colds.length > 0) {
    const coldCpu = summarizeCpu(colds.map((c) => c.cpu));
    summary.cold = { rps: median(colds.map((c) => c.rps)), avgMs: median(colds.map((c) => c.avgMs)), p99Ms: median(colds.map((c) => c.p99Ms)), ...(coldCpu !== undefined ? { cpu: coldCpu } : {}) };
  }
  return summary;
}

export function summarizeRows(rows: ReadonlyArray<{ id: string; title: string }>, runs: readonly RunRecord[]): RowSummary[] {
  return rows.map(({ id, title }) => {
    const etcd = summarizeTarget(runs.filter((r) => r.row === id && r.target === "etcd"));
    const etcetera = summarizeTarget(runs.filter((r) => r.row === id && r.target === "etcetera"));
    const out: RowSummary = { row: id, title };
    if (etcd !== undefined) out.etcd = etcd;
    if (etcetera !== undefined) out.etcetera = etcetera;
    if (etcd !== undefined && etcetera !== undefined && etcd.rounds > 0 && etcetera.rounds > 0) {
      out.rpsRatio = etcetera.rps / etcd.rps;
      out.p99Ratio = etcetera.p99Ms / etcd.p99Ms;
      out.rssRatio = Math.max(...etcetera.peakRssBytes) / Math.max(...etcd.peakRssBytes);
      if (etcd.cold !== undefined && etcetera.cold !== undefined) out.coldRpsRatio = etcetera.cold.rps / etcd.cold.rps;
      if (etcd.cpu !== undefined && etcetera.cpu !== undefined) out.leaderCpuRatio = etcetera.cpu.leaderUs / etcd.cpu.leaderUs;
    }
    return out;
  });
}

/**
 * The cells a table may compare: every target of every row holds the same number of successful
 * rounds. Otherwise a median of 2 would sit beside a median of 3 under one heading (it did:
 * issue 13). Returns the common round count; throws with every cell that differs.
 */
export function assertEqualRounds(rows: readonly RowSummary[]): number {
  const cells = rows.flatMap((r) =>
    (["etcd", "etcetera"] as const).flatMap((t) => {
      const s = r[t];
      return s === undefined ? [] : [{ cell: `${r.row} ${t}`, rounds: s.rounds, failed: s.failed, error: s.firstError }];
    }),
  );
  if (cells.length === 0) throw new Error("no cells to compare");
  const most = Math.max(...cells.map((c) => c.rounds));
  if (most === 0) throw new Error(`every run failed: ${cells[0]?.error ?? "?"}`);
  const short = cells.filter((c) => c.rounds !== most);
  if (short.length > 0) {
    throw new Error(
      `refusing to print a table of unequal round counts (most cells hold ${most}): ` +
        short.map((c) => `${c.cell} n=${c.rounds}${c.failed > 0 ? ` (${c.failed} failed: ${(c.error ?? "").split("\n")[0]})` : ""}`).join("; "),
    );
  }
  return most;
}
