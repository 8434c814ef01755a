/**
 * The member's configuration from etcd's flags (and their ETCD_* environment variables), with
 * etcd 3.4/3.5's defaults, validation rules and error texts.
 *
 * `parseConfig` is pure: it reads only its arguments, and returns warnings instead of logging
 * them (the logger is configured from the result). The entry point turns a ConfigError into
 * etcd's output and exit code with `configErrorText`.
 */
import { readFileSync } from "node:fs";
import * as path from "node:path";
import { checkCorsFlag } from "./config_cors.js";
import {
  ConfigError,
  type FlagSpec,
  flagToEnv,
  parseFlags,
  parseGoBool,
  parseGoDurationMs,
  parseGoInt,
  parseGoUint,
  parseUrlList,
} from "./flags.js";
import { securitySpecsBesides, unsupportedSecurityFlag } from "./tls/flags.js";
import { hasServingCert, tlsAskedWithoutTlsUrl, type TlsConfig, tlsConfigFromFlags } from "./tls/config.js";
import { tlsUrlWithoutCert } from "./tls/url_check.js";
import { OPS_FLAG_SPECS, opsConfig, refineUnknownFlag, unsupportedCommand, unsupportedEtcdEnv, type OpsConfig } from "./config_ops.js";
import { authConfig, type AuthConfig } from "./config_auth.js";
import { configFileArgs } from "./config_file.js";

export { ConfigError } from "./flags.js";

export const VERSION = "0.1.0";
/** The etcd API version etcetera implements (what Status reports as the server version). */
export const ETCD_API_VERSION = "3.5.0";

/** etcd's DefaultQuotaBytes (2 GiB), used when --quota-backend-bytes is 0. */
export const DEFAULT_QUOTA_BACKEND_BYTES = 2 * 1024 * 1024 * 1024;
/** etcd's MaxQuotaBytes (8 GiB): larger quotas are allowed but warned about. */
export const MAX_QUOTA_BACKEND_BYTES = 8 * 1024 * 1024 * 1024;
/** etcd's maxElectionMs. */
export const MAX_ELECTION_MS = 50_000;
const MAX_UINT32 = 4294967295;
/** Front ends beyond this gain nothing on any host we know and cost a process each: a larger value is refused. */
const FRONT_ENDS_MAX = 64;

export type LogLevel = "debug" | "info" | "warn" | "error" | "panic" | "fatal";
export const LOG_LEVELS: readonly LogLevel[] = ["debug", "info", "warn", "error", "panic", "fatal"];

export type ClusterState = "new" | "existing";

/** One member of --initial-cluster. */
export interface InitialMember {
  readonly name: string;
  /** Sorted, as etcd sorts URL lists. */
  readonly peerUrls: readonly string[];
}

export type AutoCompaction =
  | { readonly mode: "periodic"; readonly retentionMs: number }
  | { readonly mode: "revision"; readonly retentionRevisions: number };

/** Everything a member needs to start. Units are in the field names. */
export interface ServerConfig {
  /** --name: human-readable member name (default "default"). */
  readonly name: string;
  /** --data-dir (default `${name}.etcd`). */
  readonly dataDir: string;
  /** Where the WAL lives: --wal-dir, or `${dataDir}/member/wal` when not set. */
  readonly walDir: string;
  /** True when --wal-dir was given (the WAL is outside the data dir). */
  readonly dedicatedWalDir: boolean;
  /** Directory for snapshot files: `${dataDir}/member/snap`. */
  readonly snapDir: string;

  readonly listenClientUrls: readonly string[];
  readonly advertiseClientUrls: readonly string[];
  readonly listenPeerUrls: readonly string[];
  readonly initialAdvertisePeerUrls: readonly string[];
  readonly listenMetricsUrls: readonly string[];
  /** --metrics: "extensive" adds histogram metrics. */
  readonly metricsLevel: "basic" | "extensive";
  /** --enable-pprof: CPU profiles and heap snapshots under /debug/pprof/ (src/server/pprof.ts). */
  readonly enablePprof: boolean;

  /** --initial-cluster (or --peers), in the order given; names unique. */
  readonly initialCluster: readonly InitialMember[];
  /** The same as the string etcd logs (`n1=http://...,n2=...`). */
  readonly initialClusterText: string;
  readonly initialClusterState: ClusterState;
  readonly initialClusterToken: string;

