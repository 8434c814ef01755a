/**
 * Power-loss crash runs on lazyfs (issue 20): of one member (test/powerloss/member_crash.ts), or
 * with --cluster of one, two or all members of a three-member cluster at once (cluster_crash.ts).
 *
 *   npm run powerloss -- [--seed N] [--seeds K] [--cut-at delay,snapshot,wal-purge,compact,defrag|all]
 *       [--snapshot-count 1000] [--max-wals 1] [--value-bytes 2048] [--max-delay-ms 8000] [--writeback P] [--no-tear] [--keep]
 *   npm run powerloss -- --cluster [--victims one,majority,all] [--cut-at delay,snapshot,snapshot-install,wal-cut|all] [the options above]
 *
 * --writeback P: at the cut, each unsynced 4 KiB page had reached the disk with probability P%
 * (the OS's background writeback, in any order). Builds dist/ first. Each run prints its seed and a replay line; the exit code is 1 if any run
 * lost an acknowledged put, left a backend that fails integrity_check, or refused to start
 * without naming a file and an offset.
 */
import { execFileSync } from "node:child_process";
import { resolve } from "node:path";
import { CLUSTER_CUT_POINTS, describeClusterReport, runClusterCrash, VICTIMS, type ClusterCutAt, type Victims } from "../test/powerloss/cluster_crash.js";
import { CUT_POINTS, describeReport, runMemberCrash, type CutAt } from "../test/powerloss/member_crash.js";

const ROOT = resolve(import.meta.dirname, "..");
const args = process.argv.slice(2);
function option(name: string, fallback: string): string {
  const i = args.indexOf(`--${name}`);
  return i >= 0 && args[i + 1] !== undefined ? args[i + 1]! : fallback;
}
const firstSeed = Number(option("seed", String(Math.floor(Math.random() * 2 ** 31))));
const seeds = Number(option("seeds", "1"));
const cluster = args.includes("--cluster");
const cutAtOption = option("cut-at", "all");
const cutPoints: readonly string[] = cluster ? CLUSTER_CUT_POINTS : CUT_POINTS;
const cuts = cutAtOption === "all" ? [...cutPoints] : cutAtOption.split(",");
const victimsOption = option("victims", "all");
const victimSets = (victimsOption === "every" ? [...VICTIMS] : victimsOption.split(",")) as Victims[];
if (!Number.isInteger(firstSeed) || !(seeds >= 1)) throw new Error("--seed must be an integer and --seeds >= 1");
for (const c of cuts) if (!cutPoints.includes(c)) throw new Error(`--cut-at ${c}: want ${cutPoints.join(", ")} (comma-separated) or all`);
for (const v of victimSets) if (!VICTIMS.includes(v)) throw new Error(`--victims ${v}: want ${VICTIMS.join(", ")} (comma-separated) or every`);

/** The options a replay needs besides the seed and the cut (not --seeds, --keep). */
const passOn: string[] = [];
for (const name of ["snapshot-count", "max-wals", "value-bytes", "max-delay-ms", "writeback"]) {
  const i = args.indexOf(`--${name}`);
  if (i >= 0 && args[i + 1] !== undefined) passOn.push(`--${name}`, args[i + 1]!);
}
if (args.includes("--no-tear")) passOn.push("--no-tear");

if (process.env.SKIP_BUILD !== "1") execFileSync("npx", ["tsc", "-p", "tsconfig.build.json"], { cwd: ROOT, stdio: "inherit" });
console.log(`[powerloss] seeds ${firstSeed}..${firstSeed + seeds - 1}, cut at ${cuts.join(", ")}${cluster ? `, victims ${victimSets.join(", ")} of a three-member cluster` : ""}`);
let failed = 0;
let runs = 0;
const common = {
  snapshotCount: Number(option("snapshot-count", "1000")),
  maxWals: Number(option("max-wals", "1")),
  valueBytes: Number(option("value-bytes", "2048")),
  maxDelayMs: Number(option("max-delay-ms", cluster ? "6000" : "8000")),
  tear: !args.includes("--no-tear"),
  writebackPercent: Number(option("writeback", "0")),
  keep: args.includes("--keep"),
  log: (l: string) => console.log(l),
};
const extra = passOn.length > 0 ? ` ${passOn.join(" ")}` : "";
for (let seed = firstSeed; seed < firstSeed + seeds; seed++) {
  for (const cut of cuts) {
    for (const victims of cluster ? victimSets : [undefined]) {
      let ok: boolean;
      let dir: string;
      if (victims !== undefined) {
        const replay = `npm run powerloss -- --cluster --victims ${victims} --seed ${seed} --cut-at ${cut}${extra}`;
        const startedMs = Date.now();
        try {
          const report = await runClusterCrash({ seed, victims, cutAt: cut as ClusterCutAt, ...common });
          ok = report.ok;
          dir = report.dir;
          console.log(describeClusterReport(report, replay));
        } catch (e) {
          // A run that threw (a stall, its budget) prints its diagnosis; the next seeds still run.
          ok = false;
          dir = "(removed)";
          console.log(`seed=${seed} victims=${victims} cut-at=${cut}: FAILED after ${((Date.now() - startedMs) / 1000).toFixed(1)} s (replay: ${replay})\n${(e as Error).message}`);
        }
      } else {
        const report = await runMemberCrash({ seed, cutAt: cut as CutAt, ...common });
        ok = report.ok;
        dir = report.dir;
        console.log(describeReport(report, `npm run powerloss -- --seed ${seed} --cut-at ${cut}${extra}`));
      }
      runs++;
      if (!ok) failed++;
      if (common.keep) console.log(`  kept: ${dir}`);
    }
  }
}
console.log(`[powerloss] ${runs - failed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
