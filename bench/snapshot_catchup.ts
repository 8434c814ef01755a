/**
 * Snapshot catch-up, side by side (issue 19): real etcd 3.4 (/usr/bin/etcd) and etcetera, the same
 * scenario and flags for both, one after the other:
 *
 *   3 members, --snapshot-count 2000; N MiB of 64 KiB values; one follower SIGKILLed; more small
 *   puts (enough to compact the leader's raft log past the follower); the follower restarted; a
 *   probe put every 0.2 s until the follower has caught up (it serves, serializably, the last
 *   small put, and its applied index reached the leader's index at the restart).
 *
 * Reported per target: catch-up time, leader changes during the catch-up (etcd_server_leader_changes_seen_total
 * on the surviving members), the slowest probe put, peak RSS of each member during the catch-up
 * (sampled VmRSS every 100 ms) next to its RSS before, and the snapshots the follower received
 * (etcd_network_snapshot_receive_success: whether the catch-up took one). Writes bench/results/snapshot-catchup-<date>.json and .md.
 *
 *   npm run bench:snapshot -- [--gib=1,2,4 | --mib=1024,...] [--small-puts=12000] [--only=etcd|etcetera] [--out=bench/results]
 *
 * By default the 1, 2 and 4 GiB scenarios, each against both targets (the 4 GiB one needs ~40 GiB
 * of free disk: three members, each with its database and an image in flight). The results file
 * is rewritten after every run, so a run stopped at 4 GiB keeps the smaller sizes' figures.
 * Test it small (--mib=20 --small-puts=3000); the figures worth reading come from a quiet machine.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { cpus, totalmem } from "node:os";
import { join, relative } from "node:path";
import { clients, unary } from "../test/e2e/grpc_client.js";
import { BenchCluster, type MemberProc, procStatusBytes, ROOT, SERVER_JS, type Target, TARGETS } from "./compare/cluster.js";

interface Options {
  /** The backend sizes to run, in MiB, each against every target. */
  mibs: number[];
  smallPuts: number;
  only: Target | undefined;
  outDir: string;
}

function parseOptions(argv: string[]): Options {
  const o: Options = { mibs: [1024, 2048, 4096], smallPuts: 12_000, only: undefined, outDir: join(ROOT, "bench/results") };
  const list = (v: string | undefined, unit: number): number[] => (v ?? "").split(",").map((x) => Number(x) * unit);
  for (const a of argv) {
    const [k, v] = a.replace(/^--/, "").split("=") as [string, string | undefined];
    if (k === "mib") o.mibs = list(v, 1);
    else if (k === "gib") o.mibs = list(v, 1024);
    else if (k === "small-puts") o.smallPuts = Number(v);
    else if (k === "only") o.only = v as Target;
    else if (k === "out") o.outDir = v ?? o.outDir;
    else throw new Error(`unknown option ${a}`);
  }
  if (o.mibs.length === 0 || !o.mibs.every((m) => m > 0) || !(o.smallPuts > 0)) throw new Error("--mib/--gib sizes and --small-puts must be positive");
  return o;
}

const VALUE_BYTES = 64 * 1024;
const PROBE_INTERVAL_MS = 200;
const LOAD_CONCURRENCY = 8;
const SMALL_CONCURRENCY = 16;
const CATCH_UP_LIMIT_MS = 15 * 60_000;

interface Status {
  leader: string;
  raftIndex: number;
  raftAppliedIndex: number;
  memberId: string;
}

async function status(endpoint: string): Promise<Status> {
  const g = clients(endpoint);
  try {
    const r = await unary<{ leader: string; raftIndex: string; raftAppliedIndex: string; header: { member_id: string } }>(g.maintenance, "Status", {}, { deadlineMs: 2_000 });
    return { leader: r.leader, raftIndex: Number(r.raftIndex), raftAppliedIndex: Number(r.raftAppliedIndex), memberId: r.header.member_id };
  } finally {
    g.close();
  }
}

async function metric(endpoint: string, name: string): Promise<number> {
  const text = await (await fetch(`http://${endpoint}/metrics`, { signal: AbortSignal.timeout(5_000) })).text();
  let sum = 0;
  for (const m of text.matchAll(new RegExp(`^${name}(?:\\{[^}]*\\})? ([0-9.e+]+)$`, "gm"))) sum += Number(m[1]);
  return sum;
}

/** Ready: it serves Status and knows a leader. */
async function hasLeader(endpoint: string): Promise<boolean> {
  return (await status(endpoint)).leader !== "0";
}

function rss(m: MemberProc): number {
  const pid = m.proc?.pid;
  return pid === undefined ? 0 : (procStatusBytes(pid, "VmRSS") ?? 0);
}

