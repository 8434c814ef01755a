/**
 * Command-line flags of etcd's `benchmark` tool (tools/benchmark, v3.4/3.5), parsed the way
 * cobra/pflag parse them: `--flag=value` or `--flag value`, booleans as bare `--flag` or
 * `--flag=true|false`, durations in Go syntax (`5s`, `1m30s`, `250ms`), global flags anywhere.
 *
 * Pure: no I/O, so the CLI surface is unit-tested (test/bench/flags.test.ts).
 */

export type FlagValue = number | string | boolean | string[];
type FlagType = "int" | "uint" | "float" | "bool" | "string" | "duration" | "strings";

interface FlagSpec {
  type: FlagType;
  def: FlagValue;
  usage: string;
}

type FlagTable = Record<string, FlagSpec>;

/** Global (persistent) flags: etcd's root command plus our `--workers` and `--json`. */
const GLOBAL_FLAGS: FlagTable = {
  endpoints: { type: "strings", def: ["127.0.0.1:2379"], usage: "gRPC endpoints" },
  conns: { type: "uint", def: 1, usage: "Total number of gRPC connections" },
  clients: { type: "uint", def: 1, usage: "Total number of gRPC clients" },
  precise: { type: "bool", def: false, usage: "use full floating point precision" },
  "dial-timeout": { type: "duration", def: 0, usage: "dial timeout for client connections" },
  "target-leader": { type: "bool", def: false, usage: "connect only to the leader node" },
  workers: { type: "uint", def: 0, usage: "worker threads driving the load (0 = number of cores)" },
  json: { type: "bool", def: false, usage: "print the result as JSON on stdout instead of etcd's text summary" },
  output: { type: "string", def: "", usage: "output format (only 'json' is supported), same as --json" },
  progress: { type: "bool", def: true, usage: "draw the progress bar on stderr" },
  transport: { type: "string", def: "h2", usage: "unary calls over 'h2' (lean node:http2 client) or 'grpc-js'" },
};

/** Per-command flags with etcd's defaults. */
const COMMAND_FLAGS: Record<string, FlagTable> = {
  put: {
    "key-size": { type: "int", def: 8, usage: "Key size of put request" },
    "val-size": { type: "int", def: 8, usage: "Value size of put request" },
    rate: { type: "int", def: 0, usage: "Maximum puts per second (0 is no limit)" },
    total: { type: "int", def: 10000, usage: "Total number of put requests" },
    "key-space-size": { type: "int", def: 1, usage: "Maximum possible keys" },
    "sequential-keys": { type: "bool", def: false, usage: "Use sequential keys" },
    "compact-interval": { type: "duration", def: 0, usage: "Interval to compact database (e.g. 5m)" },
    "compact-index-delta": { type: "int", def: 1000, usage: "Delta between current revision and compact revision" },
  },
  range: {
    rate: { type: "int", def: 0, usage: "Maximum range requests per second (0 is no limit)" },
    total: { type: "int", def: 10000, usage: "Total number of range requests" },
    consistency: { type: "string", def: "l", usage: "Linearizable(l) or Serializable(s)" },
  },
  "txn-put": {
    "key-size": { type: "int", def: 8, usage: "Key size of txn put" },
    "val-size": { type: "int", def: 8, usage: "Value size of txn put" },
    "txn-ops": { type: "int", def: 1, usage: "Number of puts per txn" },
    rate: { type: "int", def: 0, usage: "Maximum txns per second (0 is no limit)" },
    total: { type: "int", def: 10000, usage: "Total number of txn requests" },
    "key-space-size": { type: "int", def: 1, usage: "Maximum possible keys" },
  },
  "txn-mixed": {
    "key-size": { type: "int", def: 8, usage: "Key size of mixed txn" },
    "val-size": { type: "int", def: 8, usage: "Value size of mixed txn" },
    rate: { type: "int", def: 0, usage: "Maximum txns per second (0 is no limit)" },
    total: { type: "int", def: 10000, usage: "Total number of txn requests" },
    "end-key": { type: "string", def: "", usage: "Read operation range end key" },
    limit: { type: "int", def: 1000, usage: "Read operation range result limit" },
    "key-space-size": { type: "int", def: 1, usage: "Maximum possible keys" },
    consistency: { type: "string", def: "l", usage: "Linearizable(l) or Serializable(s)" },
    "rw-ratio": { type: "float", def: 1, usage: "Read/write ops ratio" },
  },
  watch: {
    streams: { type: "int", def: 10, usage: "Total watch streams" },
    "watch-per-stream": { type: "int", def: 100, usage: "Total watchers per stream" },
    "watched-key-total": { type: "int", def: 1, usage: "Total number of keys to be watched" },
    "put-rate": { type: "int", def: 0, usage: "Number of keys to put per second" },
    "put-total": { type: "int", def: 1000, usage: "Number of put requests" },
    "key-size": { type: "int", def: 32, usage: "Key size of watch request" },
    "key-space-size": { type: "int", def: 1, usage: "Maximum possible keys" },
    "sequential-keys": { type: "bool", def: false, usage: "Use sequential keys" },
  },
  "watch-latency": {
    "put-total": { type: "int", def: 1000, usage: "Total number of put requests" },
    "put-rate": { type: "int", def: 100, usage: "Number of keys to put per second" },
    "key-size": { type: "int", def: 32, usage: "Key size of watch response" },
    "val-size": { type: "int", def: 32, usage: "Value size of watch response" },
    streams: { type: "int", def: 10, usage: "Total watch streams" },
    "watchers-per-stream": { type: "int", def: 10, usage: "Total watchers per stream" },
  },
  "watch-get": {
    watchers: { type: "int", def: 10000, usage: "Total number of watchers" },
    streams: { type: "int", def: 1, usage: "Total number of watcher streams" },
    events: { type: "int", def: 8, usage: "Number of events per watcher" },
  },
  "lease-keepalive": {
    total: { type: "int", def: 10000, usage: "Total number of lease keepalive requests" },
  },
  stm: {
    keys: { type: "int", def: 1, usage: "Total unique keys accessible by the benchmark" },
    "keys-per-txn": { type: "int", def: 1, usage: "Number of keys to access per transaction" },
    total: { type: "int", def: 10000, usage: "Total number of completed STM transactions" },
    isolation: { type: "string", def: "r", usage: "Read Committed (c), Repeatable Reads (r), Serializable (s), or Snapshot (ss)" },
    "stm-locker": { type: "string", def: "stm", usage: "Wrap STM transaction with a custom locking mechanism (stm only)" },
    rate: { type: "int", def: 0, usage: "Maximum STM transactions per second (0 is no limit)" },
  },
};

