/**
 * One chaos run: a 3-member cluster behind link proxies, the recorded workload, seeded faults for
 * `durationS`, then heal, final reads, watch drain, a full replay of the revision history, and the
 * checks — linearizability, watch guarantees, acknowledged writes lost (every one read back from
 * every member at its revision, readback.ts, and looked up in the watch streams). Used by scripts/chaos.ts
 * and the chaos test. The target is the harness's: etcetera, or etcd with E2E_TARGET=etcd.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { TARGET_ETCD } from "../e2e/harness.js";
import { ChaosCluster } from "./chaos_cluster.js";
import { formatTlsReport, type ChaosTlsReport } from "./chaos_tls.js";
import { toWatchEvent, type EtcdConnection, type PbWatchResponse } from "./etcd_client.js";
import { farBehindArgs } from "./far_behind_fault.js";
import { FaultInjector, type FaultKind, type FaultRecord } from "./faults.js";
import { rng } from "./gen.js";
import { writeRevision } from "./history.js";
import { patchUnknownWrites, type PatchStats } from "./history_patch.js";
import { ReadBack, writesMissingFromWatch, type MemberReader, type ReadAt } from "./readback.js";
import { checkKvHistory } from "./linearizability.js";
import { writeViolations } from "./timeline.js";
import { checkWatches } from "./watch_check.js";
import { prefixRangeEnd, WatchStreamRecorder, type WatchStream } from "./watch_history.js";
import { Workload, type WorkloadStats } from "./workload.js";
import { performance } from "node:perf_hooks";

export interface ChaosOptions {
  seed: number;
  durationS: number;
  faults: readonly FaultKind[];
  /** Fault order: random draws (default) or every kind in turn. */
  faultOrder?: "random" | "cycle";
  /** Whom faults hit: the leader half of the time ("any", the default), or followers only. */
  faultTargets?: "any" | "followers";
  /** Where violation files and the history go (default: a directory under the OS temp dir). */
  outDir?: string;
  clients?: number;
  /** Keys the workload spreads over (more keys = smaller checker partitions for long runs). */
  keys?: number;
  thinkMs?: number;
  /** TEST-ONLY: the injected client bug (fraction of reads served from a client cache). */
  staleReadRate?: number;
  /** TEST-ONLY: reads without ReadIndex (serializable Ranges). */
  serializableGets?: boolean;
  /**
   * TEST-ONLY: a bug planted in every etcetera member (src/server/test_bugs.ts), e.g.
   * "follower-local-read": followers serve linearizable reads locally, without ReadIndex.
   */
  serverBug?: "follower-local-read";
  heartbeatMs?: number;
  electionMs?: number;
  /**
   * Whether watchers send WatchProgressRequest. Default: no, on both targets: etcd 3.4.23 answers
   * them at once with the current revision even to unsynced watchers — etcd issue #15220, fixed
   * by etcd PR #15237 in later releases — and etcetera answers as 3.4 does, so the answer can be
   * ahead of events still on their way (the checker would call that progress-ahead). Both get
   * timed progress notifications every second instead (per watcher, only once it is synced).
   */
  progressRequests?: boolean;
  /** TLS on both ports, client and peer certificates required (chaos_tls.ts; the proxies terminate and re-encrypt, tls_proxy.ts). */
  tls?: boolean;
  log?: (line: string) => void;
}

