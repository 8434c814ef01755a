/**
 * Long WAL crash run: the CI crash test's harness with many more SIGKILLs.
 *
 *   npx tsx bench/wal-crash-long.ts [--kills 1000] [--seed N] [--segment-kb 16]
 *
 * Prints the seed first (replay a failure with --seed), a line per kill, and a summary.
 */
import { runCrashCycles } from "../test/wal/crash-harness.js";

function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && process.argv[i + 1] !== undefined ? process.argv[i + 1]! : fallback;
}

const kills = Number(arg("kills", "1000"));
const seed = Number(arg("seed", String(Date.now() % 1_000_000)));
const segmentSizeBytes = Number(arg("segment-kb", "16")) * 1024;

async function main(): Promise<void> {
  console.log(`wal crash run: ${kills} kills, seed ${seed} (replay with --seed ${seed}), segments ${segmentSizeBytes} bytes`);
  const started = performance.now();
  const r = await runCrashCycles({ kills, seed, segmentSizeBytes, log: (l) => console.log(l) });
  const s = ((performance.now() - started) / 1000).toFixed(1);
  console.log(
    `survived ${r.kills} kills in ${s} s: ${r.ackedSaves} acknowledged saves all intact, ${r.tornRecoveries} recoveries kept unacknowledged writes, ${r.tornTails} kills left a torn tail, ${r.repairs} torn tails repaired by the restarted child, last index ${r.lastIndex}, ${r.snapshots} snapshot markers`,
  );
}

main().catch((err: unknown) => {
  console.error(`FAILED (seed ${seed}):`, err);
  process.exit(1);
});
