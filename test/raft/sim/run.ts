import { expect, it } from "vitest";
import { FAULT_STEPS, LIVENESS_STEPS, SimFailure, replayCommand, runSeed } from "./sim.js";

function runOne(seed: number, nodes: 3 | 5, withTrace: boolean): void {
  const trace: string[] = [];
  try {
    const stats = runSeed({
      seed,
      nodes,
      faultSteps: FAULT_STEPS,
      livenessSteps: LIVENESS_STEPS,
      trace: withTrace ? (l) => trace.push(l) : undefined,
    });
    // Sanity: the seed really exercised the cluster.
    expect(stats.applied).toBeGreaterThan(0);
  } catch (e) {
    const tail = withTrace ? `\n--- trace (last 150 lines) ---\n${trace.slice(-150).join("\n")}` : "";
    const what = e instanceof SimFailure ? e.message : `seed ${seed}: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`;
    throw new Error(`${what}\nreplay: ${replayCommand(seed, nodes)}${tail}`);
  }
}

/**
 * Register simulator tests for `count` seeds of an n-node cluster. SEED=<n> (with NODES=3|5)
 * replays one seed with a trace; SEEDS=<count> and SEED_START=<first> change the range.
 */
export function registerSeeds(nodes: 3 | 5, defaultCount: number, defaultStart: number): void {
  const only = process.env.SEED;
  if (only !== undefined) {
    const wanted = Number(process.env.NODES ?? nodes);
    if (wanted === nodes) it(`replays seed ${only} (${nodes} nodes)`, () => runOne(Number(only), nodes, true));
    else it(`seed ${only} replays with NODES=${wanted} elsewhere`, () => expect(wanted).not.toBe(nodes));
    return;
  }
  const count = Number(process.env.SEEDS ?? defaultCount);
  const start = Number(process.env.SEED_START ?? defaultStart);
  const chunk = 25;
  for (let lo = start; lo < start + count; lo += chunk) {
    const hi = Math.min(lo + chunk, start + count);
    it(`${nodes} nodes, seeds ${lo}..${hi - 1}`, () => {
      for (let s = lo; s < hi; s++) runOne(s, nodes, false);
    });
  }
}
