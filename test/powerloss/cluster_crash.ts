/**
 * Members of a three-member cluster lose power under a write load (issue 20): each member's data
 * dir on its own lazyfs, acknowledged puts recorded, then one member, two (a majority) or all three
 * lose power at the same seeded moment (a delay; right after the first victim logs a raft
 * snapshot; at a step of a follower's snapshot install; around a raft WAL segment cut:
 * cluster_cuts.ts), restart on what is left, and the checks:
 *
 *   - every victim starts, or refuses with a message naming a file and an offset;
 *   - the cluster converges: one leader, every member at the same revision;
 *   - every acknowledged put is there with its value (an ack means a majority had it durably);
 *   - HashKV at that revision is equal on every member (same state at the same index);
 *   - SQLite's integrity_check passes on every victim's backend as the power cut left it.
 *
 * Seeded: the seed picks the victims, the cut moment, the load's values and lazyfs's torn write
 * and writeback; the report prints it and `npm run powerloss -- --cluster ... --seed N` replays it.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { type Member, newClusterArgs, SERVER_JS } from "../e2e/harness.js";
import { reservePorts } from "../ports.js";
import { mulberry32 } from "../prng.js";
import { EtcdConnection } from "../reliability/etcd_client.js";
import { integrityOf, killMember, namesFileAndOffset, refusalLine, startMember, valueOf, waitForLine } from "./crash_checks.js";
import { awaitInstallStep, awaitWalCut, pickFollower, WAL_CUT_ENV } from "./cluster_cuts.js";
import { diagnose, lastLines, PhaseClock } from "./cluster_diagnosis.js";
import { LazyFs, scratch } from "./lazyfs.js";

export { stopAll } from "./crash_checks.js";

export type Victims = "one" | "majority" | "all";
export const VICTIMS: readonly Victims[] = ["one", "majority", "all"];
export type ClusterCutAt = "delay" | "snapshot" | "snapshot-install" | "wal-cut";
export const CLUSTER_CUT_POINTS: readonly ClusterCutAt[] = ["delay", "snapshot", "snapshot-install", "wal-cut"];

export interface ClusterCrashOptions {
  seed: number;
  victims: Victims;
  cutAt: ClusterCutAt;
  valueBytes?: number;
  concurrency?: number;
  snapshotCount?: number;
  maxWals?: number;
  /** Upper bound of the seeded delay into the load, ms. */
  maxDelayMs?: number;
  tear?: boolean;
  /** lazyfs --writeback: the share (%) of unsynced pages the OS had written back before the cut. */
  writebackPercent?: number;
  keep?: boolean;
  /** How long a restarted member may take to be ready, and the cluster to converge (default 60 s each). */
  restartTimeoutMs?: number;
  /** Environment of every member (the mutation test plants ETCETERA_TEST_BUG=wal-no-sync). */
  env?: Record<string, string>;
  /**
   * The whole run's budget (default 225 s, inside the test's 240 s): past it the run stops where it
   * is and throws its diagnosis (cluster_diagnosis.ts) instead of being killed silently by a timeout.
   */
  budgetMs?: number;
  log?: (line: string) => void;
}

export interface VictimReport {
  name: string;
  integrity: string;
  restart: "started" | "refused";
  refusal?: string;
  refusalNamesFileAndOffset?: boolean;
}

export interface ClusterCrashReport {
  seed: number;
  victims: Victims;
  cutAt: ClusterCutAt;
  cutDescription: string;
  acked: number;
  maxAckedRevision: number;
  victimReports: VictimReport[];
  /** Why the cluster did not converge, if it did not. */
  convergence?: string;
  /** Revision every member reached, and each member's HashKV at it. */
  revisionAfter?: number;
  hashes: { name: string; hash: number }[];
  lost: { key: string; ackedRevision: number; got: string }[];
  lostCount: number;
  cutLogs: string;
  logsAfter: string;
  /** The phases and their durations (PhaseClock.describe at the end). */
  timeline: string;
  /** The diagnosis (cluster_diagnosis.ts), taken while the members still ran, when a check failed. */
  diagnosis?: string;
  dir: string;
  ok: boolean;
}