export interface ChaosReport {
  seed: number;
  target: "etcd" | "etcetera";
  durationS: number;
  operations: { total: number; ok: number; fail: number; unknown: number; byKind: WorkloadStats["byKind"] };
  faults: FaultRecord[];
  faultCounts: Record<string, number>;
  linearizable: "yes" | "no" | "unknown";
  checkerSteps: number;
  unknownWrites: PatchStats;
  violations: string[];
  reportFiles: string[];
  watch: { ok: boolean; streams: number; events: number; progressNotifies: number; requiredDeliveries: number; prevKvChecked: number; violations: string[]; laggingWatchers: number[]; compactedWatchers: number[]; reconnects: number };
  ackedWrites: number;
  /** Read-back failures (lost + unverified) plus writes missing from the watch streams. */
  lostWrites: number;
  lostExamples: string[];
  readBack: { writes: number; reads: number; lost: number; unverified: number; missingFromWatch: number };
  finalRevision: number;
  lastCompactRevision: number;
  peakRssMiB: Record<string, number>;
  staleReadsInjected: number;
  /** TEST-ONLY bugs that were switched on for this run (empty in a real run). */
  injectedBugs: string[];
  /** Set for a TLS run: the proxies' handshakes. */
  tls?: ChaosTlsReport;
  outDir: string;
  passed: boolean;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const READ_BACK_TIMEOUT_MS = 3_000;
/** Pause between read-back sweeps during the run. */
const READ_BACK_EVERY_MS = 1_000;

async function eventually<T>(fn: () => Promise<T | undefined>, timeoutMs: number, what: string): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      const v = await fn();
      if (v !== undefined) return v;
    } catch (e) {
      last = e;
    }
    await sleep(200);
  }
  throw new Error(`timed out waiting for ${what}${last !== undefined ? `: ${String(last)}` : ""}`);
}

/**
 * Watches the prefix from `from` (1, or after the last compaction) up to `upTo`. Every
 * revision up to `upTo` is a write under the prefix (only the workload writes), so the replay is
 * complete when an event reaches `upTo`; no progress requests (see `progressRequests`).
 */
async function replay(conn: EtcdConnection, prefix: string, from: number, upTo: number, timeoutMs: number): Promise<WatchStream> {
  const rec = new WatchStreamRecorder(999, { key: prefix, rangeEnd: prefixRangeEnd(prefix) }, true);
  rec.open(from);
  const stream = conn.openWatch(false);
  let covered = 0;
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => done(new Error(`replay reached revision ${covered} of ${upTo}`)), timeoutMs);
    const done = (err?: Error) => {
      clearTimeout(timer);
      stream.removeAllListeners("data");
      stream.on("error", () => undefined);
      stream.cancel();
      if (err) reject(err);
      else resolve();
    };
    stream.on("data", (res: PbWatchResponse) => {
      const rev = Number(res.header?.revision ?? 0);
      if (res.created) return void rec.created(rev);
      if (res.canceled) return done(new Error(`replay canceled: ${res.cancel_reason}`));
      const events = res.events.map((e) => toWatchEvent(e, true));
      rec.response({ time: performance.now(), headerRevision: rev, events, progressNotify: events.length === 0 });
      for (const e of events) covered = Math.max(covered, e.kv.modRevision);
      if (covered >= upTo) done();
    });
    stream.on("error", (e: Error) => done(e));
    stream.write({ create_request: { key: Buffer.from(prefix), range_end: Buffer.from(prefixRangeEnd(prefix), "latin1"), start_revision: String(from), prev_kv: true } });
  });
  return rec.stream;
}

