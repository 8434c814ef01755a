/**
 * The cost model of docs/multicore.md: from a bench:compare results file (CPU per put per member
 * and per thread, from /proc) and, optionally, a profile.ts output directory (which share of the
 * leader's main thread is client-port work), the main-thread µs per put today, after the client
 * port moves to front-end processes, the hand-off's cost, and the resulting ceiling in puts/s on
 * 2, 4, 8 and 16 cores; with --apply-share, also after the apply thread (mvcc and the backend on
 * a worker thread of the core process) takes that share of the core's main thread.
 *
 *   npx tsx bench/cost_model.ts bench/results/<stamp>.json [--row=put-100x1000-leader]
 *        [--profile=DIR] [--client-share=0.xx] [--handoff-us=N] [--handoff-front-us=N] [--cores=2,4,8,16]
 *        [--apply-share=0.xx --apply-handoff-us=N --apply-worker-extra-us=N]   (bench/apply_thread.ts measures the last two)
 *
 * Take both inputs from a quiet machine: the µs come from the results file, the share from the
 * profile (shares hold under load, absolute µs do not).
 */
import { readFileSync, readdirSync } from "node:fs";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import type { MemberCpu } from "./compare/proc-cpu.js";
import type { RunRecord } from "./compare/summary.js";
import { median } from "./compare/summary.js";

/** CPU µs per put of one target's row, medians over its rounds. */
export interface RowCpu {
  rounds: number;
  /** Leader process, all threads. */
  leaderUs: number;
  /** Leader main thread (a Node.js member's event loop). */
  leaderMainUs: number;
  /** Busier follower's process and main thread. */
  followerUs: number;
  followerMainUs: number;
}

export function rowCpu(runs: readonly RunRecord[], row: string, target: "etcd" | "etcetera"): RowCpu | undefined {
  const ok = runs.filter((r) => r.ok && r.row === row && r.target === target && r.cpu !== undefined && r.cpu.some((m) => m.role === "leader"));
  if (ok.length === 0) return undefined;
  const main = (m: MemberCpu | undefined) => m?.threads.find((t) => t.main)?.usPerRequest ?? 0;
  const leaders = ok.map((r) => (r.cpu as MemberCpu[]).find((m) => m.role === "leader"));
  const busierFollower = (r: RunRecord) => (r.cpu as MemberCpu[]).filter((m) => m.role === "follower").sort((a, b) => b.usPerRequest - a.usPerRequest)[0];
  return {
    rounds: ok.length,
    leaderUs: median(leaders.map((l) => l?.usPerRequest ?? NaN)),
    leaderMainUs: median(leaders.map(main)),
    followerUs: median(ok.map((r) => busierFollower(r)?.usPerRequest ?? 0)),
    followerMainUs: median(ok.map((r) => main(busierFollower(r)))),
  };
}

export interface ModelInput {
  /** Leader main-thread µs per put today. */
  mainUs: number;
  /** Leader process µs per put (other threads: libuv pool, V8's GC and compiler helpers). */
  processUs: number;
  /** Busier follower's main thread µs per put (followers' core work is not moved). */
  followerMainUs: number;
  /** Share of the leader main thread's busy time that is client-port work (HTTP/2, TLS, gRPC, protobuf of requests). */
  clientShare: number;
  /** Main-thread µs per put to take a request from a front end and give the response back (batched). */
  handoffCoreUs: number;
  /** Front-end µs per put for its side of the hand-off (encode the request, decode the response). */
  handoffFrontUs: number;
  /** The apply thread, if modelled: see ApplyThreadInput. */
  apply?: ApplyThreadInput;
}

/**
 * The apply thread: the MVCC store and the backend on a worker thread of the core process, fed the
 * committed entries one message per batch and answering with their revisions (docs/multicore.md).
 */
export interface ApplyThreadInput {
  /** Share of the core's main thread (with front ends) that the apply takes: mvcc, backend, apply dispatch. */
  share: number;
  /** Main-thread µs per put the hand-off to the worker costs (copy into the batch, post, resolve from the answer). */
  handoffUs: number;
  /** Worker µs per put beyond the apply itself (its side of the hand-off). */
  workerExtraUs: number;
}

export interface Ceiling {
  cores: number;
  frontEnds: number;
  /** Puts/s the member's core thread allows. */
  coreLimit: number;
  /** Puts/s the front-end processes allow on the cores left to them. */
  frontLimit: number;
  /** Puts/s a follower's main thread allows (it applies every put). */
  followerLimit: number;
  putsPerSec: number;
  bound: "core" | "front ends" | "follower" | "apply thread";
}