const KEY_PREFIX = "plc/";
const NAMES = ["n1", "n2", "n3"];

/** The victims' indexes: a seeded choice of one, two or all three members. */
function pickVictims(victims: Victims, rnd: () => number): number[] {
  const order = [0, 1, 2];
  for (let i = order.length - 1; i > 0; i--) {
    const j = Math.floor(rnd() * (i + 1));
    [order[i], order[j]] = [order[j]!, order[i]!];
  }
  const count = victims === "one" ? 1 : victims === "majority" ? 2 : 3;
  return order.slice(0, count).sort();
}

async function sleep(ms: number): Promise<void> {
  await new Promise((r) => setTimeout(r, ms));
}

/**
 * Waits for a put committed through the cluster (convergence), then until every member answers
 * Status with the same leader and the same applied revision (catch-up).
 */
async function converge(conns: EtcdConnection[], timeoutMs: number, clock: PhaseClock): Promise<{ revision: number } | { failure: string }> {
  const deadline = Date.now() + timeoutMs;
  let last = "";
  let synced = false;
  clock.enter("convergence");
  // A put through the cluster: a new leader's first entry of its term is committed with it.
  while (Date.now() < deadline && clock.abandoned === undefined) {
    try {
      await conns[0]!.execute({ kind: "put", key: `${KEY_PREFIX}sync`, value: "sync" }, 5_000);
      synced = true;
      break;
    } catch (e) {
      last = `sync put: ${(e as Error).message}`;
      await sleep(200);
    }
  }
  if (!synced) return { failure: `no put committed through the cluster within ${timeoutMs} ms (${last})` };
  clock.enter("catch-up");
  while (Date.now() < deadline && clock.abandoned === undefined) {
    try {
      const statuses = await Promise.all(conns.map((c) => c.status(5_000)));
      const leaders = new Set(statuses.map((s) => s.leader));
      const revisions = new Set(statuses.map((s) => s.revision));
      last = `leaders ${[...leaders].join(",")}; revisions ${statuses.map((s) => s.revision).join(",")}`;
      if (leaders.size === 1 && !leaders.has("0") && revisions.size === 1) return { revision: statuses[0]!.revision };
    } catch (e) {
      last = `status: ${(e as Error).message}`;
    }
    await sleep(100);
  }
  return { failure: `members not at one revision under one leader after ${timeoutMs} ms (${last})` };
}

