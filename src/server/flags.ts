/**
 * Command-line and environment parsing with the semantics of Go's `flag` package as etcd uses it
 * (etcd's pkg/flags): `-flag`, `--flag`, `--flag=value`, `--flag value`; booleans only take a value
 * with `=`; parsing stops at the first non-flag argument or `--`; the last occurrence wins. Every
 * flag may also come from `ETCD_<NAME>` (dashes become underscores); the command line wins.
 *
 * Error texts are Go's/etcd's, so scripts and humans see the same words as with etcd. Parsing
 * errors exit with 2 (Go's flag.ExitOnError); errors found while verifying (env values, stray
 * arguments) exit with 1 and are wrapped by the caller as etcd does ("error verifying flags, ...").
 */

export type FlagKind = "string" | "bool" | "uint" | "int" | "duration" | "urls" | "enum";

export interface FlagSpec {
  /** Name without dashes, e.g. "heartbeat-interval". */
  readonly name: string;
  readonly kind: FlagKind;
  /** The default as a raw string ("" for none); parsed like a user value. */
  readonly defaultValue: string;
  /** How the default is shown in --help (etcd shows e.g. '${name}.etcd'). */
  readonly defaultText?: string;
  readonly usage: string;
  /** Section of the --help text. */
  readonly group: string;
  /** For kind "enum": the accepted values. */
  readonly choices?: readonly string[];
  /** Upper bound for kind "uint" (inclusive); Go's uint is 64-bit, ours stops at 2^53-1. */
  readonly max?: number;
}

/** A flag problem. `exitCode` is what etcd exits with for it (2: parse error, 1: verify error). */
export class ConfigError extends Error {
  constructor(
    message: string,
    readonly exitCode: 1 | 2,
  ) {
    super(message);
    this.name = "ConfigError";
  }
}

/** Where a value came from. */
export type ValueSource = "default" | "flag" | "env";

export interface ParsedFlags {
  /** Raw (already validated) values by flag name, defaults filled in. */
  readonly values: ReadonlyMap<string, string>;
  readonly sources: ReadonlyMap<string, ValueSource>;
  readonly help: boolean;
  /** Non-fatal findings to be logged once a logger exists (unknown ETCD_* vars, shadowed env). */
  readonly warnings: readonly string[];
}

/** `ETCD_HEARTBEAT_INTERVAL` for "heartbeat-interval". */
export function flagToEnv(name: string): string {
  return "ETCD_" + name.toUpperCase().replace(/-/g, "_");
}

/**
 * Parses argv (without node and script) then the environment. Throws ConfigError.
 * `-h`/`--help` set `help` and stop parsing, like Go's flag.ErrHelp.
 */
export function parseFlags(argv: readonly string[], env: NodeJS.ProcessEnv, specs: readonly FlagSpec[]): ParsedFlags {
  const byName = new Map(specs.map((s) => [s.name, s] as const));
  const values = new Map<string, string>(specs.map((s) => [s.name, s.defaultValue] as const));
  const sources = new Map<string, ValueSource>(specs.map((s) => [s.name, "default"] as const));
  const commandLine = parseCommandLine(argv, byName);
  if (commandLine.help) return { values, sources, help: true, warnings: [] };
  for (const [name, value] of commandLine.set) {
    values.set(name, value);
    sources.set(name, "flag");
  }
  if (commandLine.positional.length > 0) {
    throw new ConfigError(`'${commandLine.positional[0]}' is not a valid flag`, 1);
  }
  const warnings = applyEnvironment(env, specs, values, sources);
  return { values, sources, help: false, warnings };
}

interface CommandLine {
  set: Map<string, string>;
  positional: string[];
  help: boolean;
}