/** Runs `count` puts through `put` with `concurrency` in flight; each put retried until it succeeds. */
async function putMany(count: number, concurrency: number, put: (i: number) => Promise<unknown>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      for (let i = next++; i < count; i = next++) {
        for (let attempt = 0; ; attempt++) {
          try {
            await put(i);
            break;
          } catch (e) {
            if (attempt > 50) throw e;
            await new Promise((r) => setTimeout(r, 100));
          }
        }
      }
    }),
  );
}

interface TargetResult {
  target: Target;
  loadedMiB: number;
  smallPuts: number;
  catchUpSeconds: number | null;
  leaderChanges: number;
  slowestProbeMs: number;
  probes: number;
  failedProbes: number;
  rssBeforeMiB: Record<string, number>;
  peakRssMiB: Record<string, number>;
  /** etcd_network_snapshot_receive_success on the follower: whether the catch-up took a snapshot. */
  followerSnapshotsReceived: number | null;
  leader: string;
  follower: string;
}

async function runTarget(target: Target, o: Options & { mib: number }): Promise<TargetResult> {
  const cluster = await BenchCluster.create({ target, size: 3, extraArgs: ["--snapshot-count=2000", `--quota-backend-bytes=${8 * 1024 ** 3}`] });
  const procs = cluster.members;
  const log = (m: string): void => console.log(`[${target}] ${m}`);
  try {
    await cluster.start(60_000, hasLeader);
    const leaderId = (await status(procs[0]!.endpoint)).leader;
    const ids = await Promise.all(procs.map(async (p) => (await status(p.endpoint)).memberId));
    const leader = procs[ids.indexOf(leaderId)]!;
    const fi = procs.findIndex((p) => p !== leader);
    const follower = procs[fi]!;
    const g = clients(leader.endpoint);

    // 1. the large values
    const bigCount = Math.ceil((o.mib * 1024 * 1024) / VALUE_BYTES);
    const value = Buffer.alloc(VALUE_BYTES, 0x61);
    const loadStart = performance.now();
    await putMany(bigCount, LOAD_CONCURRENCY, (i) => unary(g.kv, "Put", { key: Buffer.from(`big/${i}`), value }, { deadlineMs: 30_000 }));
    log(`loaded ${bigCount} values of 64 KiB (${o.mib} MiB) in ${((performance.now() - loadStart) / 1000).toFixed(1)} s`);

    // 2. the follower goes, more small puts
    await cluster.killMember(fi);
    const small = Buffer.alloc(100, 0x62);
    await putMany(o.smallPuts, SMALL_CONCURRENCY, (i) => unary(g.kv, "Put", { key: Buffer.from(`small/${i % 1000}`), value: small }, { deadlineMs: 30_000 }));
    const lastKey = Buffer.from("catchup/last");
    const lastValue = Buffer.from(`v${Date.now()}`);
    await unary(g.kv, "Put", { key: lastKey, value: lastValue });
    const target0 = await status(leader.endpoint);
    log(`follower ${follower.name} killed; ${o.smallPuts} small puts; leader index ${target0.raftIndex}`);

    const survivors = procs.filter((p) => p !== follower);
    const leaderChangesBefore = await Promise.all(survivors.map((p) => metric(p.endpoint, "etcd_server_leader_changes_seen_total")));
    const rssBefore: Record<string, number> = {};
    for (const p of survivors) rssBefore[p.name] = rss(p);
    const peak: Record<string, number> = {};
    for (const p of procs) peak[p.name] = rss(p);

    // 3. restart, probe, sample
    let probing = true;
    let slowest = 0;
    let probes = 0;
    let failed = 0;
    const probeLoop = (async () => {
      const pg = clients(leader.endpoint);
      try {
        for (let i = 0; probing; i++) {
          const started = performance.now();
          try {
            await unary(pg.kv, "Put", { key: Buffer.from("probe"), value: Buffer.from(String(i)) }, { deadlineMs: 30_000 });
          } catch {
            failed++;
          }
          const took = performance.now() - started;
          slowest = Math.max(slowest, took);
          probes++;
          await new Promise((r) => setTimeout(r, Math.max(0, PROBE_INTERVAL_MS - took)));
        }
      } finally {
        pg.close();
      }
    })();
    const sampler = setInterval(() => {
      for (const p of procs) peak[p.name] = Math.max(peak[p.name] ?? 0, rss(p));
    }, 100);
    const restartedAt = performance.now();
    cluster.startMember(fi);
    let caughtUp: number | null = null;
    const fg = clients(follower.endpoint);
    try {
      while (performance.now() - restartedAt < CATCH_UP_LIMIT_MS) {
        if (follower.proc === undefined) throw new Error(`${follower.name} exited during the catch-up:\n${follower.log.slice(-3000)}`);
        try {
          const s = await status(follower.endpoint);
          const r = await unary<{ kvs: { value: Buffer }[] }>(fg.kv, "Range", { key: lastKey, serializable: true }, { deadlineMs: 2_000 });
          if (s.raftAppliedIndex >= target0.raftIndex && r.kvs.length === 1 && Buffer.from(r.kvs[0]!.value).equals(lastValue)) {
            caughtUp = (performance.now() - restartedAt) / 1000;
            break;
          }
        } catch {
          // starting, or not serving yet
        }
        await new Promise((r) => setTimeout(r, 50));
      }
    } finally {
      fg.close();
      probing = false;
      clearInterval(sampler);
      await probeLoop;
    }
    const leaderChangesAfter = await Promise.all(survivors.map((p) => metric(p.endpoint, "etcd_server_leader_changes_seen_total")));
    const leaderChanges = Math.max(...leaderChangesAfter.map((a, i) => a - leaderChangesBefore[i]!));
    const received = await metric(follower.endpoint, "etcd_network_snapshot_receive_success").catch(() => null);
    g.close();
    log(`caught up after ${caughtUp === null ? "(not within the limit)" : `${caughtUp.toFixed(1)} s`}; ${leaderChanges} leader changes; slowest probe ${slowest.toFixed(0)} ms`);
    const mib = (b: number): number => Math.round(b / 2 ** 20);
    return {
      target,
      loadedMiB: o.mib,
      smallPuts: o.smallPuts,
      catchUpSeconds: caughtUp === null ? null : Number(caughtUp.toFixed(2)),
      leaderChanges,
      slowestProbeMs: Math.round(slowest),
      probes,
      failedProbes: failed,
      rssBeforeMiB: Object.fromEntries(Object.entries(rssBefore).map(([k, v]) => [k, mib(v)])),
      peakRssMiB: Object.fromEntries(Object.entries(peak).map(([k, v]) => [k, mib(v)])),
      followerSnapshotsReceived: received,
      leader: leader.name,
      follower: follower.name,
    };
  } catch (e) {
    console.error(cluster.logs());
    throw e;
  } finally {
    await cluster.destroy();
  }
}