export async function runClusterCrash(o: ClusterCrashOptions): Promise<ClusterCrashReport> {
  if (!existsSync(SERVER_JS)) throw new Error(`${SERVER_JS} missing: run 'npm run build' first`);
  const log = o.log ?? (() => {});
  const rnd = mulberry32(o.seed);
  const valueBytes = o.valueBytes ?? 2048;
  const concurrency = o.concurrency ?? 24;
  let victims = pickVictims(o.victims, rnd);
  const env = { ...(o.cutAt === "wal-cut" ? WAL_CUT_ENV : {}), ...o.env };
  const s = scratch("etcetera-powerloss-cluster");
  const ports = await reservePorts(6);
  const specs = NAMES.map((name, i) => ({ name, clientPort: ports[2 * i]!, peerPort: ports[2 * i + 1]!, dataDir: join(s.mnt, name, "data") }));
  const argsOf = (x: (typeof specs)[number]) => [
    ...newClusterArgs(x, specs, "powerloss-cluster"),
    `--snapshot-count=${o.snapshotCount ?? 1000}`,
    // A follower restarted a few hundred puts behind must need a snapshot (snapshot-install).
    ...(o.cutAt === "snapshot-install" ? ["--experimental-snapshot-catchup-entries=50"] : []),
    `--max-wals=${o.maxWals ?? 1}`,
    "--log-level=info",
  ];
  // One lazyfs per member, as one machine per member: each loses power on its own.
  const disks = NAMES.map((name) => ({ disk: join(s.disk, name), work: join(s.work, name), mnt: join(s.mnt, name) }));
  const mounts: (LazyFs | undefined)[] = [];
  const members: Member[] = [];
  const conns: EtcdConnection[] = [];
  const mount = (i: number, logFile: string, seeded: boolean) =>
    LazyFs.mount({
      disk: disks[i]!.disk,
      work: disks[i]!.work,
      mountpoint: disks[i]!.mnt,
      log: logFile,
      ...(seeded ? { seed: o.seed + i, tear: o.tear ?? true, writebackPercent: o.writebackPercent } : {}),
    });
  const clock = new PhaseClock();
  const logsBeforeCut = new Map<string, string>();
  let cutLogs = "";
  let stop = false;
  const diagnosis = () =>
    diagnose({
      clock,
      members,
      dataDirs: specs.map((x, i) => ({ mounted: x.dataDir, mountpoint: disks[i]!.mnt, disk: join(disks[i]!.disk, "data") })),
      logsBeforeCut,
      cutLogs,
    });

  const run = async (): Promise<ClusterCrashReport> => {
    for (let i = 0; i < 3; i++) mounts[i] = await mount(i, join(s.root, `cut-${NAMES[i]}.log`), true);
    for (const x of specs) members.push(startMember(x, argsOf(x), env));
    await Promise.all(members.map((m) => m.waitReady(60_000)));
    for (const m of members) conns.push(new EtcdConnection(m.endpoint));

    // The load: puts of distinct keys spread over the members; an ack is recorded when it arrives.
    clock.enter("first acknowledged put");
    const acked = new Map<number, number>();
    let next = 0;
    const worker = async (w: number) => {
      while (!stop) {
        const n = next++;
        // A member that is down (snapshot-install stops a follower) is skipped: calls into a dead
        // endpoint can hang past their deadline while gRPC reconnects, and would take every worker.
        let i = (n + w) % conns.length;
        for (let k = 0; k < conns.length && !members[i]!.running; k++) i = (i + 1) % conns.length;
        const conn = conns[i]!;
        try {
          const r = await conn.execute({ kind: "put", key: `${KEY_PREFIX}${n}`, value: valueOf(o.seed, n, valueBytes) }, 5_000);
          acked.set(n, r.revision);
        } catch {
          await sleep(5);
        }
      }
    };
    const workers = Array.from({ length: concurrency }, (_, w) => worker(w));
    const ackDeadline = Date.now() + 30_000;
    while (acked.size === 0) {
      if (Date.now() > ackDeadline) throw new Error("no put acknowledged within 30 s");
      clock.check();
      await sleep(5);
    }
    const t0 = Date.now();
    let cutDescription: string;
    if (o.cutAt === "snapshot-install") {
      // The first victim is a follower that catches up by a snapshot; the others (if any) go with it.
      clock.enter("picking a follower");
      const f = await pickFollower(conns, rnd, 30_000);
      victims = o.victims === "one" ? [f] : [f, ...victims.filter((i) => i !== f)].slice(0, victims.length);
      const writesWhileDown = 2 * (o.snapshotCount ?? 1000) + 200;
      cutDescription = await awaitInstallStep({ members, follower: f, ackedCount: () => acked.size, writesWhileDown, rnd, env, args: argsOf(specs[f]!), clock });
    } else {
      clock.enter("waiting for the cut trigger");
      if (o.cutAt === "delay") {
        const delayMs = Math.floor(200 + rnd() * ((o.maxDelayMs ?? 6000) - 200));
        await sleep(delayMs);
        cutDescription = `${delayMs} ms after the first acknowledged put`;
      } else if (o.cutAt === "wal-cut") {
        cutDescription = await awaitWalCut(members[victims[0]!]!, rnd);
      } else {
        const needle = '"msg":"saved snapshot"';
        const occurrence = 1 + Math.floor(rnd() * 3);
        const seen = await waitForLine(members[victims[0]!]!, needle, occurrence, 120_000);
        cutDescription = seen
          ? `right after ${needle} #${occurrence} on ${NAMES[victims[0]!]} (${Date.now() - t0} ms after the first acknowledged put)`
          : `trigger ${needle} #${occurrence} never came on ${NAMES[victims[0]!]} (${Date.now() - t0} ms after the first acknowledged put)`;
      }
    }
    // The power cut, on every victim at once: the processes die with their machines, then each
    // lazyfs drops what was not durable. Acks counted are those that arrived before the cut.
    clock.enter("power cut");
    await Promise.all(victims.map((i) => killMember(members[i]!)));
    for (const i of victims) logsBeforeCut.set(NAMES[i]!, members[i]!.log);
    // Acks that arrive from survivors until the load stops are acknowledged writes too.
    stop = true;
    await Promise.all(workers);
    const victimReports: VictimReport[] = [];
    for (const i of victims) {
      const dropped = await mounts[i]!.powerCut();
      mounts[i] = undefined;
      cutLogs += `---- ${NAMES[i]}\n${dropped.length > 3000 ? `${dropped.slice(0, 1500)}\n...\n${dropped.slice(-1500)}` : dropped}\n`;
      const integrity = integrityOf(join(disks[i]!.disk, "data", "member", "snap", "db"), join(s.root, `integrity-${NAMES[i]}`));
      victimReports.push({ name: NAMES[i]!, integrity, restart: "started" });
    }
    const maxAckedRevision = Math.max(0, ...acked.values());
    log(`[powerloss cluster] seed=${o.seed} victims=${victims.map((i) => NAMES[i]).join(",")} cut ${cutDescription}: ${acked.size} puts acknowledged (max revision ${maxAckedRevision})`);

    // Restart every victim on what is left.
    clock.enter("waiting for restart");
    for (const i of victims) {
      mounts[i] = await mount(i, join(s.root, `after-${NAMES[i]}.log`), false);
      members[i] = startMember(specs[i]!, argsOf(specs[i]!), env);
    }
    await Promise.all(
      victims.map(async (i, k) => {
        try {
          await members[i]!.waitReady(o.restartTimeoutMs ?? 60_000);
        } catch (e) {
          const refusal = (e as Error).message.slice(-3000);
          victimReports[k] = { ...victimReports[k]!, restart: "refused", refusal, refusalNamesFileAndOffset: namesFileAndOffset(refusalLine(refusal)) };
        }
      }),
    );
    for (const c of conns.splice(0)) c.close();
    const started = members.filter((m) => m.running);
    for (const m of started) conns.push(new EtcdConnection(m.endpoint));

    const lost: ClusterCrashReport["lost"] = [];
    let lostCount = 0;
    const hashes: ClusterCrashReport["hashes"] = [];
    let revisionAfter: number | undefined;
    let convergence: string | undefined;
    const c = started.length >= 2 ? await converge(conns, o.restartTimeoutMs ?? 60_000, clock) : { failure: `only ${started.length} member(s) started` };
    if ("failure" in c) convergence = c.failure;
    else {
      clock.enter("hashkv");
      revisionAfter = c.revision;
      for (let k = 0; k < conns.length; k++) hashes.push({ name: started[k]!.spec.name, hash: (await conns[k]!.hashKV(c.revision, 10_000)).hash });
      clock.enter("read-back");
      const keys = [...acked.entries()];
      for (let i = 0; i < keys.length; i += 64) {
        clock.check();
        await Promise.all(
          keys.slice(i, i + 64).map(async ([n, rev]) => {
            const r = await conns[n % conns.length]!.execute({ kind: "get", key: `${KEY_PREFIX}${n}` }, 10_000);
            const got = r.kind === "get" ? (r.kv ?? undefined) : undefined;
            if (got === undefined || got.value !== valueOf(o.seed, n, valueBytes)) {
              lostCount++;
              if (lost.length < 10) lost.push({ key: `${KEY_PREFIX}${n}`, ackedRevision: rev, got: got === undefined ? "(absent)" : `value of ${got.value.length} bytes` });
            }
          }),
        );
      }
    }
    const victimsOk = victimReports.every((v) => v.integrity === "ok" && (v.restart === "started" || v.refusalNamesFileAndOffset === true));
    const ok = victimsOk && convergence === undefined && lostCount === 0 && new Set(hashes.map((h) => h.hash)).size === 1;
    // Taken while the members still run (Status, their files): what the summary shows on a failure.
    const checksFailed = !ok || victimReports.some((v) => v.restart !== "started") || hashes.length !== NAMES.length;
    const diagnosisText = checksFailed ? await diagnosis() : undefined;
    clock.enter("done");
    return {
      seed: o.seed,
      victims: o.victims,
      cutAt: o.cutAt,
      cutDescription,
      acked: acked.size,
      maxAckedRevision,
      victimReports,
      convergence,
      revisionAfter,
      hashes,
      lost,
      lostCount,
      cutLogs,
      logsAfter: members.map((m) => `==== ${m.spec.name}\n${lastLines(m.log, 15).join("\n")}`).join("\n"),
      timeline: clock.describe(),
      diagnosis: diagnosisText,
      dir: s.root,
      ok,
    };
  };

  // The run races its budget: a run that stalls says where (its diagnosis) before it is stopped.
  const budgetMs = o.budgetMs ?? 225_000;
  let budgetTimer: NodeJS.Timeout | undefined;
  const overBudget = new Promise<"over budget">((res) => (budgetTimer = setTimeout(() => res("over budget"), budgetMs)));
  const body = run().then(
    (report) => ({ report }),
    (error: unknown) => ({ error: error instanceof Error ? error : new Error(String(error)) }),
  );
  try {
    const first = await Promise.race([body, overBudget]);
    if (first === "over budget") {
      const text = await diagnosis();
      clock.abandon(`over the run's budget of ${budgetMs} ms`);
      throw new Error(`power-loss run seed=${o.seed} victims=${o.victims} cut-at=${o.cutAt} did not finish within ${budgetMs} ms\n${text}`);
    }
    if ("error" in first) {
      const text = await diagnosis();
      first.error.message = `power-loss run seed=${o.seed} victims=${o.victims} cut-at=${o.cutAt} failed: ${first.error.message}\n${text}`;
      throw first.error;
    }
    return first.report;
  } finally {
    clearTimeout(budgetTimer);
    clock.abandon("the run ended");
    stop = true;
    for (const c of conns) c.close();
    for (const m of members) await killMember(m);
    // An abandoned run's body stops at its next phase or wait once its members are gone.
    await Promise.race([body, sleep(15_000)]);
    for (const m of members) await killMember(m);
    for (const f of mounts) await f?.unmount();
    if (o.keep !== true) {
      try {
        s.remove();
      } catch (e) {
        log(`[powerloss cluster] could not remove ${s.root}: ${(e as Error).message}`);
      }
    }
  }
}

