/**
 * npx tsx scripts/chaos.ts --duration SECONDS --seed N --faults kill,pause,partition,oneway,delay,reset,transfer,compact,defrag,powerloss,farbehind
 *                          [--target etcd|etcetera] [--clients N] [--keys N] [--think-ms MS] [--out DIR]
 *                          [--inject-client-bug stale-read[=RATE] | serializable-reads]   (TEST-ONLY: proves the checks have teeth)
 *                          [--inject-server-bug follower-local-read]   (TEST-ONLY, etcetera: src/server/test_bugs.ts)
 *                          [--tls]   (TLS on both ports: https:// URLs, client and peer certificates required)
 *                          [--progress-requests on|off]   (watchers' WatchProgressRequest; default off for etcd 3.4, etcd#15220)
 *
 * The long run (30 minutes; more keys and think time keep the history checkable):
 *   npx tsx scripts/chaos.ts --duration 1800 --seed N --keys 24 --think-ms 20
 *
 * Runs a 3-member cluster behind link proxies with a recorded workload and seeded faults, then
 * prints the report; exit code 0 = linearizable, watch checks passed, no acknowledged write lost;
 * 1 = a violation; 2 = undecided (the checker ran out of budget) or the run itself failed.
 */
import { parseArgs } from "node:util";

const { values } = parseArgs({
  options: {
    duration: { type: "string", default: "60" },
    seed: { type: "string" },
    faults: { type: "string", default: "kill,pause,partition,oneway,delay,reset,transfer,compact,defrag,powerloss,farbehind" },
    target: { type: "string" },
    clients: { type: "string", default: "6" },
    keys: { type: "string", default: "6" },
    "think-ms": { type: "string", default: "5" },
    out: { type: "string" },
    "inject-client-bug": { type: "string" },
    "inject-server-bug": { type: "string" },
    /** on|off: watchers send WatchProgressRequest (default: off for etcd 3.4.23, see etcd#15220). */
    "progress-requests": { type: "string" },
    /** TLS on both ports (client and peer certificates required; the link proxies terminate and re-encrypt). */
    tls: { type: "boolean", default: false },
  },
});

// The harness reads its target at import: set it before loading anything that imports it.
if (values.target !== undefined) {
  if (values.target !== "etcd" && values.target !== "etcetera") throw new Error(`--target must be etcd or etcetera, not ${values.target}`);
  process.env.E2E_TARGET = values.target === "etcd" ? "etcd" : "";
}
const { runChaos, formatReport } = await import("../test/reliability/chaos_runner.js");
const { FAULT_KINDS } = await import("../test/reliability/faults.js");
type Kind = (typeof FAULT_KINDS)[number];

const seed = values.seed !== undefined ? Number(values.seed) : Math.floor(Math.random() * 2 ** 31);
if (!Number.isSafeInteger(seed)) throw new Error(`bad --seed ${values.seed}`);
const faults = values.faults.split(",").filter((f) => f !== "");
for (const f of faults) if (!(FAULT_KINDS as readonly string[]).includes(f)) throw new Error(`unknown fault ${f}; known: ${FAULT_KINDS.join(",")}`);
let staleReadRate = 0;
let serializableGets = false;
const bug = values["inject-client-bug"];
if (bug !== undefined) {
  const [name, rate] = bug.split("=");
  if (name === "stale-read") staleReadRate = rate === undefined ? 0.2 : Number(rate);
  else if (name === "serializable-reads") serializableGets = true;
  else throw new Error(`unknown client bug ${bug}; known: stale-read[=RATE], serializable-reads`);
}
const serverBug = values["inject-server-bug"];
if (serverBug !== undefined && serverBug !== "follower-local-read") throw new Error(`unknown server bug ${serverBug}; known: follower-local-read`);
console.log(`chaos seed=${seed} (replay with --seed ${seed})`);
try {
  const report = await runChaos({
    seed,
    durationS: Number(values.duration),
    faults: faults as Kind[],
    clients: Number(values.clients),
    keys: Number(values.keys),
    thinkMs: Number(values["think-ms"]),
    staleReadRate,
    serializableGets,
    ...(serverBug !== undefined ? { serverBug } : {}),
    ...(values["progress-requests"] !== undefined ? { progressRequests: values["progress-requests"] === "on" } : {}),
    ...(values.out !== undefined ? { outDir: values.out } : {}),
    tls: values.tls,
    log: (l) => console.log(`[${new Date().toISOString().slice(11, 19)}] ${l}`),
  });
  console.log(formatReport(report));
  process.exit(report.passed ? 0 : report.linearizable === "unknown" && report.watch.ok && report.lostWrites === 0 ? 2 : 1);
} catch (e) {
  console.error(`chaos run failed (seed=${seed}): ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`);
  process.exit(2);
}
