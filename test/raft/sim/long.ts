/**
 * The long simulator run: `npx tsx test/raft/sim/long.ts --seeds 20000 [--start 1] [--nodes 3|5|both]`.
 * Prints progress, every failing seed with its replay command, and a summary; exits 1 on failure.
 */
import { FAULT_STEPS, LIVENESS_STEPS, SimFailure, replayCommand, runSeed } from "./sim.js";

function arg(name: string, dflt: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && i + 1 < process.argv.length ? process.argv[i + 1] : dflt;
}

const seeds = Number(arg("seeds", "20000"));
const start = Number(arg("start", "1"));
const nodesArg = arg("nodes", "both");
const sizes: (3 | 5)[] = nodesArg === "both" ? [3, 5] : [Number(nodesArg) as 3 | 5];
const t0 = Date.now();
let failures = 0;
let run = 0;
const totals: Record<string, number> = {};
for (let s = start; s < start + seeds; s++) {
  const nodes = sizes[s % sizes.length];
  try {
    const stats = runSeed({ seed: s, nodes, faultSteps: FAULT_STEPS, livenessSteps: LIVENESS_STEPS });
    for (const [k, v] of Object.entries(stats)) totals[k] = (totals[k] ?? 0) + v;
  } catch (e) {
    failures++;
    console.log(`FAIL ${e instanceof SimFailure ? e.message : String(e)}\n  replay: ${replayCommand(s, nodes)}`);
  }
  run++;
  if (run % 1000 === 0) console.log(`${run}/${seeds} seeds, ${failures} failures, ${((Date.now() - t0) / 1000).toFixed(1)} s`);
}
console.log(`done: ${run} seeds (${start}..${start + seeds - 1}, nodes ${sizes.join("+")}), ${failures} failures, ${((Date.now() - t0) / 1000).toFixed(1)} s`);
console.log(totals);
process.exit(failures === 0 ? 0 : 1);