/** A human summary of a report. */
export function describeClusterReport(r: ClusterCrashReport, replay: string): string {
  const lines = [
    `seed=${r.seed} victims=${r.victims} cut-at=${r.cutAt}: ${r.ok ? "OK" : "FAILED"} (replay: ${replay})`,
    `  cut ${r.cutDescription}; ${r.acked} puts acknowledged, max revision ${r.maxAckedRevision}`,
  ];
  for (const v of r.victimReports) {
    lines.push(`  ${v.name} lost power: integrity_check ${v.integrity}; ${v.restart}${v.restart === "refused" ? ` (names a file and an offset: ${v.refusalNamesFileAndOffset})` : ""}`);
    if (v.refusal !== undefined) lines.push(...v.refusal.split("\n").slice(-6).map((l) => `    ${l}`));
  }
  if (r.convergence !== undefined) lines.push(`  ${r.convergence}`);
  else {
    lines.push(`  converged at revision ${r.revisionAfter}; HashKV ${r.hashes.map((h) => `${h.name}=${h.hash}`).join(" ")}; acknowledged puts lost: ${r.lostCount}`);
    for (const l of r.lost) lines.push(`    ${l.key} (acked at revision ${l.ackedRevision}): ${l.got}`);
  }
  lines.push(`  ${r.timeline}`);
  // Every member's Status, files and last lines, and what lazyfs dropped (cluster_diagnosis.ts);
  // each member's own tail, not the tail of all three logs joined (that showed the last member only).
  if (r.diagnosis !== undefined) lines.push(...r.diagnosis.split("\n").map((l) => `  ${l}`));
  else if (!r.ok) lines.push("  member logs after:", ...r.logsAfter.split("\n").map((l) => `    ${l}`));
  return lines.join("\n");
}