  /** Applied entries between two snapshots (--snapshot-count). */
  readonly snapshotCount: number;
  /** Raft tick (--heartbeat-interval). */
  readonly heartbeatMs: number;
  /** Election timeout (--election-timeout); ticks = electionMs / heartbeatMs. */
  readonly electionMs: number;
  /** Backend size that raises NOSPACE; null when the quota is disabled (a negative flag). */
  readonly quotaBackendBytes: number | null;
  readonly maxRequestBytes: number;
  readonly maxTxnOps: number;
  /** null when --auto-compaction-retention is 0 (disabled). */
  readonly autoCompaction: AutoCompaction | null;
  readonly maxSnapshots: number;
  readonly maxWals: number;
  readonly maxConcurrentStreams: number;
  /** --cors: the origins the client port's CORS headers allow ("*" or empty: all). */
  readonly cors: string;
  /** --host-whitelist: the Host names plaintext HTTP requests may carry ("*" or empty: all). */
  readonly hostWhitelist: string;
  /** --enable-grpc-gateway: the JSON gateway (/v3/...) on the client port; off in a config file unless set, as in etcd. */
  readonly enableGrpcGateway: boolean;
  /** --config-file or ETCD_CONFIG_FILE: the file the settings came from (null: flags and environment). */
  readonly configFile: string | null;
  /** The flags the config file stood for when it was read (null without a file): what a front end forked later starts from. */
  readonly fileArgv: readonly string[] | null;

  /**
   * The level the logger runs at: --log-level, or debug when the deprecated --debug is set with
   * --logger=capnslog (etcd 3.4 sets capnslog's global level from --debug, and zap's from
   * --log-level alone).
   */
  readonly logLevel: LogLevel;
  /** --debug (deprecated in etcd 3.4): see logLevel. */
  readonly debug: boolean;
  /** etcd's stderr lines about deprecated logging flags (--debug, --logger=capnslog), printed before the first log line. */
  readonly loggingNotices: readonly string[];
  /** "zap" (JSON lines, etcd 3.5's default and etcetera's) or "capnslog" (etcd 3.4's text lines). */
  readonly logger: "zap" | "capnslog";
  /** --log-outputs: "default", "stdout", "stderr" or file paths. */
  readonly logOutputs: readonly string[];

  readonly preVote: boolean;
  readonly strictReconfigCheck: boolean;
  readonly initialElectionTickAdvance: boolean;
  readonly grpcKeepaliveMinTimeMs: number;
  readonly grpcKeepaliveIntervalMs: number;
  readonly grpcKeepaliveTimeoutMs: number;
  readonly watchProgressNotifyIntervalMs: number;
  readonly compactionBatchLimit: number;
  /** --experimental-warning-apply-duration in ms: an apply or a range that takes longer is logged ("took too long"). */
  readonly warningApplyDurationMs: number;
  /** --backend-batch-interval in ms; undefined: etcd's default (100 ms). */
  readonly backendBatchIntervalMs: number | undefined;
  /** --backend-batch-limit; undefined: etcd's default (10,000 writes). */
  readonly backendBatchLimit: number | undefined;
  /** Front-end processes that own the client connections (--experimental-front-ends; 0: none, today's one process). */
  readonly frontEnds: number;
  /** Entries kept in the raft log behind a snapshot for slow followers (--experimental-snapshot-catchup-entries). */
  readonly snapshotCatchUpEntries: number;

  /** Corruption checks, --force-new-cluster, lease checkpoints (config_ops.ts). */
  readonly ops: OpsConfig;
  /** Client and peer TLS (src/server/tls/config.ts). */
  readonly tls: TlsConfig;
  /** --auth-token, --bcrypt-cost, --auth-token-ttl (config_auth.ts). */
  readonly auth: AuthConfig;

  /** --version was given: print `versionText()` and exit 0. */
  readonly printVersion: boolean;
  /** -h/--help was given: print `usageText()` and exit 0 (other fields are defaults). */
  readonly printHelp: boolean;
  /** Findings to log at warn level once the logger exists. */
  readonly warnings: readonly string[];
}

const MEMBER = "Member";
const CLUSTERING = "Clustering";
const LOGGING = "Logging";
const MONITORING = "Profiling and Monitoring";
const EXPERIMENTAL = "Experimental feature";

