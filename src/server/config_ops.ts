/**
 * The operations flags (issue 15): corruption checks, --force-new-cluster and lease checkpoints,
 * in their own block so that config.ts only splices them in; and the list of etcd 3.4's flags,
 * so that a real etcd flag etcetera does not take is refused by name (on the command line and as
 * an ETCD_* variable) instead of being taken for a typo or ignored.
 */
import { ConfigError, flagToEnv, parseGoBool, parseGoDurationMs, type FlagSpec } from "./flags.js";

/** What the operations flags configure. Units are in the field names. */
export interface OpsConfig {
  /** --experimental-initial-corrupt-check: compare HashKV with the peers before serving. */
  readonly initialCorruptCheck: boolean;
  /** --experimental-corrupt-check-time: the leader's periodic check (0: off). */
  readonly corruptCheckTimeMs: number;
  /** --force-new-cluster: restart as a one-member cluster from this member's data. */
  readonly forceNewCluster: boolean;
  /** --experimental-enable-lease-checkpoint (on by default here; etcd 3.4: off). */
  readonly leaseCheckpoint: boolean;
  /** --experimental-lease-checkpoint-interval (etcd 3.5's flag; default 5 min). */
  readonly leaseCheckpointIntervalMs: number;
}

const CLUSTERING = "Clustering";
const EXPERIMENTAL = "Experimental feature";

export const OPS_FLAG_SPECS: readonly FlagSpec[] = [
  { group: CLUSTERING, name: "force-new-cluster", kind: "bool", defaultValue: "false", usage: "Force to create a new one-member cluster." },
  { group: EXPERIMENTAL, name: "experimental-initial-corrupt-check", kind: "bool", defaultValue: "false", usage: "Enable to check data corruption before serving any client/peer traffic." },
  { group: EXPERIMENTAL, name: "experimental-corrupt-check-time", kind: "duration", defaultValue: "0s", usage: "Duration of time between cluster corruption check passes." },
  {
    group: EXPERIMENTAL,
    name: "experimental-enable-lease-checkpoint",
    kind: "bool",
    defaultValue: "true",
    usage: "Enable the primary lessor to persist lease remainingTTL through raft, so that a new leader keeps what is left of each lease (etcd's default: false).",
  },
  { group: EXPERIMENTAL, name: "experimental-lease-checkpoint-interval", kind: "duration", defaultValue: "5m", usage: "Duration of time between two lease checkpoints (etcd 3.5's flag)." },
];

export function opsConfig(raw: (name: string) => string): OpsConfig {
  const corruptCheckTimeMs = parseGoDurationMs(raw("experimental-corrupt-check-time"));
  if (corruptCheckTimeMs < 0) throw new ConfigError(`--experimental-corrupt-check-time must not be negative (set to ${raw("experimental-corrupt-check-time")})`, 1);
  const leaseCheckpointIntervalMs = parseGoDurationMs(raw("experimental-lease-checkpoint-interval"));
  if (leaseCheckpointIntervalMs <= 0) {
    throw new ConfigError(`--experimental-lease-checkpoint-interval must be >0 (set to ${raw("experimental-lease-checkpoint-interval")})`, 1);
  }
  return {
    initialCorruptCheck: parseGoBool(raw("experimental-initial-corrupt-check")),
    corruptCheckTimeMs,
    forceNewCluster: parseGoBool(raw("force-new-cluster")),
    leaseCheckpoint: parseGoBool(raw("experimental-enable-lease-checkpoint")),
    leaseCheckpointIntervalMs,
  };
}

/**
 * Every flag of etcd 3.4.23 (`etcd --help`, and the three its usage text leaves out: config-file,
 * enable-grpc-gateway and the deprecated log-output), to tell a real etcd flag from a typo.
 */
