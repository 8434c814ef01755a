/**
 * benchmark — an etcd v3 load generator with the CLI and report of etcd's tools/benchmark.
 *
 *   npx tsx bench/benchmark/main.ts [global flags] COMMAND [flags] [args]
 *
 *   npx tsx bench/benchmark/main.ts --endpoints=127.0.0.1:2379 --target-leader --conns=100 --clients=1000 \
 *       put --key-size=8 --sequential-keys --key-space-size=100000 --total=100000 --val-size=256
 *   npx tsx bench/benchmark/main.ts --endpoints=$EPS --conns=100 --clients=1000 range foo --consistency=s --total=100000
 *
 * Global: --endpoints --conns --clients --target-leader --dial-timeout --precise, plus
 * --workers N (threads, default = cores), --json (machine-readable result on stdout),
 * --progress=false. Commands: put, range, txn-put, txn-mixed, stm, lease-keepalive, watch,
 * watch-latency, watch-get. The progress bar goes to stderr, the report to stdout.
 */
import { availableParallelism } from "node:os";
import { type GlobalOptions, type ParsedArgs, UsageError, parseArgs, usage } from "./flags.js";
import { findLeader } from "./leader.js";
import { UNARY_COMMANDS, makePlan } from "./ops.js";
import { formatStats, statsToJson } from "./report.js";
import { type SeriesResult, runUnary } from "./runner.js";
import { runWatchCommand } from "./watch.js";

/** What `--json` prints: the run's parameters and one entry per report. */
export interface BenchmarkJson {
  command: string;
  args: string[];
  flags: Record<string, unknown>;
  endpoints: string[];
  conns: number;
  clients: number;
  workers: number;
  /** CPU seconds (user + system, all threads) the generator spent during the run. */
  generatorCpuSec: number;
  series: Array<{ name: string } & ReturnType<typeof statsToJson>>;
}

const SERIES_HEADERS: Record<string, string> = {
  "watch-creation": "Watch creation summary:",
  "watch-events": "Watch events received summary:",
  "watch-get": "Get during watch summary:",
};

/** Header and separators etcd prints around its reports, per command. */
function printText(parsed: ParsedArgs, results: SeriesResult[], global: GlobalOptions): void {
  const { command, flags } = parsed;
  const out = (s: string) => process.stdout.write(s);
  if (command === "range" || command === "txn-mixed") out(`bench with ${flags.consistency === "s" ? "serializable" : "linearizable"} range\n`);
  if (command === "txn-mixed") {
    const [read, write] = results;
    out(`Total Read Ops: ${read?.stats.count ?? 0}\nDetails:${formatStats(read?.stats ?? emptyStats(), global.precise)}\n`);
    out(`Total Write Ops: ${write?.stats.count ?? 0}\nDetails:${formatStats(write?.stats ?? emptyStats(), global.precise)}\n`);
    return;
  }
  for (const r of results) {
    const header = SERIES_HEADERS[r.name];
    if (header !== undefined) out(header);
    out(formatStats(r.stats, global.precise) + "\n");
  }
}

function emptyStats() {
  return { totalSec: 0, count: 0, slowestSec: 0, fastestSec: 0, averageSec: 0, stddevSec: 0, rps: 0, histogram: [], percentiles: [], errors: {} };
}

export async function main(argv: string[]): Promise<number> {
  if (argv.includes("--help") || argv.includes("-h") || argv.length === 0) {
    process.stdout.write(usage() + "\n");
    return argv.length === 0 ? 1 : 0;
  }
  let parsed: ParsedArgs;
  try {
    parsed = parseArgs(argv, availableParallelism());
  } catch (e) {
    if (e instanceof UsageError) {
      process.stderr.write(`Error: ${e.message}\n`);
      return 2;
    }
    throw e;
  }
  const { global, command, flags, args } = parsed;
  const endpoints = global.targetLeader ? [await findLeader(global.endpoints, global.dialTimeoutMs)] : global.endpoints;
  const cpu0 = process.cpuUsage();
  const results = UNARY_COMMANDS.includes(command)
    ? await runUnary(global, endpoints, makePlan(command, flags, args))
    : await runWatchCommand(global, endpoints, command, flags);
  if (global.json) {
    const json: BenchmarkJson = {
      command,
      args,
      flags,
      endpoints,
      conns: global.conns,
      clients: global.clients,
      workers: global.workers,
      generatorCpuSec: (() => {
        const d = process.cpuUsage(cpu0);
        return (d.user + d.system) / 1e6;
      })(),
      series: results.map((r) => ({ name: r.name, ...statsToJson(r.stats) })),
    };
    process.stdout.write(JSON.stringify(json) + "\n");
  } else {
    printText(parsed, results, global);
  }
  return 0;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (e: unknown) => {
    process.stderr.write(`benchmark: ${e instanceof Error ? e.message : String(e)}\n`);
    process.exit(1);
  },
);