/** Every flag etcetera accepts, in --help order. */
export const FLAG_SPECS: readonly FlagSpec[] = [
  { group: MEMBER, name: "config-file", kind: "string", defaultValue: "", usage: "Path to the server configuration file. Note that if a configuration file is provided, other command line flags and environment variables will be ignored." },
  { group: MEMBER, name: "name", kind: "string", defaultValue: "default", usage: "Human-readable name for this member." },
  { group: MEMBER, name: "data-dir", kind: "string", defaultValue: "", defaultText: "${name}.etcd", usage: "Path to the data directory." },
  { group: MEMBER, name: "wal-dir", kind: "string", defaultValue: "", usage: "Path to the dedicated wal directory." },
  { group: MEMBER, name: "snapshot-count", kind: "uint", defaultValue: "100000", usage: "Number of committed transactions to trigger a snapshot to disk." },
  { group: MEMBER, name: "heartbeat-interval", kind: "uint", defaultValue: "100", usage: "Time (in milliseconds) of a heartbeat interval." },
  { group: MEMBER, name: "election-timeout", kind: "uint", defaultValue: "1000", usage: "Time (in milliseconds) for an election to timeout. See tuning documentation for details." },
  { group: MEMBER, name: "initial-election-tick-advance", kind: "bool", defaultValue: "true", usage: "Whether to fast-forward initial election ticks on boot for faster election." },
  { group: MEMBER, name: "listen-peer-urls", kind: "urls", defaultValue: "http://localhost:2380", usage: "List of URLs to listen on for peer traffic." },
  { group: MEMBER, name: "listen-client-urls", kind: "urls", defaultValue: "http://localhost:2379", usage: "List of URLs to listen on for client traffic." },
  { group: MEMBER, name: "max-snapshots", kind: "uint", defaultValue: "5", usage: "Maximum number of snapshot files to retain (0 is unlimited)." },
  { group: MEMBER, name: "max-wals", kind: "uint", defaultValue: "5", usage: "Maximum number of wal files to retain (0 is unlimited)." },
  { group: MEMBER, name: "quota-backend-bytes", kind: "int", defaultValue: "0", usage: "Raise alarms when backend size exceeds the given quota (0 defaults to low space quota)." },
  { group: MEMBER, name: "backend-batch-interval", kind: "duration", defaultValue: "0", defaultText: "", usage: "BackendBatchInterval is the maximum time before commit the backend transaction." },
  { group: MEMBER, name: "backend-batch-limit", kind: "int", defaultValue: "0", usage: "BackendBatchLimit is the maximum operations before commit the backend transaction." },
  { group: MEMBER, name: "max-txn-ops", kind: "uint", defaultValue: "128", usage: "Maximum number of operations permitted in a transaction." },
  { group: MEMBER, name: "max-request-bytes", kind: "uint", defaultValue: "1572864", usage: "Maximum client request size in bytes the server will accept." },
  { group: MEMBER, name: "max-concurrent-streams", kind: "uint", defaultValue: String(MAX_UINT32), defaultText: "math.MaxUint32", max: MAX_UINT32, usage: "Maximum concurrent streams that each client can open at a time." },
  { group: MEMBER, name: "grpc-keepalive-min-time", kind: "duration", defaultValue: "5s", usage: "Minimum duration interval that a client should wait before pinging server." },
  { group: MEMBER, name: "grpc-keepalive-interval", kind: "duration", defaultValue: "2h", usage: "Frequency duration of server-to-client ping to check if a connection is alive (0 to disable)." },
  { group: MEMBER, name: "grpc-keepalive-timeout", kind: "duration", defaultValue: "20s", usage: "Additional duration of wait before closing a non-responsive connection (0 to disable)." },

  { group: CLUSTERING, name: "initial-advertise-peer-urls", kind: "urls", defaultValue: "http://localhost:2380", usage: "List of this member's peer URLs to advertise to the rest of the cluster." },
  { group: CLUSTERING, name: "initial-cluster", kind: "string", defaultValue: "", defaultText: "default=http://localhost:2380", usage: "Initial cluster configuration for bootstrapping." },
  { group: CLUSTERING, name: "peers", kind: "string", defaultValue: "", usage: "etcetera's short form of --initial-cluster (name=url,...); also supplies this member's peer URLs when --initial-advertise-peer-urls and --listen-peer-urls are not set." },
  { group: CLUSTERING, name: "initial-cluster-state", kind: "enum", choices: ["new", "existing"], defaultValue: "new", usage: "Initial cluster state ('new' or 'existing')." },
  { group: CLUSTERING, name: "initial-cluster-token", kind: "string", defaultValue: "etcd-cluster", usage: "Initial cluster token for the etcd cluster during bootstrap. Specifying this can protect you from unintended cross-cluster interaction when running multiple clusters." },
  { group: CLUSTERING, name: "advertise-client-urls", kind: "urls", defaultValue: "http://localhost:2379", usage: "List of this member's client URLs to advertise to the public." },
  { group: CLUSTERING, name: "strict-reconfig-check", kind: "bool", defaultValue: "true", usage: "Reject reconfiguration requests that would cause quorum loss." },
  { group: CLUSTERING, name: "pre-vote", kind: "bool", defaultValue: "true", usage: "Enable to run an additional Raft election phase." },
  { group: CLUSTERING, name: "auto-compaction-retention", kind: "string", defaultValue: "0", usage: "Auto compaction retention length. 0 means disable auto compaction." },
  { group: CLUSTERING, name: "auto-compaction-mode", kind: "string", defaultValue: "periodic", usage: "Interpret 'auto-compaction-retention' one of: periodic|revision. 'periodic' for duration based retention, defaulting to hours if no time unit is provided (e.g. '5m'). 'revision' for revision number based retention." },
  { group: CLUSTERING, name: "enable-v2", kind: "bool", defaultValue: "false", usage: "Accept etcd V2 client requests (not supported by etcetera; must stay false)." },

  { group: MONITORING, name: "listen-metrics-urls", kind: "string", defaultValue: "", usage: "List of URLs to listen on for the metrics and health endpoints." },
  { group: MONITORING, name: "metrics", kind: "enum", choices: ["basic", "extensive"], defaultValue: "basic", usage: "Set level of detail for exported metrics, specify 'extensive' to include histogram metrics." },
  { group: MONITORING, name: "enable-grpc-gateway", kind: "bool", defaultValue: "true", usage: "Enable GRPC gateway (the JSON API under /v3/ on the client port)." },
  { group: MONITORING, name: "enable-pprof", kind: "bool", defaultValue: "false", usage: "Enable runtime profiling data via HTTP server. Address is at client URL + \"/debug/pprof/\"" },

  { group: LOGGING, name: "logger", kind: "string", defaultValue: "zap", usage: "Specify 'zap' for structured logging or 'capnslog'. [WARN] 'capnslog' will be deprecated in v3.5." },
  { group: LOGGING, name: "log-outputs", kind: "string", defaultValue: "default", usage: "Specify 'stdout' or 'stderr' to skip journald logging even when running under systemd, or list of comma separated output targets." },
  { group: LOGGING, name: "log-level", kind: "string", defaultValue: "info", usage: "Configures log level. Only supports debug, info, warn, error, panic, or fatal." },
  { group: LOGGING, name: "debug", kind: "bool", defaultValue: "false", usage: "Enable debug-level logging for etcd. [WARN] Will be deprecated in v3.5. Use '--log-level=debug' instead." },

  { group: EXPERIMENTAL, name: "experimental-compaction-batch-limit", kind: "uint", defaultValue: "1000", usage: "Sets the maximum revisions deleted in each compaction batch." },
  { group: EXPERIMENTAL, name: "experimental-front-ends", kind: "uint", defaultValue: "0", max: FRONT_ENDS_MAX, usage: "etcetera: number of front-end processes serving the client port (0: the member's one process serves it)." },
  { group: EXPERIMENTAL, name: "experimental-snapshot-catchup-entries", kind: "uint", defaultValue: "5000", usage: "Number of entries for a slow follower to catch up after compacting the raft storage entries." },
  { group: EXPERIMENTAL, name: "experimental-watch-progress-notify-interval", kind: "duration", defaultValue: "10m", usage: "Duration of periodical watch progress notification." },
  { group: EXPERIMENTAL, name: "experimental-warning-apply-duration", kind: "duration", defaultValue: "100ms", usage: "Warning is generated if requests take more than this duration." },

  ...OPS_FLAG_SPECS,

  { group: "", name: "version", kind: "bool", defaultValue: "false", usage: "Print the version and exit." },
];

