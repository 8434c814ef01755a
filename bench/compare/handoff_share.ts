/**
 * The hand-off's cost on a member's core (--experimental-front-ends, docs/multicore.md): from a
 * core's profile written by `profile.ts --env=ETCD_EXPERIMENTAL_FRONT_ENDS=N --out=DIR`, the share
 * of its main thread's busy samples (within the measured window) whose nearest project frame is in
 * dist/server/front_end/ (frame codec, pipe reads and writes, PipeCall and link bookkeeping; a
 * native write or buffer call goes to the project frame that made it), and that share as µs per
 * put given the core's main-thread µs per put (`--main-us`, from profile.ts's /proc figures or
 * cpu_per_put.ts).
 *
 *   npx tsx bench/compare/handoff_share.ts DIR/n2-leader.cpuprofile DIR/window.json --main-us=24.5
 */
import { readFileSync } from "node:fs";
import { type CpuProfile, selfTimes } from "./profile.js";

function main(): void {
  const [profileFile, windowFile, ...rest] = process.argv.slice(2);
  if (profileFile === undefined || windowFile === undefined) throw new Error("usage: handoff_share.ts <core .cpuprofile> <window.json> [--main-us=N]");
  const mainUs = Number(rest.find((a) => a.startsWith("--main-us="))?.slice("--main-us=".length) ?? NaN);
  const p = JSON.parse(readFileSync(profileFile, "utf8")) as CpuProfile;
  const w = JSON.parse(readFileSync(windowFile, "utf8")) as { fromUs: number; toUs: number };
  const parent = new Map<number, number>();
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  /** The url of the nearest frame from the project's dist/ at or above a node, or "" without one. */
  const owner = new Map<number, string>();
  const ownerOf = (id: number): string => {
    const known = owner.get(id);
    if (known !== undefined) return known;
    const url = byId.get(id)?.callFrame.url ?? "";
    const up = parent.get(id);
    const found = url.includes("/dist/") ? url : up === undefined ? "" : ownerOf(up);
    owner.set(id, found);
    return found;
  };
  let busy = 0;
  let handoff = 0;
  const byFile = new Map<string, number>();
  for (const [id, us] of selfTimes(p, w.fromUs, w.toUs)) {
    const name = byId.get(id)?.callFrame.functionName;
    if (name === "(idle)") continue;
    busy += us;
    const url = ownerOf(id);
    if (!url.includes("/dist/server/front_end/")) continue;
    handoff += us;
    const file = url.slice(url.indexOf("/dist/") + 1);
    byFile.set(file, (byFile.get(file) ?? 0) + us);
  }
  const share = handoff / Math.max(1, busy);
  process.stdout.write(`hand-off: ${(share * 100).toFixed(1)}% of the core's busy main thread (${(handoff / 1000).toFixed(0)} of ${(busy / 1000).toFixed(0)} ms)`);
  process.stdout.write(Number.isFinite(mainUs) ? `, ${(share * mainUs).toFixed(1)} µs per put of ${mainUs} µs\n` : "\n");
  for (const [file, us] of [...byFile].sort((a, b) => b[1] - a[1])) process.stdout.write(`  ${((100 * us) / Math.max(1, busy)).toFixed(1).padStart(5)}%  ${file}\n`);
}

main();
