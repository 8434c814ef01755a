/**
 * Power-loss crash runs of one member on lazyfs (issue 20; test/powerloss/member_crash.ts).
 *
 *   npm run powerloss -- [--seed N] [--seeds K] [--cut-at delay,snapshot,wal-purge,compact,defrag|all]
 *       [--snapshot-count 1000] [--max-wals 1] [--value-bytes 2048] [--max-delay-ms 8000] [--writeback P] [--no-tear] [--keep]
 *
 * --writeback P: at the cut, each unsynced 4 KiB page had reached the disk with probability P%
 * (the OS's background writeback, in any order). Builds dist/ first. Each run prints its seed and a replay line; the exit code is 1 if any run
 * lost an acknowledged put, left a backend that fails integrity_check, or refused to start
 * without naming a file and an offset.
 */
import { execFileSync } from "node:child_process";
import { resolve } from "node:path";
import { CUT_POINTS, describeReport, runMemberCrash, type CutAt } from "../test/powerloss/member_crash.js";

const ROOT = resolve(import.meta.dirname, "..");
const args = process.argv.slice(2);
function option(name: string, fallback: string): string {
  const i = args.indexOf(`--${name}`);
  return i >= 0 && args[i + 1] !== undefined ? args[i + 1]! : fallback;
}
const firstSeed = Number(option("seed", String(Math.floor(Math.random() * 2 ** 31))));
const seeds = Number(option("seeds", "1"));
const cutAtOption = option("cut-at", "all");
const cuts: CutAt[] = cutAtOption === "all" ? [...CUT_POINTS] : (cutAtOption.split(",") as CutAt[]);
if (!Number.isInteger(firstSeed) || !(seeds >= 1)) throw new Error("--seed must be an integer and --seeds >= 1");
for (const c of cuts) if (!CUT_POINTS.includes(c)) throw new Error(`--cut-at ${c}: want ${CUT_POINTS.join(", ")} (comma-separated) or all`);

/** The options a replay needs besides the seed and the cut (not --seeds, --keep). */
const passOn: string[] = [];
for (const name of ["snapshot-count", "max-wals", "value-bytes", "max-delay-ms", "writeback"]) {
  const i = args.indexOf(`--${name}`);
  if (i >= 0 && args[i + 1] !== undefined) passOn.push(`--${name}`, args[i + 1]!);
}
if (args.includes("--no-tear")) passOn.push("--no-tear");

if (process.env.SKIP_BUILD !== "1") execFileSync("npx", ["tsc", "-p", "tsconfig.build.json"], { cwd: ROOT, stdio: "inherit" });
console.log(`[powerloss] seeds ${firstSeed}..${firstSeed + seeds - 1}, cut at ${cuts.join(", ")}`);
let failed = 0;
let runs = 0;
for (let seed = firstSeed; seed < firstSeed + seeds; seed++) {
  for (const cutAt of cuts) {
    const report = await runMemberCrash({
      seed,
      cutAt,
      snapshotCount: Number(option("snapshot-count", "1000")),
      maxWals: Number(option("max-wals", "1")),
      valueBytes: Number(option("value-bytes", "2048")),
      maxDelayMs: Number(option("max-delay-ms", "8000")),
      tear: !args.includes("--no-tear"),
      writebackPercent: Number(option("writeback", "0")),
      keep: args.includes("--keep"),
      log: (l) => console.log(l),
    });
    runs++;
    if (!report.ok) failed++;
    console.log(describeReport(report, `npm run powerloss -- --seed ${seed} --cut-at ${cutAt}${passOn.length > 0 ? ` ${passOn.join(" ")}` : ""}`));
    if (args.includes("--keep")) console.log(`  kept: ${report.dir}`);
  }
}
console.log(`[powerloss] ${runs - failed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