/** The security flags not (yet) defined above: parsed so that they can be refused by name (src/server/tls/flags.ts). */
const FAIL_CLOSED_SPECS: readonly FlagSpec[] = securitySpecsBesides(FLAG_SPECS);
/** What the parser and --help know: FLAG_SPECS, then the security flags. */
const PARSER_SPECS: readonly FlagSpec[] = [...FLAG_SPECS, ...FAIL_CLOSED_SPECS];

/**
 * --backend-batch-interval and --backend-batch-limit as etcd applies them: 0 keeps the backend's
 * default (100 ms, 10,000 writes). A negative limit commits after every write (etcd's batch check,
 * pending >= limit, is then always true); a negative interval, on which etcd panics at start
 * (time.NewTicker), is refused. The backend's timer counts whole milliseconds: a shorter interval
 * commits every millisecond.
 */
function backendBatch(raw: (name: string) => string): { backendBatchIntervalMs: number | undefined; backendBatchLimit: number | undefined } {
  const intervalMs = parseGoDurationMs(raw("backend-batch-interval"));
  if (intervalMs < 0) throw new ConfigError(`--backend-batch-interval must not be negative (set to ${raw("backend-batch-interval")})`, 1);
  const limit = parseGoInt(raw("backend-batch-limit"));
  return {
    backendBatchIntervalMs: intervalMs === 0 ? undefined : Math.max(1, Math.ceil(intervalMs)),
    backendBatchLimit: limit === 0 ? undefined : Math.max(1, limit),
  };
}

/**
 * Parses etcd's flags and ETCD_* variables into a validated ServerConfig. Pure; throws ConfigError
 * (exitCode 2 for unknown/malformed flags, 1 for values that fail etcd's verification).
 */
export function parseConfig(argv: readonly string[], env: NodeJS.ProcessEnv): ServerConfig {
  const command = unsupportedCommand(argv);
  if (command !== undefined) throw command;
  const file = configFileOf(argv, env);
  if (file === undefined) return parseCommandLine(argv, env);
  const translated = configFileArgs(file.path, readConfigFile(file.path), PARSER_SPECS);
  const config = parseCommandLine(translated.argv, {});
  const ignored = file.ignored.length === 0 ? [] : [`ignored with --config-file, as etcd ignores them: ${file.ignored.join(", ")}`];
  return { ...config, configFile: file.path, fileArgv: translated.argv, warnings: [...ignored, ...translated.notes, ...config.warnings] };
}

