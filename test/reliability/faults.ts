/**
 * Fault injection on a ChaosCluster, one fault at a time with quiet gaps between (each fault is
 * applied, held, healed): SIGKILL + restart, SIGSTOP/SIGCONT beyond the election timeout, a
 * member partitioned from the others, a one-way drop on one link, delayed links, connection
 * resets, leader transfers, compaction and defragmentation during traffic, and a power cut (on a
 * cluster whose data dirs are on lazyfs: the member loses every write it never synced), a follower
 * far behind (far_behind_fault.ts: it catches up by a snapshot). The
 * leader is the target half of the time. Seeded.
 */
import type { ChaosCluster, ChaosMember } from "./chaos_cluster.js";
import { pick, type Rng } from "./gen.js";
import { applyFarBehind } from "./far_behind_fault.js";
import { BLACKHOLE, UNKNOWN_SOURCE } from "./proxy.js";
import { membershipChange } from "./membership_fault.js";

export const FAULT_KINDS = ["kill", "pause", "partition", "oneway", "delay", "reset", "transfer", "compact", "defrag", "powerloss", "membership", "farbehind"] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];

export interface FaultRecord {
  kind: FaultKind;
  target: string;
  detail: string;
  /** Milliseconds since the injector started. */
  atMs: number;
  durationMs: number;
  /** Whether the target was the leader when chosen. */
  leader: boolean;
  error?: string;
}

export interface FaultInjectorOptions {
  kinds: readonly FaultKind[];
  electionMs: number;
  /** Quiet time between faults. */
  gapMs?: [number, number];
  /**
   * The highest revision it is safe to compact below: every watcher has covered it, so none will
   * need to resume from a compacted revision (compaction then tests the store, not the client).
   */
  compactBelow?: () => number;
  /** "random": each fault drawn at random; "cycle": every kind in turn, reshuffled each round (short runs see all kinds). */
  order?: "random" | "cycle";
  /** "any": the leader half of the time; "followers": never the leader (a mutation test's lagging follower). */
  targets?: "any" | "followers";
  log?: (line: string) => void;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

function shuffle<T>(r: Rng, xs: readonly T[]): T[] {
  const a = [...xs];
  for (let i = a.length - 1; i > 0; i--) {
    const j = Math.floor(r() * (i + 1));
    [a[i], a[j]] = [a[j]!, a[i]!];
  }
  return a;
}

export class FaultInjector {
  readonly records: FaultRecord[] = [];
  /** The highest revision compacted so far (0 = never). */
  lastCompactRevision = 0;
  private readonly t0 = Date.now();

  constructor(
    private readonly cluster: ChaosCluster,
    private readonly r: Rng,
    private readonly opts: FaultInjectorOptions,
  ) {
    if (opts.kinds.length === 0) throw new Error("no fault kinds");
  }

  private between(lo: number, hi: number): number {
    return Math.round(lo + this.r() * (hi - lo));
  }

  /** Injects faults until `stop()` says so; never leaves one applied. */
  async run(stop: () => boolean): Promise<void> {
    const [gLo, gHi] = this.opts.gapMs ?? [1_000, 3_000];
    let round: FaultKind[] = [];
    let rounds = 0;
    // "cycle" finishes its first round whatever the clock says: on a slow machine (restarts of
    // 15 s and more) a short run would otherwise end before every kind was injected once.
    const done = () => stop() && (this.opts.order !== "cycle" || round.length === 0 || rounds > 1);
    while (!done()) {
      if (this.opts.order === "cycle") {
        if (round.length === 0) {
          round = shuffle(this.r, this.opts.kinds);
          rounds++;
        }
        await this.one(round.shift()!);
      } else await this.one(pick(this.r, this.opts.kinds));
      if (done()) break;
      await sleep(this.between(gLo, gHi));
    }
  }

