/**
 * What every power-loss run shares (test/powerloss/member_crash.ts, cluster_crash.ts): members it
 * started (so an abandoned run kills them), the seeded values the load writes, the checks made on
 * what a power cut left (the files, SQLite's integrity_check) and on a member that refused to start.
 */
import { copyFileSync, existsSync, mkdirSync, readdirSync, statSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { Member } from "../e2e/harness.js";
import { unmountAll } from "./lazyfs.js";

const require_ = createRequire(import.meta.url);

/** Members started here and not yet dead (stopAll kills them if a run is abandoned, e.g. on a timeout). */
const running = new Set<Member>();

/** Kills every member a run started and unmounts every lazyfs (afterAll: nothing leaks). */
export async function stopAll(): Promise<void> {
  for (const m of [...running]) await m.kill("SIGKILL");
  running.clear();
  await unmountAll();
}

export function startMember(spec: ConstructorParameters<typeof Member>[0], args: string[], env: Record<string, string> = {}): Member {
  const m = new Member(spec, args, env);
  running.add(m);
  m.start();
  return m;
}

/** Kills a member as a power cut does (with the machine, no chance to flush anything). */
export async function killMember(m: Member): Promise<void> {
  await m.kill("SIGKILL");
  running.delete(m);
}

/** The value the load writes for its n-th put: the seed and n in its head, so any mix-up shows. */
export function valueOf(seed: number, n: number, bytes: number): string {
  const head = `${seed}:${n}:`;
  return head + String.fromCharCode(97 + (n % 26)).repeat(Math.max(0, bytes - head.length));
}

export function listFiles(root: string, rel = ""): { path: string; bytes: number }[] {
  const out: { path: string; bytes: number }[] = [];
  if (!existsSync(join(root, rel))) return out;
  for (const name of readdirSync(join(root, rel)).sort()) {
    const p = join(rel, name);
    const st = statSync(join(root, p));
    if (st.isDirectory()) out.push(...listFiles(root, p));
    else out.push({ path: p, bytes: st.size });
  }
  return out;
}

/** integrity_check on a copy of the db (+ its -wal): opening the original would recover it in place. */
export function integrityOf(dbPath: string, scratchDir: string): string {
  if (!existsSync(dbPath)) return "no database file";
  mkdirSync(scratchDir, { recursive: true });
  const copy = join(scratchDir, "db");
  copyFileSync(dbPath, copy);
  if (existsSync(`${dbPath}-wal`)) copyFileSync(`${dbPath}-wal`, `${copy}-wal`);
  const Database = require_("better-sqlite3") as typeof import("better-sqlite3");
  try {
    const db = new Database(copy);
    try {
      return String(db.pragma("integrity_check", { simple: true }));
    } finally {
      db.close();
    }
  } catch (e) {
    return `cannot open: ${(e as Error).message}`;
  }
}

/** Resolves true once `needle` has appeared `occurrence` times in the member's log (false on timeout or exit). */
export function waitForLine(member: Member, needle: string, occurrence: number, timeoutMs: number): Promise<boolean> {
  return new Promise((res) => {
    const deadline = Date.now() + timeoutMs;
    const poll = () => {
      let count = 0;
      for (let at = member.log.indexOf(needle); at >= 0; at = member.log.indexOf(needle, at + 1)) count++;
      if (count >= occurrence) return res(true);
      if (Date.now() > deadline || !member.running) return res(false);
      setTimeout(poll, 2);
    };
    poll();
  });
}

/**
 * The refusal is the member's fatal line (earlier lines, e.g. a repaired torn tail, do not count);
 * the contract for refusing to start is a message that names a file and an offset.
 */
export function refusalLine(refusal: string): string {
  return refusal.split("\n").filter((l) => l.includes('"level":"fatal"')).pop() ?? refusal.split("\n").slice(-3).join("\n");
}

export function namesFileAndOffset(line: string): boolean {
  return /\/[^\s"']+/.test(line) && /offset/i.test(line);
}