/**
 * The config file asked for (--config-file, else ETCD_CONFIG_FILE) and what it makes etcd ignore:
 * the other flags given and every other ETCD_* variable. The command line is parsed first all
 * the same, as etcd parses it: an unknown flag is still an error.
 */
function configFileOf(argv: readonly string[], env: NodeJS.ProcessEnv): { path: string; ignored: string[] } | undefined {
  let parsed: ReturnType<typeof parseFlags>;
  try {
    parsed = parseFlags(argv, {}, PARSER_SPECS);
  } catch (e) {
    throw e instanceof ConfigError ? refineUnknownFlag(e) : e;
  }
  // --help and --version answer before any file is read, as etcd's parse does.
  if (parsed.help || parseGoBool(parsed.values.get("version") ?? "false")) return undefined;
  const path = parsed.values.get("config-file") || env[flagToEnv("config-file")] || "";
  if (path === "") return undefined;
  const flags = [...parsed.sources].filter(([name, source]) => source === "flag" && name !== "config-file").map(([name]) => `--${name}`);
  const vars = Object.keys(env).filter((k) => k.startsWith("ETCD_") && k !== flagToEnv("config-file"));
  return { path, ignored: [...flags, ...vars.sort()] };
}

/** The file's text; a file that cannot be read fails as etcd's ioutil.ReadFile does. */
function readConfigFile(path: string): string {
  try {
    return readFileSync(path, "utf8");
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    const why = code === "ENOENT" ? "no such file or directory" : code === "EACCES" ? "permission denied" : code === "EISDIR" ? "is a directory" : (e as Error).message;
    throw new ConfigError(`open ${path}: ${why}`, 1);
  }
}

function parseCommandLine(argv: readonly string[], env: NodeJS.ProcessEnv): ServerConfig {
  let parsed: ReturnType<typeof parseFlags>;
  try {
    parsed = parseFlags(argv, env, PARSER_SPECS);
  } catch (e) {
    throw e instanceof ConfigError ? refineUnknownFlag(e) : e;
  }
  const unsupportedEnv = parsed.help ? undefined : unsupportedEtcdEnv(env, PARSER_SPECS);
  if (unsupportedEnv !== undefined) throw unsupportedEnv;
  const raw = (name: string): string => {
    const v = parsed.values.get(name);
    if (v === undefined) throw new Error(`no flag spec for ${name}`);
    return v;
  };
  const isSet = (name: string): boolean => parsed.sources.get(name) !== "default";
  const warnings = [...parsed.warnings];
  const refused = parsed.help ? undefined : unsupportedSecurityFlag(FAIL_CLOSED_SPECS, raw, (n) => parsed.sources.get(n) ?? "default", flagToEnv);
  if (refused !== undefined) throw new ConfigError(refused, 1);
  try {
    return buildConfig(raw, isSet, parsed.help, warnings);
  } catch (e) {
    if (e instanceof ConfigError) throw e;
    throw new ConfigError((e as Error).message, 1);
  }
}