  private async target(): Promise<{ m: ChaosMember; leader: boolean }> {
    if (this.opts.targets === "followers") {
      const l = await this.cluster.leader();
      return { m: pick(this.r, this.cluster.members.filter((o) => o !== l)), leader: false };
    }
    if (this.r() < 0.5) {
      const l = await this.cluster.leader();
      if (l !== undefined) return { m: l, leader: true };
    }
    const m = pick(this.r, this.cluster.members);
    const l = await this.cluster.leader();
    return { m, leader: l === m };
  }

  async one(kind: FaultKind): Promise<FaultRecord> {
    const { m, leader } = await this.target();
    const rec: FaultRecord = { kind, target: m.name, detail: "", atMs: Date.now() - this.t0, durationMs: 0, leader };
    const started = Date.now();
    try {
      await this.apply(kind, m, rec);
    } catch (e) {
      rec.error = String(e);
    } finally {
      this.healLinks();
    }
    rec.durationMs = Date.now() - started;
    this.records.push(rec);
    this.opts.log?.(`fault ${kind} on ${rec.target}${rec.leader ? " (leader)" : ""}: ${rec.detail} (${rec.durationMs} ms)${rec.error ? ` error: ${rec.error}` : ""}`);
    return rec;
  }

  private async apply(kind: FaultKind, m: ChaosMember, rec: FaultRecord): Promise<void> {
    const others = this.cluster.members.filter((o) => o !== m);
    const e = this.opts.electionMs;
    switch (kind) {
      case "kill": {
        const downMs = this.between(300, 2_000);
        rec.detail = `SIGKILL, restart after ${downMs} ms`;
        this.cluster.sampleRss();
        await m.member.kill("SIGKILL");
        await sleep(downMs);
        m.member.log = "";
        m.member.start();
        await m.member.waitReady(60_000);
        return;
      }
      case "powerloss": {
        const downMs = this.between(300, 2_000);
        const dropped = await this.cluster.powerCut(m);
        const lines = dropped.split("\n").filter((l) => l.length > 0);
        rec.detail = `power cut (lazyfs lost ${lines.filter((l) => l.startsWith("lost-")).length} unsynced writes or entries, tore ${lines.filter((l) => l.startsWith("torn-write ")).length}), restart after ${downMs} ms`;
        await sleep(downMs);
        await this.cluster.mountDisk(m, Math.floor(this.r() * 2 ** 31));
        m.member.log = "";
        m.member.start();
        await m.member.waitReady(60_000);
        return;
      }
      case "pause": {
        const ms = this.between(Math.round(e * 1.5), e * 3);
        rec.detail = `SIGSTOP for ${ms} ms (election timeout ${e} ms)`;
        m.member.proc?.kill("SIGSTOP");
        m.paused = true;
        try {
          await sleep(ms);
        } finally {
          m.member.proc?.kill("SIGCONT");
          m.paused = false;
        }
        return;
      }
      case "partition": {
        const ms = this.between(Math.round(e * 1.5), e * 4);
        rec.detail = `isolated from ${others.map((o) => o.name).join(",")} for ${ms} ms`;
        for (const o of others) {
          m.proxy.setMode(BLACKHOLE, o.name);
          o.proxy.setMode(BLACKHOLE, m.name);
        }
        // Unattributed connections might come from either side (an HTTP client may reuse a probe's
        // connection for raft traffic): cut them everywhere rather than leak through the partition.
        for (const p of this.cluster.members) p.proxy.setMode(BLACKHOLE, UNKNOWN_SOURCE);
        // A member added at runtime is one of the unknown: cut from everyone, both ways.
        for (const p of this.cluster.extraProxies) p.setMode(BLACKHOLE);
        await sleep(ms);
        return;
      }
      case "oneway": {
        const to = pick(this.r, others);
        const ms = this.between(Math.round(e * 1.5), e * 4);
        rec.detail = `bytes ${m.name}→${to.name} dropped for ${ms} ms`;
        // Connections dialed by m into `to` lose their requests; those dialed by `to` into m lose m's answers.
        to.proxy.setMode({ forward: { kind: "drop" }, backward: { kind: "pass" } }, m.name);
        m.proxy.setMode({ forward: { kind: "pass" }, backward: { kind: "drop" } }, to.name);
        // Unattributed connections into either end: cut (over-approximates the one-way drop, never leaks it).
        to.proxy.setMode(BLACKHOLE, UNKNOWN_SOURCE);
        m.proxy.setMode(BLACKHOLE, UNKNOWN_SOURCE);
        for (const p of this.cluster.extraProxies) p.setMode(BLACKHOLE, UNKNOWN_SOURCE);
        await sleep(ms);
        return;
      }
      case "delay": {
        const delayMs = this.between(20, Math.round(e / 4));
        const ms = this.between(2_000, 5_000);
        rec.detail = `links of ${m.name} delayed ${delayMs} ms each way for ${ms} ms`;
        const slow = { forward: { kind: "delay" as const, ms: delayMs }, backward: { kind: "delay" as const, ms: delayMs } };
        m.proxy.setMode(slow);
        for (const o of others) o.proxy.setMode(slow, m.name);
        await sleep(ms);
        return;
      }
      case "reset": {
        let n = 0;
        for (let i = 0; i < 3; i++) {
          n += m.proxy.reset();
          for (const o of others) n += o.proxy.reset(m.name);
          await sleep(300);
        }
        rec.detail = `${n} peer connections of ${m.name} reset`;
        return;
      }
      case "compact": {
        const below = this.opts.compactBelow?.() ?? 0;
        const rev = below - 20;
        if (rev <= this.lastCompactRevision + 1) {
          rec.detail = `nothing to compact (safe bound ${below})`;
          return;
        }
        rec.detail = `compact at revision ${rev} via ${m.name}`;
        await m.conn.compact(rev, 10_000);
        this.lastCompactRevision = rev;
        return;
      }
      case "defrag": {
        rec.detail = "defragment";
        await m.conn.defragment(30_000);
        return;
      }
      case "membership": {
        // A learner added, promoted and removed while `m` is killed or partitioned (membership_fault.ts).
        const kind = pick(this.r, ["kill", "partition"] as const);
        const disrupt = async () => {
          const sub: FaultRecord = { ...rec, kind, detail: "" };
          await this.apply(kind, m, sub).finally(() => this.healLinks());
          return `${kind} ${m.name}: ${sub.detail}`;
        };
        rec.detail = await membershipChange(this.cluster, { heartbeatMs: Math.max(10, Math.round(e / 10)), electionMs: e, disrupt, log: this.opts.log });
        return;
      }
      case "farbehind": {
        Object.assign(rec, { leader: false }, await applyFarBehind(this.cluster, this.r, this.records.length));
        return;
      }
      case "transfer": {
        const leader = await this.cluster.leader();
        if (leader === undefined) {
          rec.detail = "no leader to transfer from";
          return;
        }
        const to = pick(this.r, this.cluster.members.filter((o) => o !== leader));
        rec.target = leader.name;
        rec.leader = true;
        rec.detail = `leadership ${leader.name}→${to.name}`;
        await leader.conn.moveLeader(BigInt(`0x${to.id}`).toString(), 5_000);
        return;
      }
    }
  }

  private healLinks(): void {
    for (const m of this.cluster.members) m.proxy.heal();
    for (const p of this.cluster.extraProxies) p.heal();
  }

  /** Ends any fault state (for the final phase and for cleanup after errors). */
  async healAll(): Promise<void> {
    this.healLinks();
    for (const m of this.cluster.members) {
      if (m.paused) {
        m.member.proc?.kill("SIGCONT");
        m.paused = false;
      }
      if (!m.member.running) {
        await this.cluster.mountDisk(m, Math.floor(this.r() * 2 ** 31));
        m.member.log = "";
        m.member.start();
        await m.member.waitReady(60_000);
      }
    }
  }

  counts(): Record<string, number> {
    const out: Record<string, number> = {};
    for (const r of this.records) out[r.kind] = (out[r.kind] ?? 0) + 1;
    return out;
  }
}