function parseCommandLine(argv: readonly string[], byName: ReadonlyMap<string, FlagSpec>): CommandLine {
  const set = new Map<string, string>();
  let i = 0;
  while (i < argv.length) {
    const arg = argv[i]!;
    if (arg.length < 2 || arg[0] !== "-") break; // first non-flag argument ("-" included)
    let body = arg.slice(1);
    if (body[0] === "-") {
      body = body.slice(1);
      if (body.length === 0) {
        i++; // "--" terminates the flags
        break;
      }
    }
    if (body.length === 0 || body[0] === "-" || body[0] === "=") {
      throw new ConfigError(`bad flag syntax: ${arg}`, 2);
    }
    i++;
    const eq = body.indexOf("=");
    const name = eq === -1 ? body : body.slice(0, eq);
    const spec = byName.get(name);
    if (spec === undefined) {
      if (name === "h" || name === "help") return { set, positional: [], help: true };
      throw new ConfigError(`flag provided but not defined: -${name}`, 2);
    }
    let value: string;
    if (eq !== -1) {
      value = body.slice(eq + 1);
    } else if (spec.kind === "bool") {
      value = "true";
    } else {
      if (i >= argv.length) throw new ConfigError(`flag needs an argument: -${name}`, 2);
      value = argv[i]!;
      i++;
    }
    const problem = checkValue(spec, value);
    if (problem !== undefined) {
      const what = spec.kind === "bool" ? `invalid boolean value "${value}" for -${name}` : `invalid value "${value}" for flag -${name}`;
      throw new ConfigError(`${what}: ${problem}`, 2);
    }
    set.set(name, value);
  }
  return { set, positional: argv.slice(i), help: false };
}

function applyEnvironment(
  env: NodeJS.ProcessEnv,
  specs: readonly FlagSpec[],
  values: Map<string, string>,
  sources: Map<string, ValueSource>,
): string[] {
  const warnings: string[] = [];
  const known = new Set<string>();
  for (const spec of specs) {
    const key = flagToEnv(spec.name);
    known.add(key);
    const value = env[key];
    if (value === undefined || value === "") continue;
    if (sources.get(spec.name) === "flag") {
      warnings.push(
        `conflicting environment variable "${key}" is shadowed by corresponding command-line flag (either unset environment variable or disable flag)`,
      );
      continue;
    }
    const problem = checkValue(spec, value);
    if (problem !== undefined) throw new ConfigError(`invalid value "${value}" for ${key}: ${problem}`, 1);
    values.set(spec.name, value);
    sources.set(spec.name, "env");
  }
  for (const key of Object.keys(env).sort()) {
    if (key.startsWith("ETCD_") && !known.has(key)) {
      warnings.push(`unrecognized environment variable ${key}=${env[key] ?? ""}`);
    }
  }
  return warnings;
}

/** Returns Go's error text for an unacceptable value, or undefined when it parses. */
function checkValue(spec: FlagSpec, value: string): string | undefined {
  try {
    switch (spec.kind) {
      case "string":
        return undefined;
      case "bool":
        parseGoBool(value);
        return undefined;
      case "uint":
        parseGoUint(value, spec.max);
        return undefined;
      case "int":
        parseGoInt(value);
        return undefined;
      case "duration":
        parseGoDurationMs(value);
        return undefined;
      case "urls":
        parseUrlList(value);
        return undefined;
      case "enum":
        return spec.choices?.includes(value) === true ? undefined : "invalid value";
    }
  } catch (e) {
    return (e as Error).message;
  }
}

const TRUE_WORDS = new Set(["1", "t", "T", "TRUE", "true", "True"]);
const FALSE_WORDS = new Set(["0", "f", "F", "FALSE", "false", "False"]);

/** Go's strconv.ParseBool. */
export function parseGoBool(s: string): boolean {
  if (TRUE_WORDS.has(s)) return true;
  if (FALSE_WORDS.has(s)) return false;
  throw new Error("parse error");
}