export const COMMANDS: readonly string[] = Object.keys(COMMAND_FLAGS);

export interface GlobalOptions {
  endpoints: string[];
  conns: number;
  clients: number;
  precise: boolean;
  dialTimeoutMs: number;
  targetLeader: boolean;
  /** Worker threads; already resolved (0 on the command line means "cores"). */
  workers: number;
  json: boolean;
  progress: boolean;
  transport: "h2" | "grpc-js";
}

/** The flag values of the chosen command, by flag name, defaults filled in. */
export type CommandFlags = Record<string, FlagValue>;

export interface ParsedArgs {
  global: GlobalOptions;
  command: string;
  flags: CommandFlags;
  args: string[];
}

export class UsageError extends Error {
  override name = "UsageError";
}

/** Go's time.ParseDuration for the units people type: ns, us/µs, ms, s, m, h; returns ms. */
export function parseDurationMs(text: string): number {
  const s = text.trim();
  if (s === "0") return 0;
  const unitMs: Record<string, number> = { ns: 1e-6, us: 1e-3, "µs": 1e-3, ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
  const re = /(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)/y;
  let total = 0;
  let pos = 0;
  if (s.length === 0) throw new UsageError(`invalid duration "${text}"`);
  while (pos < s.length) {
    re.lastIndex = pos;
    const m = re.exec(s);
    if (m === null) throw new UsageError(`invalid duration "${text}"`);
    total += Number(m[1]) * (unitMs[m[2] as string] as number);
    pos = re.lastIndex;
  }
  return total;
}

function parseValue(name: string, spec: FlagSpec, raw: string): FlagValue {
  switch (spec.type) {
    case "int":
    case "uint": {
      if (!/^[-+]?\d+$/.test(raw)) throw new UsageError(`invalid argument "${raw}" for "--${name}" flag: not an integer`);
      const n = Number(raw);
      if (spec.type === "uint" && n < 0) throw new UsageError(`invalid argument "${raw}" for "--${name}" flag: negative`);
      return n;
    }
    case "float": {
      const n = Number(raw);
      if (raw.trim() === "" || !Number.isFinite(n)) throw new UsageError(`invalid argument "${raw}" for "--${name}" flag: not a number`);
      return n;
    }
    case "bool":
      if (raw === "true" || raw === "1") return true;
      if (raw === "false" || raw === "0") return false;
      throw new UsageError(`invalid argument "${raw}" for "--${name}" flag: not a boolean`);
    case "string":
      return raw;
    case "duration":
      return parseDurationMs(raw);
    case "strings":
      return raw
        .split(",")
        .map((e) => e.trim())
        .filter((e) => e.length > 0);
  }
}

function defaults(table: FlagTable): Record<string, FlagValue> {
  const out: Record<string, FlagValue> = {};
  for (const [name, spec] of Object.entries(table)) out[name] = Array.isArray(spec.def) ? [...spec.def] : spec.def;
  return out;
}

/** Parses `benchmark [global flags] COMMAND [flags] [args]`; `cores` resolves `--workers=0`. */
export function parseArgs(argv: readonly string[], cores: number): ParsedArgs {
  const globals = defaults(GLOBAL_FLAGS);
  let command: string | undefined;
  let cmdValues: Record<string, FlagValue> = {};
  const positional: string[] = [];

  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string;
    if (arg === "--") {
      positional.push(...argv.slice(i + 1));
      break;
    }
    if (!arg.startsWith("--")) {
      if (command === undefined) {
        if (!(arg in COMMAND_FLAGS)) throw new UsageError(`unknown command "${arg}" for "benchmark"`);
        command = arg;
        cmdValues = defaults(COMMAND_FLAGS[arg] as FlagTable);
      } else {
        positional.push(arg);
      }
      continue;
    }
    const eq = arg.indexOf("=");
    const name = eq < 0 ? arg.slice(2) : arg.slice(2, eq);
    const cmdTable = command === undefined ? undefined : COMMAND_FLAGS[command];
    // A command's own flag wins over a global of the same name, as cobra's local flags do.
    const [spec, target] =
      cmdTable !== undefined && name in cmdTable
        ? [cmdTable[name] as FlagSpec, cmdValues]
        : name in GLOBAL_FLAGS
          ? [GLOBAL_FLAGS[name] as FlagSpec, globals]
          : [undefined, undefined];
    if (spec === undefined || target === undefined) throw new UsageError(`unknown flag: --${name}`);
    let raw: string;
    if (eq >= 0) raw = arg.slice(eq + 1);
    else if (spec.type === "bool") raw = "true";
    else {
      const next = argv[i + 1];
      if (next === undefined) throw new UsageError(`flag needs an argument: --${name}`);
      raw = next;
      i++;
    }
    target[name] = parseValue(name, spec, raw);
  }
  if (command === undefined) throw new UsageError(`missing command; one of: ${COMMANDS.join(", ")}`);

  const workers = globals.workers as number;
  const global: GlobalOptions = {
    endpoints: globals.endpoints as string[],
    conns: globals.conns as number,
    clients: globals.clients as number,
    precise: globals.precise as boolean,
    dialTimeoutMs: globals["dial-timeout"] as number,
    targetLeader: globals["target-leader"] as boolean,
    workers: workers === 0 ? Math.max(1, cores) : workers,
    json: (globals.json as boolean) || globals.output === "json",
    progress: globals.progress as boolean,
    transport: globals.transport === "grpc-js" ? "grpc-js" : "h2",
  };
  if (globals.transport !== "h2" && globals.transport !== "grpc-js") throw new UsageError(`--transport must be h2 or grpc-js`);
  if (global.endpoints.length === 0) throw new UsageError("no endpoints");
  if (global.conns < 1 || global.clients < 1) throw new UsageError("--conns and --clients must be at least 1");
  if (globals.output !== "" && globals.output !== "json") throw new UsageError(`unsupported --output "${String(globals.output)}"`);
  validateCommand(command, cmdValues, positional);
  return { global, command, flags: cmdValues, args: positional };
}

