/**
 * --config-file / ETCD_CONFIG_FILE: etcd's YAML configuration file, read as etcd 3.4 reads it
 * (embed.ConfigFromFile): keys are the flag names, values typed as etcd's config struct types them
 * (booleans, integers, durations in nanoseconds, comma-separated URL strings, lists for
 * log-outputs and cipher-suites), TLS under `client-transport-security` and
 * `peer-transport-security`; other command-line flags and ETCD_* variables are then ignored.
 *
 * The file becomes the command line it stands for, which the flag parser then verifies exactly as
 * it verifies flags (the same refusals, messages and fail-closed TLS checks). Where etcd 3.4 would
 * silently ignore a key (a typo, a flag its file format lacks), the file is refused naming it
 * instead; a key for an etcd feature etcetera lacks is accepted only at the value that asks for
 * nothing (etcd's sample file lists every key at its default).
 */

import { parse as parseYaml } from "yaml";
import { ConfigError, type FlagSpec } from "./flags.js";

/** The TLS sections of etcd's file and the flags their keys stand for. */
const SECURITY_SECTIONS: Readonly<Record<string, Readonly<Record<string, string>>>> = {
  "client-transport-security": { "cert-file": "cert-file", "key-file": "key-file", "client-cert-auth": "client-cert-auth", "trusted-ca-file": "trusted-ca-file", "auto-tls": "auto-tls" },
  "peer-transport-security": {
    "cert-file": "peer-cert-file",
    "key-file": "peer-key-file",
    "client-cert-auth": "peer-client-cert-auth",
    "trusted-ca-file": "peer-trusted-ca-file",
    "auto-tls": "peer-auto-tls",
  },
};

/**
 * Keys of etcd 3.4's file for features etcetera does not have, with the values that ask for
 * nothing (etcd's defaults as its file types them; null, an absent value, always does).
 */
const UNSUPPORTED_AT_REST: Readonly<Record<string, readonly unknown[]>> = {
  discovery: [""],
  "discovery-fallback": ["proxy", ""],
  "discovery-proxy": [""],
  "discovery-srv": [""],
  "discovery-srv-name": [""],
  proxy: ["off", ""],
  "proxy-failure-wait": [5000],
  "proxy-refresh-interval": [30000],
  "proxy-dial-timeout": [1000],
  "proxy-write-timeout": [5000],
  "proxy-read-timeout": [0],
  "log-package-levels": [""],
  "experimental-backend-bbolt-freelist-type": ["array", ""],
  "experimental-enable-v2v3": [""],
  // 3.4's deprecated spelling of log-outputs.
  "log-output": [[], ["default"]],
};

/** Keys whose value etcd's file takes as a list of strings (a comma-separated flag). */
const LIST_KEYS = new Set(["log-outputs", "cipher-suites"]);
/** Flags that make no sense inside the file. */
const NOT_IN_FILE = new Set(["config-file", "version"]);

export interface ConfigFileArgs {
  /** The command line the file stands for. */
  readonly argv: readonly string[];
  /** Keys accepted but without effect (an unsupported feature at rest), to log. */
  readonly notes: readonly string[];
}

/**
 * Translates the text of config file `path` into flags. Throws ConfigError (exit 1, as etcd's
 * "error verifying flags") for YAML it cannot read, a value of the wrong type, or a key it
 * would not act on.
 */