/** Go's strconv.ParseUint(s, 0, 64) limited to safe integers (or `max`). */
export function parseGoUint(s: string, max = Number.MAX_SAFE_INTEGER): number {
  const digits = s.replace(/_/g, "");
  let n: number;
  if (/^0[xX][0-9a-fA-F]+$/.test(digits)) n = parseInt(digits.slice(2), 16);
  else if (/^0[oO][0-7]+$/.test(digits)) n = parseInt(digits.slice(2), 8);
  else if (/^0[bB][01]+$/.test(digits)) n = parseInt(digits.slice(2), 2);
  else if (/^0[0-7]+$/.test(digits)) n = parseInt(digits.slice(1), 8);
  else if (/^[0-9]+$/.test(digits)) n = Number(digits);
  else throw new Error("parse error");
  if (!Number.isSafeInteger(n) || n > max) throw new Error("value out of range");
  return n;
}

/** Go's strconv.ParseInt(s, 0, 64) limited to safe integers. */
export function parseGoInt(s: string): number {
  if (s.startsWith("-")) return -parseGoUint(s.slice(1));
  if (s.startsWith("+")) return parseGoUint(s.slice(1));
  return parseGoUint(s);
}

const DURATION_UNIT_MS: Record<string, number> = {
  ns: 1e-6,
  us: 1e-3,
  "µs": 1e-3,
  "μs": 1e-3,
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
};

/** Go's time.ParseDuration ("1h30m", "1.5s", "0"), in milliseconds (may be fractional). */
export function parseGoDurationMs(s: string): number {
  if (s === "0" || s === "+0" || s === "-0") return 0;
  let rest = s;
  let sign = 1;
  if (rest.startsWith("-") || rest.startsWith("+")) {
    sign = rest[0] === "-" ? -1 : 1;
    rest = rest.slice(1);
  }
  if (rest === "") throw new Error(`time: invalid duration "${s}"`);
  let total = 0;
  const part = /^([0-9]*(?:\.[0-9]*)?)(ns|us|µs|μs|ms|s|m|h)/;
  while (rest.length > 0) {
    const m = part.exec(rest);
    if (m === null || m[1] === "" || m[1] === ".") {
      if (/^[0-9.]+$/.test(rest)) throw new Error(`time: missing unit in duration "${s}"`);
      throw new Error(`time: invalid duration "${s}"`);
    }
    total += Number(m[1]) * DURATION_UNIT_MS[m[2]!]!;
    rest = rest.slice(m[0].length);
  }
  return sign * total;
}

/**
 * etcd's types.NewURLs: comma-separated URLs with scheme http/https/unix/unixs, a host:port, no
 * path; returned sorted as etcd sorts them.
 */
export function parseUrlList(s: string): string[] {
  const urls = s.split(",").map((u) => u.trim());
  for (const u of urls) validateUrl(u);
  return urls.sort();
}

function validateUrl(raw: string): void {
  const schemeEnd = raw.indexOf("://");
  const scheme = schemeEnd === -1 ? "" : raw.slice(0, schemeEnd);
  if (!["http", "https", "unix", "unixs"].includes(scheme)) {
    throw new Error(`URL scheme must be http, https, unix, or unixs: ${raw}`);
  }
  const afterScheme = raw.slice(schemeEnd + 3);
  const slash = afterScheme.search(/[/?#]/);
  const host = slash === -1 ? afterScheme : afterScheme.slice(0, slash);
  const path = slash === -1 ? "" : afterScheme.slice(slash);
  if (!/^(\[[0-9a-fA-F:.]+\]|[^:[\]]*):[0-9]*$/.test(host)) {
    const port = /:([^:\]]*)$/.exec(host);
    if (port !== null && !/^[0-9]*$/.test(port[1]!)) {
      throw new Error(`parse "${raw}": invalid port ":${port[1]}" after host`);
    }
    throw new Error(`URL address does not have the form "host:port": ${raw}`);
  }
  if (path !== "") throw new Error(`URL must not contain a path: ${raw}`);
}