export async function runChaos(opts: ChaosOptions): Promise<ChaosReport> {
  const log = opts.log ?? (() => undefined);
  const electionMs = opts.electionMs ?? 1_000;
  const outDir = opts.outDir ?? join(tmpdir(), `etcetera-chaos-${opts.seed}-${Date.now()}`);
  mkdirSync(outDir, { recursive: true });
  const r = rng(opts.seed);
  log(`chaos: seed=${opts.seed} target=${TARGET_ETCD ? "etcd" : "etcetera"}${opts.tls === true ? " tls=both-ports" : ""} duration=${opts.durationS}s faults=${opts.faults.join(",")} out=${outDir}`);
  const progressRequests = opts.progressRequests ?? false;
  if (opts.serverBug !== undefined && TARGET_ETCD) throw new Error("a server-side test bug can only be planted in etcetera");
  const cluster = await ChaosCluster.create({
    size: 3,
    heartbeatMs: opts.heartbeatMs ?? 100,
    electionMs,
    extraArgs: ["--experimental-watch-progress-notify-interval=1s", ...(opts.faults.includes("farbehind") ? farBehindArgs() : [])],
    env: opts.serverBug !== undefined ? { ETCETERA_TEST_BUG: opts.serverBug, ETCETERA_TEST_BUGS_ALLOWED: "1" } : {},
    // The power-loss fault needs every data dir on lazyfs; the other faults run on plain disks.
    powerLoss: opts.faults.includes("powerloss"),
    tls: opts.tls === true,
  });
  let workload: Workload | undefined;
  let injector: FaultInjector | undefined;
  try {
    await cluster.start();
    const first = await eventually(() => cluster.leader(), 30_000, "a leader");
    log(`cluster up, leader ${first.name}; peer connections by source: ${cluster.members.map((m) => `${m.name}←[${m.proxy.sources().join(",")}]`).join(" ")}`);
    workload = new Workload({ endpoints: cluster.endpoints, ...(cluster.tls !== undefined ? { clientTls: cluster.tls.client } : {}), seed: Math.floor(r() * 2 ** 31), clients: opts.clients ?? 6, keys: opts.keys ?? 6, thinkMs: opts.thinkMs ?? 5, maxOps: 3_000_000, staleReadRate: opts.staleReadRate ?? 0, serializableGets: opts.serializableGets ?? false, progressRequests });
    workload.start();
    const wl = workload;
    const readers: MemberReader[] = cluster.members.map((m) => ({
      name: m.name,
      localRevision: () => m.conn.localRevision(wl.keyPrefix, READ_BACK_TIMEOUT_MS),
      readAt: async (reads) => (await m.conn.readAt(reads, READ_BACK_TIMEOUT_MS)).map((kv): ReadAt => (kv === null ? { kind: "absent" } : { kind: "kv", ...kv })),
    }));
    const readBack = new ReadBack(readers);
    readBack.follow(wl.recorder.completed());
    // Compaction only below what the read-back has read everywhere and below any write still to come.
    const compactBelow = () => {
      readBack.sync();
      return Math.min(wl.minWatcherCovered(), readBack.compactionBound(wl.recorder.inflightFloor()));
    };
    injector = new FaultInjector(cluster, rng(Math.floor(r() * 2 ** 31)), { kinds: opts.faults, electionMs, log, order: opts.faultOrder ?? "random", targets: opts.faultTargets ?? "any", compactBelow });
    const end = Date.now() + opts.durationS * 1000;
    let sweeping = true;
    const sweeper = (async () => {
      while (sweeping) {
        await readBack.sweep();
        await sleep(READ_BACK_EVERY_MS);
      }
    })();
    await injector.run(() => Date.now() >= end);
    sweeping = false;
    await sweeper;

    log("healing; final phase");
    await injector.healAll();
    await eventually(() => cluster.leader(), 30_000, "a leader after healing");
    await sleep(1_000);
    await workload.stopClients();
    await workload.finalReads();
    const finalRevision = await eventually(async () => (await cluster.members[0]!.conn.execute({ kind: "get", key: "chaos/k0" }, 3_000)).revision, 30_000, "the final revision");
    const laggingWatchers = await workload.drainWatchers(finalRevision, 30_000);
    const replayed = await replay(cluster.members[0]!.conn, workload.keyPrefix, injector.lastCompactRevision + 1, finalRevision, 30_000);
    const compactedWatchers = workload.compactedWatchers();
    // Every acknowledged write not yet read back from every member: read it now.
    const readBackBy = Date.now() + 60_000;
    do await readBack.sweep();
    while (readBack.pendingCount() > 0 && Date.now() < readBackBy && (await sleep(500), true));
    for (const [name, n] of Object.entries(readBack.pendingByMember())) if (n > 0) readBack.unverified.push(`${name}: ${n} acknowledged writes could not be read back within 60 s`);
    log(`read back ${readBack.writes} acknowledged writes from ${cluster.members.length} members (${readBack.verified} reads): ${readBack.lost.length} lost, ${readBack.unverified.length} unverified`);
    await workload.close();

    const history = workload.history();
    writeFileSync(join(outDir, "history.json"), JSON.stringify(history.map((o) => ({ ...o, ret: o.ret === Infinity ? null : o.ret }))));
    const patched = patchUnknownWrites(history, [...workload.watchStreams(), replayed], replayed);
    log(`checking ${history.length} operations (unknown writes resolved by watch: ${JSON.stringify(patched.stats)})`);
    const lin = checkKvHistory(patched.history, { stepBudget: 3_000_000 });
    const files = writeViolations(outDir, lin.violations);
    const watch = checkWatches(history, [...workload.watchStreams(), replayed]);
    writeFileSync(join(outDir, "watch-violations.txt"), watch.violations.map((v) => `${v.kind}: ${v.message}`).join("\n") + "\n");
    const missingFromWatch = writesMissingFromWatch(history, [replayed, ...workload.watchStreams()]);
    const lost = [...readBack.lost, ...readBack.unverified, ...missingFromWatch];
    cluster.sampleRss();

    const k = workload.stats.byKind;
    const sum = (o: "ok" | "fail" | "unknown") => k.put[o] + k.get[o] + k.delete[o] + k.cas[o];
    const linearizable = lin.outcome === "ok" ? "yes" : lin.outcome === "illegal" ? "no" : "unknown";
    const report: ChaosReport = {
      seed: opts.seed,
      target: TARGET_ETCD ? "etcd" : "etcetera",
      durationS: opts.durationS,
      operations: { total: sum("ok") + sum("fail") + sum("unknown"), ok: sum("ok"), fail: sum("fail"), unknown: sum("unknown"), byKind: k },
      faults: injector.records,
      faultCounts: injector.counts(),
      linearizable,
      checkerSteps: lin.steps,
      unknownWrites: patched.stats,
      violations: lin.violations.map((v) => v.explanation),
      reportFiles: files.map((f) => f.html),
      watch: {
        ok: watch.ok && laggingWatchers.length === 0 && compactedWatchers.length === 0,
        streams: watch.stats.streams,
        events: watch.stats.events,
        progressNotifies: watch.stats.progressNotifies,
        requiredDeliveries: watch.stats.requiredDeliveries,
        prevKvChecked: watch.stats.prevKvChecked,
        violations: watch.violations.map((v) => `${v.kind}: ${v.message}`),
        laggingWatchers,
        compactedWatchers,
        reconnects: workload.stats.watchReconnects,
      },
      ackedWrites: history.filter((o) => writeRevision(o) !== undefined).length,
      lostWrites: lost.length,
      lostExamples: lost.slice(0, 5),
      readBack: { writes: readBack.writes, reads: readBack.verified, lost: readBack.lost.length, unverified: readBack.unverified.length, missingFromWatch: missingFromWatch.length },
      finalRevision,
      lastCompactRevision: injector.lastCompactRevision,
      peakRssMiB: Object.fromEntries(cluster.members.map((m) => [m.name, Math.round((m.peakRssKiB / 1024) * 10) / 10])),
      staleReadsInjected: workload.stats.staleReadsInjected,
      injectedBugs: [
        ...((opts.staleReadRate ?? 0) > 0 ? [`stale-read=${opts.staleReadRate}`] : []),
        ...(opts.serializableGets ? ["serializable-reads"] : []),
        ...(opts.serverBug !== undefined ? [`server:${opts.serverBug}`] : []),
      ],
      ...(cluster.tls !== undefined ? { tls: cluster.tls.report(cluster.members) } : {}),
      outDir,
      passed: false,
    };
    report.passed = linearizable === "yes" && report.watch.ok && report.lostWrites === 0;
    writeFileSync(join(outDir, "report.json"), JSON.stringify(report, null, 1));
    return report;
  } catch (e) {
    log(`chaos run failed: ${String(e)}\n${cluster.logs()}`);
    throw e;
  } finally {
    await injector?.healAll().catch(() => undefined);
    if (workload !== undefined && !workload.closed) {
      workload.stopping = true;
      await workload.close().catch(() => undefined);
    }
    await cluster.destroy();
  }
}