function buildConfig(
  raw: (name: string) => string,
  isSet: (name: string) => boolean,
  printHelp: boolean,
  warnings: string[],
): ServerConfig {
  const name = raw("name");
  const dataDir = raw("data-dir") !== "" ? raw("data-dir") : `${name}.etcd`;
  if (raw("data-dir") === "" && !printHelp) warnings.push(`no data-dir provided, using default data-dir ./${dataDir}`);
  const walFlag = raw("wal-dir");

  if (isSet("peers") && isSet("initial-cluster")) {
    throw verifyError("--peers and --initial-cluster are the same setting; give only one");
  }
  const peersText = isSet("peers") ? raw("peers") : "";
  const peerMembers = peersText !== "" ? parseInitialCluster(peersText) : null;
  const ownPeerUrls = peerMembers?.find((m) => m.name === name)?.peerUrls;

  // --peers names this member's URLs, so the separate peer URL flags become optional with it.
  const initialAdvertisePeerUrls =
    !isSet("initial-advertise-peer-urls") && ownPeerUrls !== undefined ? [...ownPeerUrls] : parseUrlList(raw("initial-advertise-peer-urls"));
  const listenPeerUrls = !isSet("listen-peer-urls") && ownPeerUrls !== undefined ? [...ownPeerUrls] : parseUrlList(raw("listen-peer-urls"));

  const heartbeatMs = parseGoUint(raw("heartbeat-interval"));
  const electionMs = parseGoUint(raw("election-timeout"));
  verifyTimeouts(heartbeatMs, electionMs);

  // etcd: an explicit --listen-client-urls disables the default advertise URL.
  if (isSet("listen-client-urls") && !isSet("advertise-client-urls")) {
    throw verifyError("--advertise-client-urls is required when --listen-client-urls is set explicitly");
  }
  const autoCompaction = parseAutoCompaction(raw("auto-compaction-mode"), raw("auto-compaction-retention"));

  const logger = raw("logger");
  if (logger !== "zap" && logger !== "capnslog") throw verifyError(`unknown logger option "${logger}"`);
  const logLevel = raw("log-level");
  if (!(LOG_LEVELS as readonly string[]).includes(logLevel)) {
    throw verifyError(`unknown log level "${logLevel}" (only supports debug, info, warn, error, panic, or fatal)`);
  }
  const debug = parseGoBool(raw("debug"));
  if (parseGoBool(raw("enable-v2"))) throw verifyError("--enable-v2 is not supported: etcetera serves only the v3 API");

  const quotaFlag = parseGoInt(raw("quota-backend-bytes"));
  const quotaBackendBytes = quotaFlag < 0 ? null : quotaFlag === 0 ? DEFAULT_QUOTA_BACKEND_BYTES : quotaFlag;
  if (quotaBackendBytes === null) warnings.push("disabling backend quota");
  if (quotaBackendBytes !== null && quotaBackendBytes > MAX_QUOTA_BACKEND_BYTES) {
    warnings.push(`quota exceeds the maximum value: quota-size-bytes=${quotaBackendBytes} quota-maximum-size-bytes=${MAX_QUOTA_BACKEND_BYTES}`);
  }

  const listenClientUrls = parseUrlList(raw("listen-client-urls"));
  const advertiseClientUrls = parseUrlList(raw("advertise-client-urls"));
  const listenMetricsUrls = raw("listen-metrics-urls") === "" ? [] : parseListenMetricsUrls(raw("listen-metrics-urls"));
  const tls = tlsConfigFromFlags(raw);
  const tlsProblem = tlsUrlWithoutCert({ listenPeerUrls, listenClientUrls, listenMetricsUrls, peerHasCert: hasServingCert(tls.peer), clientHasCert: hasServingCert(tls.client) });
  if (tlsProblem !== undefined) throw verifyError(tlsProblem);
  const plaintextProblem = tlsAskedWithoutTlsUrl(tls.client, "client", listenClientUrls) ?? tlsAskedWithoutTlsUrl(tls.peer, "peer", listenPeerUrls);
  if (plaintextProblem !== undefined) throw verifyError(plaintextProblem);
  const initialCluster =
    peerMembers ??
    parseInitialCluster(isSet("initial-cluster") ? raw("initial-cluster") : initialClusterFromName(name, initialAdvertisePeerUrls));
  if (!printHelp) verifyInitialCluster(name, initialCluster, initialAdvertisePeerUrls);

  return {
    name,
    dataDir,
    walDir: walFlag !== "" ? walFlag : path.join(dataDir, "member", "wal"),
    dedicatedWalDir: walFlag !== "",
    snapDir: path.join(dataDir, "member", "snap"),
    listenClientUrls,
    advertiseClientUrls,
    listenPeerUrls,
    initialAdvertisePeerUrls,
    listenMetricsUrls,
    metricsLevel: raw("metrics") as "basic" | "extensive",
    enablePprof: parseGoBool(raw("enable-pprof")),
    initialCluster,
    initialClusterText: formatInitialCluster(initialCluster),
    initialClusterState: raw("initial-cluster-state") as ClusterState,
    initialClusterToken: raw("initial-cluster-token"),
    snapshotCount: parseGoUint(raw("snapshot-count")),
    heartbeatMs,
    electionMs,
    quotaBackendBytes,
    maxRequestBytes: parseGoUint(raw("max-request-bytes")),
    maxTxnOps: parseGoUint(raw("max-txn-ops")),
    autoCompaction,
    maxSnapshots: parseGoUint(raw("max-snapshots")),
    maxWals: parseGoUint(raw("max-wals")),
    maxConcurrentStreams: parseGoUint(raw("max-concurrent-streams")),
    cors: checkCorsFlag(raw("cors")),
    hostWhitelist: raw("host-whitelist"),
    enableGrpcGateway: parseGoBool(raw("enable-grpc-gateway")),
    configFile: null,
    fileArgv: null,
    logLevel: debug && logger === "capnslog" ? "debug" : (logLevel as LogLevel),
    debug,
    loggingNotices: loggingNotices(debug, logLevel, logger),
    logger,
    logOutputs: raw("log-outputs").split(","),
    preVote: parseGoBool(raw("pre-vote")),
    strictReconfigCheck: parseGoBool(raw("strict-reconfig-check")),
    initialElectionTickAdvance: parseGoBool(raw("initial-election-tick-advance")),
    grpcKeepaliveMinTimeMs: parseGoDurationMs(raw("grpc-keepalive-min-time")),
    grpcKeepaliveIntervalMs: parseGoDurationMs(raw("grpc-keepalive-interval")),
    grpcKeepaliveTimeoutMs: parseGoDurationMs(raw("grpc-keepalive-timeout")),
    watchProgressNotifyIntervalMs: parseGoDurationMs(raw("experimental-watch-progress-notify-interval")),
    warningApplyDurationMs: parseGoDurationMs(raw("experimental-warning-apply-duration")),
    compactionBatchLimit: parseGoUint(raw("experimental-compaction-batch-limit")),
    ...backendBatch(raw),
    snapshotCatchUpEntries: parseGoUint(raw("experimental-snapshot-catchup-entries")),
    frontEnds: parseGoUint(raw("experimental-front-ends")),
    ops: opsConfig(raw),
    tls,
    auth: authConfig(raw),
    printVersion: parseGoBool(raw("version")),
    printHelp,
    warnings,
  };
}