export function configFileArgs(path: string, text: string, specs: readonly FlagSpec[]): ConfigFileArgs {
  const doc = readYaml(text);
  const byName = new Map(specs.map((s) => [s.name, s]));
  const flags = new Map<string, { value: string; key: string }>();
  const notes: string[] = [];
  const set = (flag: string, value: string, key: string): void => {
    const earlier = flags.get(flag);
    if (earlier !== undefined) throw fileError(path, `"${key}" and "${earlier.key}" both set --${flag}`);
    flags.set(flag, { value, key });
  };
  for (const [key, value] of Object.entries(doc)) {
    if (value === null) continue;
    const section = SECURITY_SECTIONS[key];
    if (section !== undefined) {
      for (const [sub, subValue] of Object.entries(sectionOf(key, value))) {
        const flag = section[sub];
        if (flag === undefined) throw fileError(path, `unknown key "${sub}" in "${key}" (etcd 3.4 reads only ${Object.keys(section).join(", ")})`);
        if (subValue === null) continue;
        set(flag, flagValue(`${key}.${sub}`, subValue, byName.get(flag)!), `${key}.${sub}`);
      }
      continue;
    }
    const atRest = UNSUPPORTED_AT_REST[key];
    if (atRest !== undefined && !byName.has(key)) {
      if (!atRest.some((v) => JSON.stringify(v) === JSON.stringify(value))) throw fileError(path, `"${key}" is an etcd setting etcetera does not support (${JSON.stringify(value)})`);
      notes.push(`config file key "${key}" is at its default (${JSON.stringify(value)}); etcetera has no such feature`);
      continue;
    }
    const spec = byName.get(key);
    if (spec === undefined || NOT_IN_FILE.has(key)) throw fileError(path, `unknown key "${key}"`);
    // An empty initial-cluster-state is etcd's "new".
    if (key === "initial-cluster-state" && value === "") continue;
    set(key, flagValue(key, value, spec), key);
  }
  // etcd's file mode keeps the default advertise URL when only the listen URL is given (the
  // command line drops it and then refuses), and serves no JSON gateway unless asked.
  if (flags.has("listen-client-urls") && !flags.has("advertise-client-urls")) set("advertise-client-urls", "http://localhost:2379", "(etcd's file default)");
  if (!flags.has("enable-grpc-gateway")) set("enable-grpc-gateway", "false", "(etcd's file default)");
  return { argv: [...flags].map(([flag, { value }]) => `--${flag}=${value}`), notes };
}

function readYaml(text: string): Record<string, unknown> {
  let doc: unknown;
  try {
    // go-yaml v2 (etcd's ghodss/yaml) reads YAML 1.1: yes/no/on/off are booleans there too.
    doc = parseYaml(text, { version: "1.1", uniqueKeys: true });
  } catch (e) {
    throw new ConfigError(`error converting YAML to JSON: ${(e as Error).message.split("\n")[0]!.replace(/:$/, "")}`, 1);
  }
  if (doc === null || doc === undefined) return {};
  if (typeof doc !== "object" || Array.isArray(doc)) throw new ConfigError(`error unmarshaling JSON: json: cannot unmarshal ${jsonKind(doc)} into Go value of type embed.configYAML`, 1);
  return doc as Record<string, unknown>;
}

function sectionOf(key: string, value: unknown): Record<string, unknown> {
  if (typeof value !== "object" || value === null || Array.isArray(value)) throw typeError(key, value, "embed.securityConfig");
  return value as Record<string, unknown>;
}

/** The flag text for a file value, typed as etcd's config struct types the key. */
function flagValue(key: string, value: unknown, spec: FlagSpec): string {
  if (LIST_KEYS.has(spec.name)) {
    if (!Array.isArray(value) || !value.every((v) => typeof v === "string")) throw typeError(key, value, "[]string");
    return value.join(",");
  }
  switch (spec.kind) {
    case "bool":
      if (typeof value !== "boolean") throw typeError(key, value, "bool");
      return String(value);
    case "uint":
    case "int":
      if (typeof value !== "number" || !Number.isInteger(value) || (spec.kind === "uint" && value < 0)) throw typeError(key, value, spec.kind === "uint" ? "uint" : "int64");
      return String(value);
    case "duration":
      // A Go time.Duration in JSON is an integer count of nanoseconds.
      if (typeof value !== "number" || !Number.isInteger(value)) throw typeError(key, value, "time.Duration");
      return `${value}ns`;
    case "string":
    case "enum":
    case "urls":
      if (typeof value !== "string") throw typeError(key, value, "string");
      return value;
  }
}

function jsonKind(value: unknown): string {
  if (Array.isArray(value)) return "array";
  if (value === null) return "null";
  if (typeof value === "object") return "object";
  return typeof value === "boolean" ? "bool" : typeof value === "number" ? "number" : "string";
}

/** encoding/json's words, as etcd prints them through ghodss/yaml. */
function typeError(key: string, value: unknown, goType: string): ConfigError {
  const what = typeof value === "number" && (goType === "uint" || goType === "int64" || goType === "time.Duration") ? `number ${value}` : jsonKind(value);
  return new ConfigError(`error unmarshaling JSON: while decoding JSON: json: cannot unmarshal ${what} into Go struct field configYAML.${key} of type ${goType}`, 1);
}

function fileError(path: string, what: string): ConfigError {
  return new ConfigError(`config file ${path}: ${what}`, 1);
}
