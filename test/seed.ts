/**
 * The seed of a randomized test. SEED= replays any seed. Under CI (`CI` set) each test takes a
 * fixed seed of its own (a hash of its name), so a red CI run turns red again when CI is rerun
 * and replays locally with the printed command; local runs draw a fresh seed to explore. Every
 * seed is printed with its replay command. (The fuzz suites have their own CI seed and time
 * budget: test/fuzz/fuzz_config.ts; the Raft simulator runs fixed seed ranges: test/raft/sim.)
 * It does not import vitest: child processes of the tests (the WAL crash child) load it too.
 */
import { relative, resolve } from "node:path";

const ROOT = resolve(import.meta.dirname, "..");

/** FNV-1a of the name: a stable 31-bit seed per test. */
export function fixedSeed(name: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < name.length; i++) h = Math.imul(h ^ name.charCodeAt(i), 0x01000193) >>> 0;
  return h & 0x7fffffff;
}

/** Where the seed comes from: SEED=, CI's fixed seed, or a fresh one. Pure (for its test). */
export function chooseSeed(name: string, env: Readonly<Record<string, string | undefined>>, fresh: () => number): { seed: number; source: "SEED" | "CI" | "fresh" } {
  const given = env.SEED;
  if (given !== undefined && given !== "") {
    const seed = Number(given);
    if (!Number.isInteger(seed)) throw new Error(`SEED must be an integer, got ${given}`);
    return { seed, source: "SEED" };
  }
  if (env.CI !== undefined && env.CI !== "" && env.CI !== "false") return { seed: fixedSeed(name), source: "CI" };
  return { seed: fresh(), source: "fresh" };
}

/** The seed for `name` (see the module comment), printed with the command that replays it. */
export function testSeed(name: string): number {
  const { seed, source } = chooseSeed(name, process.env, () => Math.floor(Math.random() * 2 ** 31));
  const file = callerTestFile();
  console.log(`[${name}] seed=${seed} (${source}; replay: SEED=${seed} npx vitest run ${file})`);
  return seed;
}

/** The *.test.ts file on the call stack (the replay command names it), or "" outside a test. */
function callerTestFile(): string {
  const m = /(\/[^\s():]+\.test\.ts)/.exec(new Error().stack ?? "");
  return m === null ? "" : relative(ROOT, m[1] as string);
}