function verifyError(message: string): ConfigError {
  return new ConfigError(message, 1);
}

/** etcd's embed.Config.Validate rules for the Raft timing flags. */
function verifyTimeouts(heartbeatMs: number, electionMs: number): void {
  if (heartbeatMs <= 0) throw verifyError(`--heartbeat-interval must be >0 (set to ${heartbeatMs}ms)`);
  if (electionMs <= 0) throw verifyError(`--election-timeout must be >0 (set to ${electionMs}ms)`);
  if (5 * heartbeatMs > electionMs) {
    throw verifyError(`--election-timeout[${electionMs}ms] should be at least as 5 times as --heartbeat-interval[${heartbeatMs}ms]`);
  }
  if (electionMs > MAX_ELECTION_MS) {
    throw verifyError(`--election-timeout[${electionMs}ms] is too long, and should be set less than ${MAX_ELECTION_MS}ms`);
  }
}

/**
 * etcd's rule: an integer retention is hours (periodic) or revisions (revision); otherwise a Go
 * duration. etcd would read "1h" in revision mode as 3.6e12 revisions; we reject it instead.
 */
function parseAutoCompaction(mode: string, retention: string): AutoCompaction | null {
  if (mode !== "periodic" && mode !== "revision") throw verifyError(`unknown auto-compaction-mode "${mode}"`);
  const asInteger = /^[0-9]+$/.test(retention) ? Number(retention) : null;
  if (mode === "revision") {
    if (asInteger === null || !Number.isSafeInteger(asInteger)) {
      throw verifyError(`invalid auto-compaction-retention "${retention}" (revision mode takes a number of revisions)`);
    }
    return asInteger === 0 ? null : { mode, retentionRevisions: asInteger };
  }
  let retentionMs: number;
  if (asInteger !== null) {
    retentionMs = asInteger * 3_600_000;
  } else {
    try {
      retentionMs = parseGoDurationMs(retention);
    } catch (e) {
      throw verifyError(`error parsing CompactionRetention: ${(e as Error).message}`);
    }
  }
  if (retentionMs < 0) throw verifyError(`invalid auto-compaction-retention "${retention}" (must not be negative)`);
  return retentionMs === 0 ? null : { mode, retentionMs };
}

function parseListenMetricsUrls(text: string): string[] {
  try {
    return parseUrlList(text);
  } catch (e) {
    throw new ConfigError(`invalid value "${text}" for flag -listen-metrics-urls: ${(e as Error).message}`, 2);
  }
}

/** etcd's InitialClusterFromName: this member's advertise URLs under its name. */
function initialClusterFromName(name: string, advertisePeerUrls: readonly string[]): string {
  return advertisePeerUrls.map((u) => `${name === "" ? "default" : name}=${u}`).join(",");
}

/**
 * Parses `name=url,name=url` (etcd's types.NewURLsMap: a repeated name adds URLs to that member).
 * Order of first appearance is kept; each member's URLs are sorted.
 */
export function parseInitialCluster(text: string): InitialMember[] {
  const byName = new Map<string, string[]>();
  for (const pair of text.split(",")) {
    const eq = pair.indexOf("=");
    const memberName = decodeURIComponent(eq === -1 ? pair : pair.slice(0, eq));
    const url = eq === -1 ? "" : decodeURIComponent(pair.slice(eq + 1));
    let urls: string[];
    try {
      urls = parseUrlList(url);
    } catch (e) {
      throw verifyError(`error setting up initial cluster: ${(e as Error).message}`);
    }
    const list = byName.get(memberName) ?? [];
    list.push(...urls);
    byName.set(memberName, list);
  }
  return [...byName].map(([name, urls]) => ({ name, peerUrls: urls.sort() }));
}

export function formatInitialCluster(members: readonly InitialMember[]): string {
  return members.flatMap((m) => m.peerUrls.map((u) => `${m.name}=${u}`)).join(",");
}