export interface ModelOutput {
  coreUsToday: number;
  ceilingToday: number;
  coreUsAfter: number;
  frontUsPerPut: number;
  /** µs per put on the core process's threads other than main. */
  helperUs: number;
  ceilings: Ceiling[];
  /** With the apply thread (when modelled). */
  applied?: {
    coreUs: number;
    applyThreadUs: number;
    followerMainUs: number;
    ceilings: (Ceiling & { applyLimit: number })[];
  };
}

/**
 * One member per host with `cores` cores: the core process runs raft, WAL and apply on its main
 * thread plus its helper threads; the other cores run front ends. Today the main thread does all
 * of it, so the host's core count does not matter: 1e6 / mainUs.
 */
export function costModel(m: ModelInput, coresList: readonly number[]): ModelOutput {
  if (!(m.clientShare >= 0 && m.clientShare < 1)) throw new Error(`client share must be in [0, 1), got ${m.clientShare}`);
  const clientUs = m.mainUs * m.clientShare;
  const coreUsAfter = m.mainUs - clientUs + m.handoffCoreUs;
  // Helper threads (V8's GC and compiler helpers, the libuv pool) follow the work they serve: the
  // client port's share of them moves with it.
  const helperAll = Math.max(0, m.processUs - m.mainUs);
  const helperUs = helperAll * (1 - m.clientShare);
  // A front end does the client-port work the main thread does today, its helpers' share, and the other half of the hand-off.
  const frontUsPerPut = clientUs + helperAll * m.clientShare + m.handoffFrontUs;
  const followerLimit = m.followerMainUs > 0 ? 1e6 / m.followerMainUs : Number.POSITIVE_INFINITY;
  const ceilings = coresList.map((cores) => ceilingOn(cores, coreUsAfter, helperUs, frontUsPerPut, followerLimit));
  const out: ModelOutput = { coreUsToday: m.mainUs, ceilingToday: 1e6 / m.mainUs, coreUsAfter, frontUsPerPut, helperUs, ceilings };
  if (m.apply !== undefined) out.applied = withApplyThread(m, m.apply, coreUsAfter, helperUs, frontUsPerPut, coresList);
  return out;
}

/**
 * One host of `cores` cores: the core process takes one core for its main thread and, beside it,
 * `besideUs` per put of its other threads (helpers, the apply thread), counted in cores at the
 * core thread's rate; the front ends get what is left.
 */
function ceilingOn(cores: number, coreUs: number, besideUs: number, frontUsPerPut: number, followerLimit: number): Ceiling {
  const coreLimit = 1e6 / coreUs;
  const coresForFronts = Math.max(0, cores - 1 - besideUs / coreUs);
  const frontEnds = Math.max(1, Math.floor(cores - 1));
  const frontLimit = cores <= 1 ? 0 : (coresForFronts * 1e6) / frontUsPerPut;
  const putsPerSec = Math.min(coreLimit, frontLimit, followerLimit);
  const bound = putsPerSec === coreLimit ? "core" : putsPerSec === frontLimit ? "front ends" : "follower";
  return { cores, frontEnds, coreLimit, frontLimit, followerLimit, putsPerSec, bound };
}

/**
 * The apply leaves the core's main thread (and a follower's: it applies every put too) for a
 * worker, which also pays its side of the hand-off; the main threads pay theirs.
 */
function withApplyThread(m: ModelInput, a: ApplyThreadInput, coreUsAfter: number, helperUs: number, frontUsPerPut: number, coresList: readonly number[]): NonNullable<ModelOutput["applied"]> {
  if (!(a.share >= 0 && a.share < 1)) throw new Error(`apply share must be in [0, 1), got ${a.share}`);
  const applyUs = coreUsAfter * a.share;
  const coreUs = coreUsAfter - applyUs + a.handoffUs;
  const applyThreadUs = applyUs + a.workerExtraUs;
  const followerMainUs = Math.max(0, m.followerMainUs - applyUs + a.handoffUs);
  const followerLimit = followerMainUs > 0 ? 1e6 / followerMainUs : Number.POSITIVE_INFINITY;
  const applyLimit = 1e6 / applyThreadUs;
  const ceilings = coresList.map((cores) => {
    const c = ceilingOn(cores, coreUs, helperUs + applyThreadUs, frontUsPerPut, followerLimit);
    if (applyLimit < c.putsPerSec) return { ...c, applyLimit, putsPerSec: applyLimit, bound: "apply thread" as const };
    return { ...c, applyLimit };
  });
  return { coreUs, applyThreadUs, followerMainUs, ceilings };
}