function markdown(o: Options & { mib: number }, results: TargetResult[]): string {
  const row = (label: string, f: (r: TargetResult) => string): string => `| ${label} | ${results.map(f).join(" | ")} |`;
  const rss = (r: TargetResult): string =>
    Object.keys(r.peakRssMiB)
      .sort()
      .map((n) => `${n}${n === r.leader ? " (leader)" : n === r.follower ? " (follower)" : ""} ${r.peakRssMiB[n]} MiB${r.rssBeforeMiB[n] === undefined ? "" : ` (before ${r.rssBeforeMiB[n]})`}`)
      .join("<br>");
  return [
    `# Snapshot catch-up: ${o.mib} MiB of 64 KiB values, ${o.smallPuts} small puts while a follower is down`,
    "",
    `3 members, --snapshot-count 2000, a probe put every ${PROBE_INTERVAL_MS} ms during the catch-up. ${cpus().length} CPUs, ${Math.round(totalmem() / 2 ** 30)} GiB.`,
    "",
    `| | ${results.map((r) => r.target).join(" | ")} |`,
    `|---|${results.map(() => "---").join("|")}|`,
    row("follower caught up after", (r) => (r.catchUpSeconds === null ? "not within 15 min" : `${r.catchUpSeconds} s`)),
    row("leader changes during the catch-up", (r) => String(r.leaderChanges)),
    row("slowest probe put during the catch-up", (r) => `${r.slowestProbeMs} ms (${r.probes} probes, ${r.failedProbes} failed)`),
    row("peak RSS during the catch-up", rss),
    row("snapshots the follower received", (r) => (r.followerSnapshotsReceived === null ? "?" : String(r.followerSnapshotsReceived))),
    "",
  ].join("\n");
}

async function main(): Promise<void> {
  const o = parseOptions(process.argv.slice(2));
  if (!existsSync(SERVER_JS)) throw new Error(`${SERVER_JS} missing: run 'npm run build' first`);
  mkdirSync(o.outDir, { recursive: true });
  const stamp = new Date().toISOString().replace(/:/g, "-").replace(/\.\d+Z$/, "Z");
  const base = join(o.outDir, `snapshot-catchup-${stamp}`);
  const bySize: { mib: number; results: TargetResult[] }[] = [];
  for (const mib of o.mibs) {
    const size = { mib, results: [] as TargetResult[] };
    bySize.push(size);
    for (const t of TARGETS) {
      if (o.only !== undefined && o.only !== t) continue;
      size.results.push(await runTarget(t, { ...o, mib }));
      // Rewritten after every run: a stopped run keeps what it measured.
      writeFileSync(`${base}.json`, JSON.stringify({ options: o, machine: { cpus: cpus().length, memGiB: Math.round(totalmem() / 2 ** 30) }, sizes: bySize }, null, 2));
      writeFileSync(`${base}.md`, bySize.map((x) => markdown({ ...o, mib: x.mib }, x.results)).join("\n"));
    }
  }
  console.log(`\n${readFileSync(`${base}.md`, "utf8")}\nwrote ${relative(ROOT, base)}.json and .md`);
}

main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});