/** etcd's bootstrap checks: no URL twice, this member listed, and listed with its advertise URLs. */
export function verifyInitialCluster(name: string, members: readonly InitialMember[], advertisePeerUrls: readonly string[]): void {
  const text = formatInitialCluster(members);
  const seen = new Set<string>();
  for (const m of members) {
    for (const u of m.peerUrls) {
      if (seen.has(u)) throw verifyError(`initial cluster ${text} has duplicate url`);
      seen.add(u);
    }
  }
  const own = members.find((m) => m.name === name);
  if (own === undefined) throw verifyError(`couldn't find local name "${name}" in the initial cluster configuration`);
  const advertised = [...advertisePeerUrls].sort();
  const listed = [...own.peerUrls].sort();
  const advertisedText = advertised.join(",");
  const quoteList = (l: readonly string[]): string => `[${l.map((u) => JSON.stringify(u)).join(" ")}]`;
  if (advertised.length !== listed.length) {
    throw verifyError(
      `--initial-cluster has ${name}=${listed.join(",")} but missing from --initial-advertise-peer-urls=${advertisedText} (len(${quoteList(advertised)}) != len(${quoteList(listed)}))`,
    );
  }
  for (let i = 0; i < listed.length; i++) {
    if (advertised[i] !== listed[i]) {
      throw verifyError(
        `--initial-cluster has ${name}=${listed.join(",")} but missing from --initial-advertise-peer-urls=${advertisedText} (resolved urls: ${JSON.stringify(advertised[i])} != ${JSON.stringify(listed[i])})`,
      );
    }
  }
}

/**
 * What the entry point prints for a ConfigError: exit-2 errors are followed by the usage summary
 * (Go's flag package prints usage); exit-1 errors are wrapped as etcdmain wraps them.
 */
export function configErrorText(err: ConfigError): string {
  if (err.exitCode === 2) return `${err.message}\n${USAGE_HEADER}`;
  return `error verifying flags, ${err.message}. See 'etcd --help'.\n`;
}

const USAGE_HEADER = `Usage:

  etcd [flags]
    Start an etcd server.

  etcd --version
    Show the version of etcd.

  etcd -h | --help
    Show the help information about etcd.

Every flag can also be set with its ETCD_* environment variable (--data-dir: ETCD_DATA_DIR);
a flag on the command line wins over the environment.
`;

/** The --help text: every flag, grouped like etcd's, with its default. */
export function usageText(): string {
  const lines: string[] = [USAGE_HEADER];
  let group: string | undefined;
  for (const spec of PARSER_SPECS) {
    if (spec.group === "") continue;
    if (spec.group !== group) {
      group = spec.group;
      lines.push(`\n${group}:`);
    }
    const shown = spec.defaultText ?? spec.defaultValue;
    const choices = spec.choices !== undefined ? ` (${spec.choices.join("|")})` : "";
    lines.push(`  --${spec.name} '${shown}'${choices}`, `    ${spec.usage}`);
  }
  lines.push("", "  --version", "    Print the version and exit.", "  -h | --help", "    Show this help.", "");
  return lines.join("\n");
}

export function versionText(): string {
  return `etcetera Version: ${VERSION}\netcd API Version: ${ETCD_API_VERSION}\nNode Version: ${process.version}\n`;
}

export interface CommandLineOutput {
  stdout(text: string): void;
  stderr(text: string): void;
}

/**
 * The entry point's first step: parse, then print help, version or the error as etcd does.
 * Returns the config to serve with, or the exit code to exit with (0 after help/version,
 * 2 for unknown/malformed flags, 1 for values that fail verification).
 */
export function resolveCommandLine(argv: readonly string[], env: NodeJS.ProcessEnv, out: CommandLineOutput): ServerConfig | { exitCode: number } {
  let config: ServerConfig;
  try {
    config = parseConfig(argv, env);
  } catch (e) {
    if (!(e instanceof ConfigError)) throw e;
    out.stderr(configErrorText(e));
    return { exitCode: e.exitCode };
  }
  if (config.printHelp) {
    out.stdout(usageText());
    return { exitCode: 0 };
  }
  if (config.printVersion) {
    out.stdout(versionText());
    return { exitCode: 0 };
  }
  return config;
}

/**
 * What etcd 3.4 prints to stderr about its deprecated logging flags before its first log line
 * (embed's setupLogging), in its order and words.
 */
function loggingNotices(debug: boolean, logLevelFlag: string, logger: "zap" | "capnslog"): string[] {
  const notices: string[] = [];
  if (debug) notices.push("[WARNING] Deprecated '--debug' flag is set to true (use '--log-level=debug' instead");
  if (debug && logLevelFlag !== "debug") {
    notices.push(`[WARNING] Deprecated '--debug' flag is set to true with inconsistent '--log-level=${logLevelFlag}' flag`);
  }
  if (logger === "capnslog") notices.push("[WARNING] Deprecated '--logger=capnslog' flag is set; use '--logger=zap' flag instead");
  return notices;
}