// ------------------------------------------------------------------ profile shares

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string };
  children?: number[];
}
interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  samples: number[];
  timeDeltas: number[];
}

/** Where a project frame belongs: the client port (moves to front ends) or the core (stays). */
export function frameSide(url: string): "client" | "core" | undefined {
  const m = /\/dist\/(.+)\.js$/.exec(url);
  if (m === null) return undefined;
  const path = m[1] as string;
  if (path.startsWith("pb/")) return undefined; // protobuf: whoever called it
  if (/^(grpc|gateway|auth)\//.test(path) || path.startsWith("server/api/") || path === "server/grpc_metrics" || path === "server/v3_api") return "client";
  return "core";
}

/**
 * Shares of a profile's busy main-thread time within [fromUs, toUs]: each sample goes to the
 * side of its nearest project frame (node:http2 internals with none, to the client port);
 * garbage collection and V8's "(program)" are split in proportion to the rest.
 */
export function clientShareOfProfile(p: CpuProfile, fromUs: number, toUs: number): { client: number; core: number; unattributed: number; gcAndProgram: number } {
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const sums = { client: 0, core: 0, unattributed: 0, gcAndProgram: 0 };
  let t = p.startTime;
  for (let i = 0; i < p.samples.length; i++) {
    t += p.timeDeltas[i] ?? 0;
    if (t < fromUs || t > toUs) continue;
    const us = p.timeDeltas[i + 1] ?? 0;
    const leaf = byId.get(p.samples[i] as number) as ProfileNode;
    const fn = leaf.callFrame.functionName;
    if (fn === "(idle)") continue;
    if (fn === "(garbage collector)" || fn === "(program)") {
      sums.gcAndProgram += us;
      continue;
    }
    let side: "client" | "core" | undefined;
    for (let id: number | undefined = leaf.id; id !== undefined && side === undefined; id = parent.get(id)) side = frameSide((byId.get(id) as ProfileNode).callFrame.url);
    if (side === undefined && /node:internal\/http2/.test(leaf.callFrame.url)) side = "client";
    if (side === undefined) sums.unattributed += us;
    else sums[side] += us;
  }
  return sums;
}

function leaderProfileShare(dir: string): number {
  const w = JSON.parse(readFileSync(join(dir, "window.json"), "utf8")) as { fromUs: number; toUs: number };
  const f = readdirSync(dir).find((x) => x.endsWith("-leader.cpuprofile"));
  if (f === undefined) throw new Error(`no *-leader.cpuprofile in ${dir} (bench/compare/profile.ts writes one)`);
  const s = clientShareOfProfile(JSON.parse(readFileSync(join(dir, f), "utf8")) as CpuProfile, w.fromUs, w.toUs);
  // GC and (program) split in proportion; unattributed node internals (timers, microtasks, sockets
  // without a project frame) counted on the core's side: the conservative choice.
  return s.client / Math.max(1, s.client + s.core + s.unattributed);
}

// ------------------------------------------------------------------ CLI

/**
 * Hand-off costs when not measured: a batched record over a Unix socket costs about what a
 * follower's inbound peer path costs per entry (read, frame, decode of a compact record), taken
 * here as 2 µs on the core and 2 µs on the front end (docs/multicore.md says where the figures
 * come from and how to replace them).
 */
const DEFAULT_HANDOFF_US = 2;

function main(): void {
  const argv = process.argv.slice(2);
  const file = argv.find((a) => !a.startsWith("--"));
  if (file === undefined) throw new Error("usage: cost_model.ts <bench:compare results .json> [--row=ID] [--profile=DIR] [--client-share=X] [--handoff-us=N] [--handoff-front-us=N] [--cores=2,4,8,16]");
  const opt = (k: string) => argv.find((a) => a.startsWith(`--${k}=`))?.slice(k.length + 3);
  const row = opt("row") ?? "put-100x1000-leader";
  const runs = (JSON.parse(readFileSync(file, "utf8")) as { runs: RunRecord[] }).runs;
  const et = rowCpu(runs, row, "etcetera");
  const ed = rowCpu(runs, row, "etcd");
  if (et === undefined) throw new Error(`${file} has no etcetera run of ${row} with CPU figures (bench:compare of issue 18 or later writes them)`);
  const profileDir = opt("profile");
  const shareOpt = opt("client-share");
  const clientShare = shareOpt !== undefined ? Number(shareOpt) : profileDir !== undefined ? leaderProfileShare(profileDir) : NaN;
  if (!Number.isFinite(clientShare)) throw new Error("give --profile=DIR (bench/compare/profile.ts output) or --client-share=X");
  const handoff = Number(opt("handoff-us") ?? DEFAULT_HANDOFF_US);
  // The front end's side may differ from the core's (measured: docs/multicore.md); without it, the same.
  const handoffFront = Number(opt("handoff-front-us") ?? handoff);
  const cores = (opt("cores") ?? "2,4,8,16").split(",").map(Number);
  const applyShare = opt("apply-share");
  const apply =
    applyShare === undefined
      ? undefined
      : { share: Number(applyShare), handoffUs: Number(opt("apply-handoff-us") ?? NaN), workerExtraUs: Number(opt("apply-worker-extra-us") ?? NaN) };
  if (apply !== undefined && !(Number.isFinite(apply.handoffUs) && Number.isFinite(apply.workerExtraUs))) {
    throw new Error("--apply-share needs --apply-handoff-us and --apply-worker-extra-us (bench/apply_thread.ts measures them)");
  }
  const out = costModel({ mainUs: et.leaderMainUs, processUs: et.leaderUs, followerMainUs: et.followerMainUs, clientShare, handoffCoreUs: handoff, handoffFrontUs: handoffFront, apply }, cores);
  const f0 = (v: number) => (Number.isFinite(v) ? Math.round(v).toLocaleString("en-US") : "∞");
  const f1 = (v: number) => v.toFixed(1);
  const lines = [
    `### Cost model (${row}, ${file}, ${et.rounds} round(s))`,
    "",
    `- etcetera leader: ${f1(et.leaderUs)} µs per put in the process, ${f1(et.leaderMainUs)} µs on its main thread; busier follower ${f1(et.followerUs)} µs (main thread ${f1(et.followerMainUs)} µs)` +
      (ed !== undefined ? `; etcd leader ${f1(ed.leaderUs)} µs per put over all its threads` : ""),
    `- client-port share of the leader's main thread: ${(clientShare * 100).toFixed(0)}%${profileDir !== undefined && shareOpt === undefined ? ` (profile ${profileDir})` : ""}; hand-off ${handoffFront === handoff ? `${f1(handoff)} µs per put on each side` : `${f1(handoff)} µs per put on the core, ${f1(handoffFront)} on a front end`}`,
    `- main-thread µs per put: today ${f1(out.coreUsToday)} (ceiling ${f0(out.ceilingToday)} puts/s on any number of cores), after ${f1(out.coreUsAfter)}; a front end spends ${f1(out.frontUsPerPut)} µs per put; helper threads ${f1(out.helperUs)} µs`,
    "",
    "| cores | front ends | core thread limit | front-end limit | follower limit | ceiling puts/s | bound by |",
    "|---:|---:|---:|---:|---:|---:|---|",
    ...out.ceilings.map((c) => `| ${c.cores} | ${c.frontEnds} | ${f0(c.coreLimit)} | ${f0(c.frontLimit)} | ${f0(c.followerLimit)} | ${f0(c.putsPerSec)} | ${c.bound} |`),
    "",
  ];
  const a = out.applied;
  if (a !== undefined && apply !== undefined) {
    lines.push(
      `With the apply thread (${(apply.share * 100).toFixed(0)}% of the core's main thread moved; hand-off ${f1(apply.handoffUs)} µs per put on the main thread, ${f1(apply.workerExtraUs)} more on the worker): the core's main thread ${f1(a.coreUs)} µs per put, the apply thread ${f1(a.applyThreadUs)}, a follower's main thread ${f1(a.followerMainUs)}`,
      "",
      "| cores | front ends | core thread limit | apply thread limit | front-end limit | follower limit | ceiling puts/s | bound by |",
      "|---:|---:|---:|---:|---:|---:|---:|---|",
      ...a.ceilings.map((c) => `| ${c.cores} | ${c.frontEnds} | ${f0(c.coreLimit)} | ${f0(c.applyLimit)} | ${f0(c.frontLimit)} | ${f0(c.followerLimit)} | ${f0(c.putsPerSec)} | ${c.bound} |`),
      "",
    );
  }
  process.stdout.write(lines.join("\n"));
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) main();