export const ETCD_34_FLAGS: readonly string[] = [
  "config-file", "enable-grpc-gateway", "log-output",
  "advertise-client-urls", "auth-token", "auth-token-ttl", "auto-compaction-mode", "auto-compaction-retention", "auto-tls",
  "backend-batch-interval", "backend-batch-limit", "bcrypt-cost", "cert-file", "cipher-suites", "client-cert-allowed-hostname",
  "client-cert-auth", "client-crl-file", "cors", "data-dir", "debug", "discovery", "discovery-fallback", "discovery-proxy",
  "discovery-srv", "discovery-srv-name", "election-timeout", "enable-pprof", "enable-v2", "experimental-backend-bbolt-freelist-type",
  "experimental-compaction-batch-limit", "experimental-corrupt-check-time", "experimental-enable-lease-checkpoint",
  "experimental-enable-v2v3", "experimental-initial-corrupt-check", "experimental-peer-skip-client-san-verification",
  "experimental-warning-apply-duration", "experimental-watch-progress-notify-interval", "force-new-cluster",
  "grpc-keepalive-interval", "grpc-keepalive-min-time", "grpc-keepalive-timeout", "heartbeat-interval", "host-whitelist",
  "initial-advertise-peer-urls", "initial-cluster", "initial-cluster-state", "initial-cluster-token", "initial-election-tick-advance",
  "key-file", "listen-client-urls", "listen-metrics-urls", "listen-peer-urls", "log-level", "log-outputs", "log-package-levels",
  "logger", "max-concurrent-streams", "max-request-bytes", "max-snapshots", "max-txn-ops", "max-wals", "metrics", "name",
  "peer-auto-tls", "peer-cert-allowed-cn", "peer-cert-allowed-hostname", "peer-cert-file", "peer-client-cert-auth", "peer-crl-file",
  "peer-key-file", "peer-trusted-ca-file", "pre-vote", "proxy", "proxy-dial-timeout", "proxy-failure-wait", "proxy-read-timeout",
  "proxy-refresh-interval", "proxy-write-timeout", "quota-backend-bytes", "snapshot-count", "strict-reconfig-check",
  "trusted-ca-file", "wal-dir",
];

/** etcd's other programs, run as `etcd <command> ...` (etcdmain.Main dispatches on the first argument). */
const ETCD_34_COMMANDS: readonly string[] = ["gateway", "grpc-proxy"];

/** `etcd gateway start ...` and `etcd grpc-proxy start ...` are refused by name (etcetera is only a member). */
export function unsupportedCommand(argv: readonly string[]): ConfigError | undefined {
  const first = argv[0];
  if (first === undefined || !ETCD_34_COMMANDS.includes(first)) return undefined;
  return new ConfigError(`'${first}' is an etcd command etcetera does not support (etcetera runs a member only)`, 1);
}

function unsupportedText(name: string): string {
  return `--${name} is an etcd flag etcetera does not support`;
}

/**
 * A real etcd flag that etcetera does not take, on the command line: Go's "flag provided but not
 * defined" becomes a refusal by name (still exit 2, as for an unknown flag).
 */
export function refineUnknownFlag(err: ConfigError): ConfigError {
  const m = /^flag provided but not defined: -(.+)$/.exec(err.message);
  if (m === null || !ETCD_34_FLAGS.includes(m[1]!)) return err;
  return new ConfigError(unsupportedText(m[1]!), 2);
}

/**
 * An ETCD_* variable naming a real etcd flag etcetera does not take is a start-up error (etcd
 * would act on it; ignoring it would run a different configuration than the operator wrote).
 */
export function unsupportedEtcdEnv(env: NodeJS.ProcessEnv, specs: readonly FlagSpec[]): ConfigError | undefined {
  const known = new Set(specs.map((s) => s.name));
  for (const name of ETCD_34_FLAGS) {
    if (known.has(name)) continue;
    const key = flagToEnv(name);
    const value = env[key];
    if (value !== undefined) return new ConfigError(`${key}=${value}: ${unsupportedText(name)}`, 1);
  }
  return undefined;
}
