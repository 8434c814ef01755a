/**
 * Crash harness shared by the CI crash test and bench/wal-crash-long.ts. One WAL directory is
 * reused across kills: spawn the child, SIGKILL it at a random moment, reopen a copy of the
 * directory and check that
 *   - every acknowledged entry is present with its term and intact data,
 *   - nothing was invented: the recovered log equals the acknowledged log with some prefix of the
 *     unacknowledged saves applied (the last of them possibly cut short by the kill),
 *   - the hard state is the last acknowledged one or one of the unacknowledged ones.
 * The next child then opens (and repairs) the real directory, so kills during repair are covered.
 */
import { spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { HardState } from "../../src/raft/types.js";
import { WAL } from "../../src/wal/wal.js";
import { isIntact, makeTmpDir, prng, removeDir } from "./helpers.js";

const CHILD = fileURLToPath(new URL("./crash-child.ts", import.meta.url));
const REPO = fileURLToPath(new URL("../../", import.meta.url));

/**
 * How to start the child. Transpiling TypeScript on every spawn (tsx) costs ~0.3 s of CPU per
 * kill on a loaded 2-core box, so the child is bundled once with esbuild (present as a dependency
 * of tsx and vitest) into node_modules/.cache, next to the packages it imports; if esbuild cannot
 * be loaded, every spawn falls back to `node --import tsx`.
 */
async function childCommand(): Promise<{ args: string[]; cleanup: () => void }> {
  const fallback = { args: ["--import", "tsx", CHILD], cleanup: () => {} };
  try {
    const esbuild = (await import("esbuild")) as { build: (o: Record<string, unknown>) => Promise<unknown> };
    const outdir = path.join(REPO, "node_modules", ".cache", "etcetera-wal-crash");
    const outfile = path.join(outdir, `child-${process.pid}-${Date.now()}.mjs`);
    await esbuild.build({ entryPoints: [CHILD], bundle: true, platform: "node", format: "esm", packages: "external", outfile, logLevel: "error" });
    return { args: [outfile], cleanup: () => fs.rmSync(outfile, { force: true }) };
  } catch {
    return fallback;
  }
}

interface TrySave {
  kind: "E";
  start: number;
  count: number;
  term: number;
  hs: HardState;
}
interface TryMarker {
  kind: "S";
  index: number;
  term: number;
}
type Try = TrySave | TryMarker;

export interface CrashRunOptions {
  kills: number;
  seed: number;
  segmentSizeBytes?: number;
  log?: (line: string) => void;
}

export interface CrashRunResult {
  kills: number;
  ackedSaves: number;
  tornRecoveries: number;
  /** Torn tails the child repaired when it reopened the WAL. */
  repairs: number;
  /** Kills that left a torn record at the tail (seen by the check right after the kill). */
  tornTails: number;
  lastIndex: number;
  snapshots: number;
}

interface ChildRun {
  ready: boolean;
  repairs: number;
  tries: Map<number, Try>;
  order: number[];
  acked: Set<number>;
  stderr: string;
}

/** When to kill: `ms` after start or after "ready"; with `onBig`, right after a big save is issued. */
interface KillPlan {
  afterStartMs?: number;
  afterReadyMs?: number;
  afterBigSaveMs?: number;
}

async function runChild(command: string[], dir: string, seed: number, snap: { index: number; term: number }, segmentSizeBytes: number, plan: KillPlan): Promise<ChildRun> {
  const child = spawn(process.execPath, [...command, dir, String(seed), String(snap.index), String(snap.term), String(segmentSizeBytes)], {
    cwd: REPO,
    stdio: ["ignore", "pipe", "pipe"],
  });
  const run: ChildRun = { ready: false, repairs: 0, tries: new Map(), order: [], acked: new Set(), stderr: "" };
  let buffered = "";
  let timer: NodeJS.Timeout | undefined;
  const arm = (ms: number | undefined): void => {
    if (ms === undefined) return;
    clearTimeout(timer);
    timer = setTimeout(() => child.kill("SIGKILL"), ms);
  };
  arm(plan.afterStartMs);
  child.stderr.on("data", (d: Buffer) => (run.stderr += d.toString()));
  child.stdout.on("data", (d: Buffer) => {
    buffered += d.toString();
    let nl: number;
    while ((nl = buffered.indexOf("\n")) >= 0) {
      const parts = buffered.slice(0, nl).split(" ");
      buffered = buffered.slice(nl + 1);
      if (parts[0] === "ready") {
        run.ready = true;
        arm(plan.afterReadyMs);
      } else if (parts[0] === "try") {
        const id = Number(parts[1]);
        const n = parts.slice(3).map(Number);
        const t: Try =
          parts[2] === "S"
            ? { kind: "S", index: n[0]!, term: n[1]! }
            : { kind: "E", start: n[0]!, count: n[1]!, term: n[2]!, hs: { term: n[3]!, vote: BigInt(n[4]!), commit: n[5]! } };
        run.tries.set(id, t);
        run.order.push(id);
        if (t.kind === "E" && t.count >= 64 && plan.afterBigSaveMs !== undefined) {
          arm(plan.afterBigSaveMs);
          plan.afterBigSaveMs = undefined;
        }
      } else if (parts[0] === "warn" && parts[1] === "repairing") {
        run.repairs++;
      } else if (parts[0] === "ack") {
        run.acked.add(Number(parts[1]));
      }
    }
  });
  // A safety net: a child that never becomes ready (or hangs) is killed and reported.
  const guard = setTimeout(() => child.kill("SIGKILL"), 20_000);
  const code = await new Promise<number | null>((resolve) => child.on("close", (c) => resolve(c)));
  clearTimeout(timer);
  clearTimeout(guard);
  if (code !== null) throw new Error(`crash child exited by itself (code ${code}): ${run.stderr}`);
  return run;
}

/** The log as index → term, from index 1 (index 0 unused). */
type TermLog = number[];

function applySave(log: TermLog, start: number, count: number, term: number): void {
  log.length = start;
  for (let i = start; i < start + count; i++) log[i] = term;
}

function sameSuffix(a: TermLog, b: TermLog, from: number): boolean {
  if (a.length !== b.length) return false;
  for (let i = from; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

export async function runCrashCycles(opts: CrashRunOptions): Promise<CrashRunResult> {
  const log = opts.log ?? (() => {});
  const segmentSizeBytes = opts.segmentSizeBytes ?? 16 * 1024;
  const rand = prng(opts.seed);
  const root = makeTmpDir("crash");
  const dir = path.join(root, "wal");
  const walOpts = { segmentSizeBytes, maxWals: 3 };
  const command = await childCommand();
  const result: CrashRunResult = { kills: 0, ackedSaves: 0, tornRecoveries: 0, repairs: 0, tornTails: 0, lastIndex: 0, snapshots: 0 };
  try {
    await (await WAL.create(dir, { memberId: 1n, clusterId: 1n }, walOpts)).close();
    let model: TermLog = [0];
    let hardState: HardState = { term: 0, vote: 0n, commit: 0 };
    let snap = { index: 0, term: 0 };
    for (let k = 0; k < opts.kills; k++) {
      const childSeed = Math.floor(rand() * 2 ** 31);
      // Mostly kill while saving; sometimes during start-up, open or repair; sometimes aimed at
      // a big write in flight (with a fallback kill in case no big save comes).
      const mode = rand();
      const early = mode < 0.2;
      const aimed = mode >= 0.8;
      const delayMs = early ? Math.floor(rand() * 300) : aimed ? Math.floor(rand() * 3) : 5 + Math.floor(rand() * 100);
      const plan: KillPlan = early ? { afterStartMs: delayMs } : aimed ? { afterBigSaveMs: delayMs, afterReadyMs: 400 } : { afterReadyMs: delayMs };
      const run = await runChild(command.args, dir, childSeed, snap, segmentSizeBytes, plan);
      result.kills++;
      result.repairs += run.repairs;

      // The acknowledged state: acks arrive in issue order, so the acked saves are a prefix.
      let firstPending = run.order.length;
      for (let i = 0; i < run.order.length; i++) {
        if (!run.acked.has(run.order[i]!)) {
          firstPending = i;
          break;
        }
      }
      for (let i = firstPending; i < run.order.length; i++) {
        if (run.acked.has(run.order[i]!)) throw new Error(`seed ${opts.seed} kill ${k}: save ${run.order[i]} acked before an earlier one`);
      }
      for (const id of run.order.slice(0, firstPending)) {
        const t = run.tries.get(id)!;
        if (t.kind === "E") {
          applySave(model, t.start, t.count, t.term);
          hardState = t.hs;
        } else {
          snap = { index: t.index, term: t.term };
          result.snapshots++;
        }
        result.ackedSaves++;
      }
      const pending = run.order.slice(firstPending).map((id) => run.tries.get(id)!);

      // Reopen a copy, so the real directory is repaired by the next child (kills during repair).
      const scratch = path.join(root, `check-${k}`);
      fs.cpSync(dir, scratch, { recursive: true });
      let tornAtKill = 0;
      const checkLogger = { info: () => {}, error: () => {}, warn: (_o: Record<string, unknown>, msg: string) => void (msg === "repairing torn WAL tail" && tornAtKill++) };
      const r = await WAL.open(scratch, snap, { ...walOpts, logger: checkLogger });
      result.tornTails += tornAtKill;
      await r.wal.close();
      removeDir(scratch);

      const recovered: TermLog = model.slice(0, snap.index + 1);
      for (const e of r.entries) {
        if (!isIntact(e)) throw new Error(`seed ${opts.seed} kill ${k}: entry ${e.index}/${e.term} is damaged`);
        recovered[e.index] = e.term;
      }
      if (recovered.length !== snap.index + 1 + r.entries.length) throw new Error(`seed ${opts.seed} kill ${k}: recovered log has holes`);
      // Candidates: the acked model with pending saves applied one by one, each possibly cut short.
      const from = snap.index + 1;
      const candidate = model.slice();
      let matched = sameSuffix(recovered, candidate, from);
      const hardStates: HardState[] = [hardState];
      for (const t of pending) {
        if (t.kind !== "E") continue;
        for (let n = 1; n <= t.count && !matched; n++) {
          const c = candidate.slice();
          applySave(c, t.start, n, t.term);
          matched = sameSuffix(recovered, c, from);
        }
        applySave(candidate, t.start, t.count, t.term);
        hardStates.push(t.hs);
      }
      if (!matched) {
        throw new Error(`seed ${opts.seed} kill ${k}: recovered log (last ${recovered.length - 1}) is neither the acknowledged log (last ${model.length - 1}) nor it plus a prefix of the ${pending.length} unacknowledged saves`);
      }
      if (!hardStates.some((h) => h.term === r.hardState.term && h.vote === r.hardState.vote && h.commit === r.hardState.commit)) {
        throw new Error(`seed ${opts.seed} kill ${k}: hard state ${JSON.stringify(r.hardState)} was never saved (last acked ${JSON.stringify(hardState)})`);
      }
      if (recovered.length !== model.length || !sameSuffix(recovered, model, from)) result.tornRecoveries++;
      model = recovered;
      hardState = r.hardState;
      result.lastIndex = model.length - 1;
      log(`kill ${k + 1}/${opts.kills}: ${early ? "early " : aimed ? "aimed " : ""}after ${delayMs} ms, ${run.acked.size} acks, ${pending.length} unacked, ${tornAtKill ? "torn tail, " : ""}last index ${result.lastIndex}, snapshot ${snap.index}`);
    }
    return result;
  } finally {
    command.cleanup();
    if (!process.env.KEEP_CRASH_DIR) removeDir(root);
    else log(`kept ${root}`);
  }
}
