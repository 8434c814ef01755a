/**
 * The long fuzz run (issue 7): the test/fuzz suites with a larger budget, one seed for all,
 * printed first so the run replays.
 *
 *   npx tsx scripts/fuzz.ts [--seconds 300] [--seed N] [--suites grpc_frames,rpc_fields,ports,load_shapes]
 *       [--include-known-bugs]
 *
 * FUZZ_SECONDS scales every suite's counts and time-bounded loops (CI uses 10); each suite prints
 * its figures (cases by outcome, deviations from etcd 3.4, RSS and live-set growth after forced GC).
 */
import { spawnSync } from "node:child_process";
import { resolve } from "node:path";

const ROOT = resolve(import.meta.dirname, "..");
const args = process.argv.slice(2);
function option(name: string, fallback: string): string {
  const i = args.indexOf(`--${name}`);
  return i >= 0 && args[i + 1] !== undefined ? args[i + 1]! : fallback;
}
const seconds = Number(option("seconds", "300"));
const seed = Number(option("seed", String(Math.floor(Math.random() * 2 ** 31))));
const suites = option("suites", "grpc_frames,rpc_fields,ports,load_shapes").split(",");
if (!(seconds > 0) || !Number.isInteger(seed)) throw new Error("--seconds must be > 0 and --seed an integer");
console.log(`[fuzz] long run: seed=${seed} seconds=${seconds} suites=${suites.join(",")}`);
const started = Date.now();
const result = spawnSync("npx", ["vitest", "run", ...suites.map((s) => `test/fuzz/${s}.test.ts`)], {
  cwd: ROOT,
  stdio: "inherit",
  env: {
    ...process.env,
    SEED: String(seed),
    FUZZ_SECONDS: String(seconds),
    ...(args.includes("--include-known-bugs") ? { FUZZ_INCLUDE_KNOWN_BUGS: "1" } : {}),
  },
});
console.log(`[fuzz] long run done in ${Math.round((Date.now() - started) / 1000)} s: exit ${result.status} (replay: npx tsx scripts/fuzz.ts --seconds ${seconds} --seed ${seed})`);
process.exit(result.status ?? 1);
