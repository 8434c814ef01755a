/**
 * What a failed (or stalled) power-loss run of a three-member cluster says about itself
 * (cluster_crash.ts): the phase it was in and how long each phase took, each member's applied
 * revision and raft indexes (by Status), its last log lines, the files left in its snap and wal
 * directories (a staged image, an incoming-*.db.tmp a cut left, the WAL segments) and what lazyfs
 * dropped at the cut. A run that fails once in many under load must tell its cause the first time:
 * a replay of its seed is not the same interleaving.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import type { Member } from "../e2e/harness.js";
import { EtcdConnection } from "../reliability/etcd_client.js";
import { listFiles } from "./crash_checks.js";
import { isMounted } from "./lazyfs.js";

/** The phases of a run, in order (catch-up: every member at one revision after the restart). */
export type ClusterPhase =
  | "starting the cluster"
  | "first acknowledged put"
  | "picking a follower"
  | "follower down: writes past the leader's log"
  | "waiting for the catch-up step"
  | "waiting for the cut trigger"
  | "power cut"
  | "waiting for restart"
  | "convergence"
  | "catch-up"
  | "hashkv"
  | "read-back"
  | "done";

/** The run's current phase and the time spent in each, and whether the run was abandoned. */
export class PhaseClock {
  private current: ClusterPhase = "starting the cluster";
  private since = Date.now();
  private readonly started = this.since;
  private readonly spent: { phase: ClusterPhase; ms: number }[] = [];
  private abandonedFor: string | undefined;

  get phase(): ClusterPhase {
    return this.current;
  }

  /** Why the run was abandoned (its budget ran out), if it was. */
  get abandoned(): string | undefined {
    return this.abandonedFor;
  }

  /** Enters `phase`; throws if the run was abandoned (the caller stops where it is). */
  enter(phase: ClusterPhase): void {
    this.check();
    const now = Date.now();
    this.spent.push({ phase: this.current, ms: now - this.since });
    this.current = phase;
    this.since = now;
  }

  check(): void {
    if (this.abandonedFor !== undefined) throw new Error(`run abandoned in phase "${this.current}": ${this.abandonedFor}`);
  }

  abandon(reason: string): void {
    this.abandonedFor ??= reason;
  }

  /** "phase 'convergence' for 61.2 s (total 136.0 s; starting the cluster 3.1 s, ...)". */
  describe(): string {
    const now = Date.now();
    const past = this.spent.map((p) => `${p.phase} ${(p.ms / 1000).toFixed(1)} s`).join(", ");
    return `phase "${this.current}" for ${((now - this.since) / 1000).toFixed(1)} s (total ${((now - this.started) / 1000).toFixed(1)} s; before: ${past || "none"})`;
  }
}

export interface DiagnosisInput {
  clock: PhaseClock;
  members: readonly Member[];
  /** Each member's data dir as the member sees it (on its lazyfs mount) and as its disk holds it. */
  dataDirs: readonly { mounted: string; mountpoint: string; disk: string }[];
  /** The victims' logs up to the cut (their restarted processes log afresh). */
  logsBeforeCut: ReadonlyMap<string, string>;
  /** What lazyfs dropped at each victim's cut. */
  cutLogs: string;
  /** Last log lines per member (default 25). */
  logLines?: number;
}

/** The last `n` lines of a log, each cut to 400 characters. */
export function lastLines(log: string, n: number): string[] {
  return log
    .split("\n")
    .filter((l) => l.length > 0)
    .slice(-n)
    .map((l) => (l.length > 400 ? `${l.slice(0, 400)}…` : l));
}

async function statusOf(m: Member): Promise<string> {
  if (!m.running) return "not running";
  const c = new EtcdConnection(m.endpoint);
  try {
    const s = await c.status(3_000);
    return `revision ${s.revision}, raft index ${s.raftIndex}, applied index ${s.raftAppliedIndex}, term ${s.raftTerm}, leader ${s.leader}`;
  } catch (e) {
    return `Status failed: ${(e as Error).message.split("\n")[0]}`;
  } finally {
    c.close();
  }
}

function filesOf(d: DiagnosisInput["dataDirs"][number]): string {
  const [root, where] = isMounted(d.mountpoint) ? [d.mounted, "mounted"] : [d.disk, "disk, unmounted"];
  if (!existsSync(root)) return `(${where}) no data dir`;
  const files = listFiles(join(root, "member")).map((f) => `${f.path} ${f.bytes}`);
  return `(${where}) ${files.join(", ") || "empty"}`;
}

/** The whole diagnosis, as lines (members still running are asked for their Status). */
export async function diagnose(d: DiagnosisInput): Promise<string> {
  const n = d.logLines ?? 25;
  const lines = [`diagnosis: ${d.clock.describe()}`];
  const statuses = await Promise.all(d.members.map((m) => statusOf(m)));
  d.members.forEach((m, i) => {
    lines.push(`  ==== ${m.spec.name} (${m.running ? `pid ${m.proc?.pid}` : "not running"}): ${statuses[i]}`);
    const dir = d.dataDirs[i];
    if (dir !== undefined) lines.push(`    files: ${filesOf(dir)}`);
    const before = d.logsBeforeCut.get(m.spec.name);
    if (before !== undefined) lines.push("    log up to the cut:", ...lastLines(before, 12).map((l) => `      ${l}`));
    // A restart's first lines (what it recovered: "restarting local member from its WAL") too: a
    // member that then repeats one warning fills its last lines with it.
    const all = lastLines(m.log, Number.MAX_SAFE_INTEGER);
    const shown = before !== undefined && all.length > n + 10 ? [...all.slice(0, 10), "…", ...all.slice(-n)] : all.slice(-n);
    lines.push(before !== undefined ? "    log since the restart:" : "    log:", ...shown.map((l) => `      ${l}`));
  });
  const dropped = lastLines(d.cutLogs, 10_000);
  lines.push(`  lazyfs dropped (${dropped.length} lines):`, ...(dropped.length > 60 ? [...dropped.slice(0, 30), "…", ...dropped.slice(-30)] : dropped).map((l) => `    ${l}`));
  return lines.join("\n");
}