function validateCommand(command: string, flags: CommandFlags, args: string[]): void {
  const positive = (name: string) => {
    if (name in flags && (flags[name] as number) <= 0) throw new UsageError(`expected positive --${name}, got (${String(flags[name])})`);
  };
  positive("key-space-size");
  positive("total");
  if (command === "range" || command === "txn-mixed") {
    if (command === "range" && (args.length === 0 || args.length > 2)) throw new UsageError("usage: range key [end-range]");
    if (command === "txn-mixed" && args.length > 2) throw new UsageError("usage: txn-mixed key [end-range]");
    if (flags.consistency !== "l" && flags.consistency !== "s") throw new UsageError(`--consistency must be l or s, got "${String(flags.consistency)}"`);
  }
  if (command === "txn-put") {
    positive("txn-ops");
    if ((flags["txn-ops"] as number) > (flags["key-space-size"] as number)) {
      throw new UsageError(
        `expected --txn-ops no larger than --key-space-size, got txn-ops(${String(flags["txn-ops"])}) key-space-size(${String(flags["key-space-size"])})`,
      );
    }
  }
  if (command === "stm") {
    if (!["c", "r", "s", "ss"].includes(flags.isolation as string)) throw new UsageError(`unexpected isolation "${String(flags.isolation)}"`);
    if (flags["stm-locker"] !== "stm") throw new UsageError(`unsupported --stm-locker "${String(flags["stm-locker"])}" (only "stm")`);
    if ((flags["keys-per-txn"] as number) > (flags.keys as number)) throw new UsageError("--keys-per-txn must not exceed --keys");
  }
}

/** Help text listing commands and flags with etcd's defaults. */
export function usage(): string {
  const fmt = (table: FlagTable) =>
    Object.entries(table)
      .map(([n, s]) => `      --${n}${s.type === "bool" ? "" : ` ${s.type}`}\t${s.usage} (default ${JSON.stringify(s.def)})`)
      .join("\n");
  const lines = ["Usage: benchmark [global flags] COMMAND [flags] [args]", "", "Global flags:", fmt(GLOBAL_FLAGS), ""];
  for (const [c, t] of Object.entries(COMMAND_FLAGS)) lines.push(`${c}:`, fmt(t), "");
  return lines.join("\n");
}