export function formatReport(rep: ChaosReport): string {
  const ops = rep.operations;
  const kinds = (["put", "get", "delete", "cas"] as const).map((k) => `${k} ${rep.operations.byKind[k].ok}/${rep.operations.byKind[k].fail}/${rep.operations.byKind[k].unknown}`).join(", ");
  const lines = [
    `==== chaos report (seed ${rep.seed}, target ${rep.target}, ${rep.durationS}s)`,
    `operations: ${ops.total} (ok ${ops.ok}, failed ${ops.fail}, unknown ${ops.unknown}); ok/fail/unknown by kind: ${kinds}`,
    `faults injected: ${rep.faults.length} ${JSON.stringify(rep.faultCounts)}${rep.faults.some((f) => f.error) ? ` (${rep.faults.filter((f) => f.error).length} with errors)` : ""}`,
    `leader targeted: ${rep.faults.filter((f) => f.leader).length} times`,
    `linearizable: ${rep.linearizable} (checker steps ${rep.checkerSteps}; unknown-outcome writes: ${rep.unknownWrites.applied} applied and ${rep.unknownWrites.notApplied} not, per the watch replay; ${rep.unknownWrites.stillUnknown} left unknown)`,
    ...rep.violations.slice(0, 3).map((v) => `  ${v.split("\n").join("\n  ")}`),
    ...(rep.reportFiles.length > 0 ? [`  timelines: ${rep.reportFiles.join(", ")}`] : []),
    `watch checks: ${rep.watch.ok ? "passed" : "FAILED"} (${rep.watch.streams} streams, ${rep.watch.events} events, ${rep.watch.progressNotifies} progress notifications, ${rep.watch.requiredDeliveries} required deliveries, ${rep.watch.prevKvChecked} prev_kv checked, ${rep.watch.reconnects} reconnects${rep.watch.laggingWatchers.length > 0 ? `, lagging watchers ${rep.watch.laggingWatchers.join(",")}` : ""}${rep.watch.compactedWatchers.length > 0 ? `, watchers compacted away ${rep.watch.compactedWatchers.join(",")}` : ""})`,
    ...rep.watch.violations.slice(0, 5).map((v) => `  ${v}`),
    `acknowledged writes lost: ${rep.lostWrites} of ${rep.ackedWrites} (final revision ${rep.finalRevision}${rep.lastCompactRevision > 0 ? `, compacted up to ${rep.lastCompactRevision}` : ""}; ` +
      `read back from every member: ${rep.readBack.writes} writes, ${rep.readBack.reads} reads, ${rep.readBack.lost} lost, ${rep.readBack.unverified} unverified; missing from the watch streams: ${rep.readBack.missingFromWatch})`,
    ...rep.lostExamples.map((l) => `  ${l}`),
    ...(rep.tls !== undefined ? [formatTlsReport(rep.tls)] : []),
    `peak RSS (VmHWM): ${Object.entries(rep.peakRssMiB).map(([n, v]) => `${n} ${v} MiB`).join(", ")}`,
    ...(rep.injectedBugs.length > 0 ? [`TEST-ONLY injected bugs: ${rep.injectedBugs.join(", ")} (stale reads served from cache: ${rep.staleReadsInjected})`] : []),
    `result: ${rep.passed ? "PASS" : "FAIL"}   (files: ${rep.outDir})`,
  ];
  return lines.join("\n");
}
