import { describe, expect, it } from "vitest";
import {
  ConfigError,
  configErrorText,
  DEFAULT_QUOTA_BACKEND_BYTES,
  FLAG_SPECS,
  parseConfig,
  type ServerConfig,
  usageText,
  versionText,
} from "../../src/server/config.js";
import { flagToEnv, parseGoDurationMs, parseGoUint, parseUrlList } from "../../src/server/flags.js";

const parse = (argv: string[], env: NodeJS.ProcessEnv = {}): ServerConfig => parseConfig(argv, env);

function errorOf(argv: string[], env: NodeJS.ProcessEnv = {}): ConfigError {
  try {
    parseConfig(argv, env);
  } catch (e) {
    expect(e).toBeInstanceOf(ConfigError);
    return e as ConfigError;
  }
  throw new Error(`expected ${argv.join(" ")} to fail`);
}

/** Flags that make a valid three-member config for n1. */
const THREE = ["--name", "n1", "--peers", "n1=http://127.0.0.1:2380,n2=http://127.0.0.1:22380,n3=http://127.0.0.1:32380"];

describe("defaults (etcd 3.4/3.5)", () => {
  it("with no flags is a single-member cluster on localhost:2379/2380", () => {
    const c = parse([]);
    expect(c.name).toBe("default");
    expect(c.dataDir).toBe("default.etcd");
    expect(c.walDir).toBe("default.etcd/member/wal");
    expect(c.dedicatedWalDir).toBe(false);
    expect(c.snapDir).toBe("default.etcd/member/snap");
    expect(c.listenClientUrls).toEqual(["http://localhost:2379"]);
    expect(c.advertiseClientUrls).toEqual(["http://localhost:2379"]);
    expect(c.listenPeerUrls).toEqual(["http://localhost:2380"]);
    expect(c.initialAdvertisePeerUrls).toEqual(["http://localhost:2380"]);
    expect(c.initialCluster).toEqual([{ name: "default", peerUrls: ["http://localhost:2380"] }]);
    expect(c.initialClusterText).toBe("default=http://localhost:2380");
    expect(c.initialClusterState).toBe("new");
    expect(c.initialClusterToken).toBe("etcd-cluster");
    expect(c.snapshotCount).toBe(100000);
    expect(c.heartbeatMs).toBe(100);
    expect(c.electionMs).toBe(1000);
    expect(c.quotaBackendBytes).toBe(2 * 1024 * 1024 * 1024);
    expect(c.maxRequestBytes).toBe(1572864);
    expect(c.maxTxnOps).toBe(128);
    expect(c.autoCompaction).toBeNull();
    expect(c.listenMetricsUrls).toEqual([]);
    expect(c.metricsLevel).toBe("basic");
    expect(c.preVote).toBe(true);
    expect(c.strictReconfigCheck).toBe(true);
    expect(c.logLevel).toBe("info");
    expect(c.logger).toBe("zap");
    expect(c.maxSnapshots).toBe(5);
    expect(c.maxWals).toBe(5);
    expect(c.maxConcurrentStreams).toBe(4294967295);
    expect(c.grpcKeepaliveMinTimeMs).toBe(5000);
    expect(c.grpcKeepaliveIntervalMs).toBe(2 * 3600 * 1000);
    expect(c.grpcKeepaliveTimeoutMs).toBe(20000);
    expect(c.watchProgressNotifyIntervalMs).toBe(600000);
    expect(c.compactionBatchLimit).toBe(1000);
    expect(c.printHelp).toBe(false);
    expect(c.printVersion).toBe(false);
    expect(c.warnings).toContain("no data-dir provided, using default data-dir ./default.etcd");
  });

  it("derives data dir and initial cluster from the name", () => {
    const c = parse(["--name", "infra1"]);
    expect(c.dataDir).toBe("infra1.etcd");
    expect(c.initialClusterText).toBe("infra1=http://localhost:2380");
  });

  it("builds the initial cluster from every advertised peer URL", () => {
    const c = parse(["--name", "m", "--initial-advertise-peer-urls", "http://127.0.0.1:2480,http://10.0.0.1:2480"]);
    expect(c.initialClusterText).toBe("m=http://10.0.0.1:2480,m=http://127.0.0.1:2480");
    expect(c.initialCluster).toEqual([{ name: "m", peerUrls: ["http://10.0.0.1:2480", "http://127.0.0.1:2480"] }]);
  });
});

describe("every flag", () => {
  const cases: Array<[string[], (c: ServerConfig) => unknown, unknown]> = [
    [["--data-dir", "/var/lib/x"], (c) => [c.dataDir, c.walDir, c.snapDir], ["/var/lib/x", "/var/lib/x/member/wal", "/var/lib/x/member/snap"]],
    [["--wal-dir", "/fast/wal"], (c) => [c.walDir, c.dedicatedWalDir], ["/fast/wal", true]],
    [["--listen-client-urls", "http://0.0.0.0:2379,http://127.0.0.1:4001", "--advertise-client-urls", "http://n1:2379"], (c) => [c.listenClientUrls, c.advertiseClientUrls], [["http://0.0.0.0:2379", "http://127.0.0.1:4001"], ["http://n1:2379"]]],
    [["--listen-peer-urls", "http://0.0.0.0:2380"], (c) => c.listenPeerUrls, ["http://0.0.0.0:2380"]],
    [["--initial-cluster-state", "existing"], (c) => c.initialClusterState, "existing"],
    [["--initial-cluster-token", "tok"], (c) => c.initialClusterToken, "tok"],
    [["--snapshot-count", "5000"], (c) => c.snapshotCount, 5000],
    [["--heartbeat-interval", "50", "--election-timeout", "250"], (c) => [c.heartbeatMs, c.electionMs], [50, 250]],
    [["--quota-backend-bytes", "1048576"], (c) => c.quotaBackendBytes, 1048576],
    [["--quota-backend-bytes", "0"], (c) => c.quotaBackendBytes, DEFAULT_QUOTA_BACKEND_BYTES],
    [["--quota-backend-bytes", "-1"], (c) => [c.quotaBackendBytes, c.warnings.includes("disabling backend quota")], [null, true]],
    [["--max-request-bytes", "10485760"], (c) => c.maxRequestBytes, 10485760],
    [["--max-txn-ops", "1024"], (c) => c.maxTxnOps, 1024],
    [["--auto-compaction-retention", "1"], (c) => c.autoCompaction, { mode: "periodic", retentionMs: 3600000 }],
    [["--auto-compaction-mode", "periodic", "--auto-compaction-retention", "5m"], (c) => c.autoCompaction, { mode: "periodic", retentionMs: 300000 }],
    [["--auto-compaction-mode", "periodic", "--auto-compaction-retention", "1h30m"], (c) => c.autoCompaction, { mode: "periodic", retentionMs: 5400000 }],
    [["--auto-compaction-mode", "revision", "--auto-compaction-retention", "1000"], (c) => c.autoCompaction, { mode: "revision", retentionRevisions: 1000 }],
    [["--auto-compaction-mode", "revision"], (c) => c.autoCompaction, null],
    [["--listen-metrics-urls", "http://127.0.0.1:2381"], (c) => c.listenMetricsUrls, ["http://127.0.0.1:2381"]],
    [["--log-level", "debug"], (c) => c.logLevel, "debug"],
    [["--log-level", "panic"], (c) => c.logLevel, "panic"],
    [["--logger", "capnslog"], (c) => c.logger, "capnslog"],
    // etcd 3.4's deprecated --debug raises capnslog's level; zap's stays at --log-level.
    [["--debug"], (c) => [c.debug, c.logLevel], [true, "info"]],
    [["--debug", "--logger=capnslog"], (c) => [c.debug, c.logLevel], [true, "debug"]],
    [["--debug=false", "--logger=capnslog"], (c) => [c.debug, c.logLevel], [false, "info"]],
    [["--debug", "--log-level=warn"], (c) => c.logLevel, "warn"],
    [["--log-outputs", "stderr"], (c) => c.logOutputs, ["stderr"]],
    [["--max-snapshots", "0"], (c) => c.maxSnapshots, 0],
    [["--max-wals", "10"], (c) => c.maxWals, 10],
    [["--max-concurrent-streams", "100"], (c) => c.maxConcurrentStreams, 100],
    [[], (c) => c.frontEnds, 0],
    [["--experimental-front-ends=2"], (c) => c.frontEnds, 2],
    [["--pre-vote=false"], (c) => c.preVote, false],
    [["--strict-reconfig-check=false"], (c) => c.strictReconfigCheck, false],
    [["--initial-election-tick-advance=false"], (c) => c.initialElectionTickAdvance, false],
    [["--grpc-keepalive-min-time", "1s", "--grpc-keepalive-interval", "0", "--grpc-keepalive-timeout", "500ms"], (c) => [c.grpcKeepaliveMinTimeMs, c.grpcKeepaliveIntervalMs, c.grpcKeepaliveTimeoutMs], [1000, 0, 500]],
    [["--experimental-watch-progress-notify-interval", "1s"], (c) => c.watchProgressNotifyIntervalMs, 1000],
    [["--experimental-compaction-batch-limit", "10"], (c) => c.compactionBatchLimit, 10],
    [[], (c) => [c.backendBatchIntervalMs, c.backendBatchLimit], [undefined, undefined]],
    [["--backend-batch-interval", "0", "--backend-batch-limit", "0"], (c) => [c.backendBatchIntervalMs, c.backendBatchLimit], [undefined, undefined]],
    [["--backend-batch-interval", "250ms", "--backend-batch-limit", "500"], (c) => [c.backendBatchIntervalMs, c.backendBatchLimit], [250, 500]],
    [["--backend-batch-interval", "100us"], (c) => c.backendBatchIntervalMs, 1],
    [["--backend-batch-limit=-5"], (c) => c.backendBatchLimit, 1],
    [["--metrics", "extensive"], (c) => c.metricsLevel, "extensive"],
    [["--enable-pprof"], (c) => c.enablePprof, true],
    [["--version"], (c) => c.printVersion, true],
  ];
  it.each(cases)("%j", (argv, pick, expected) => {
    expect(pick(parse(argv))).toEqual(expected);
  });

  it("accepts --flag=value, --flag value, -flag value and -flag=value alike", () => {
    for (const argv of [["--name=x"], ["--name", "x"], ["-name", "x"], ["-name=x"]]) {
      expect(parse(argv).name).toBe("x");
    }
  });

  it("booleans: bare means true, =value parses Go's words, and a separate word is not a value", () => {
    expect(parse(["--pre-vote"]).preVote).toBe(true);
    for (const [word, value] of [["1", true], ["t", true], ["TRUE", true], ["True", true], ["0", false], ["F", false], ["false", false]] as const) {
      expect(parse([`--pre-vote=${word}`]).preVote).toBe(value);
    }
    const e = errorOf(["--pre-vote", "true"]);
    expect(e.message).toBe("'true' is not a valid flag");
    expect(e.exitCode).toBe(1);
  });

  it("the last occurrence of a flag wins, as with Go's flag package", () => {
    expect(parse(["--name", "a", "--name", "b"]).name).toBe("b");
  });

  it("a value may start with a dash", () => {
    expect(parse(["--data-dir", "-weird"]).dataDir).toBe("-weird");
  });

  it("parses integers as Go does (base prefixes, underscores)", () => {
    expect(parse(["--snapshot-count", "0x10"]).snapshotCount).toBe(16);
    expect(parse(["--snapshot-count", "1_000"]).snapshotCount).toBe(1000);
    expect(parseGoUint("0b101")).toBe(5);
    expect(parseGoUint("0o17")).toBe(15);
    expect(() => parseGoUint("99999999999999999999")).toThrow("value out of range");
  });

  it("--peers is the initial cluster and supplies this member's peer URLs", () => {
    const c = parse(THREE);
    expect(c.initialCluster.map((m) => m.name)).toEqual(["n1", "n2", "n3"]);
    expect(c.initialClusterText).toBe("n1=http://127.0.0.1:2380,n2=http://127.0.0.1:22380,n3=http://127.0.0.1:32380");
    expect(c.initialAdvertisePeerUrls).toEqual(["http://127.0.0.1:2380"]);
    expect(c.listenPeerUrls).toEqual(["http://127.0.0.1:2380"]);
    const explicit = parse([...THREE, "--listen-peer-urls", "http://0.0.0.0:2380"]);
    expect(explicit.listenPeerUrls).toEqual(["http://0.0.0.0:2380"]);
    expect(explicit.initialAdvertisePeerUrls).toEqual(["http://127.0.0.1:2380"]);
  });

  it("--initial-cluster with a name repeated collects its URLs", () => {
    const c = parse(["--name", "a", "--initial-advertise-peer-urls", "http://h1:2380,http://h2:2380", "--initial-cluster", "a=http://h2:2380,b=http://h3:2380,a=http://h1:2380"]);
    expect(c.initialCluster).toEqual([
      { name: "a", peerUrls: ["http://h1:2380", "http://h2:2380"] },
      { name: "b", peerUrls: ["http://h3:2380"] },
    ]);
  });
});

describe("etcd's stderr notices about deprecated logging flags", () => {
  it("--debug, an inconsistent --log-level and --logger=capnslog, in etcd 3.4's order and words", () => {
    expect(parse([]).loggingNotices).toEqual([]);
    expect(parse(["--debug", "--logger=capnslog"]).loggingNotices).toEqual([
      "[WARNING] Deprecated '--debug' flag is set to true (use '--log-level=debug' instead",
      "[WARNING] Deprecated '--debug' flag is set to true with inconsistent '--log-level=info' flag",
      "[WARNING] Deprecated '--logger=capnslog' flag is set; use '--logger=zap' flag instead",
    ]);
    expect(parse(["--debug", "--log-level=debug"]).loggingNotices).toEqual([
      "[WARNING] Deprecated '--debug' flag is set to true (use '--log-level=debug' instead",
    ]);
    expect(parse([], { ETCD_DEBUG: "true", ETCD_LOG_LEVEL: "warn" }).loggingNotices).toEqual([
      "[WARNING] Deprecated '--debug' flag is set to true (use '--log-level=debug' instead",
      "[WARNING] Deprecated '--debug' flag is set to true with inconsistent '--log-level=warn' flag",
    ]);
  });
});

describe("environment variables", () => {
  it("names every flag ETCD_<NAME>", () => {
    expect(flagToEnv("initial-cluster-token")).toBe("ETCD_INITIAL_CLUSTER_TOKEN");
    expect(flagToEnv("data-dir")).toBe("ETCD_DATA_DIR");
  });

  it("reads every flag from its variable", () => {
    const c = parse([], {
      ETCD_NAME: "envy",
      ETCD_DATA_DIR: "/d",
      ETCD_WAL_DIR: "/w",
      ETCD_LISTEN_CLIENT_URLS: "http://127.0.0.1:12379",
      ETCD_ADVERTISE_CLIENT_URLS: "http://127.0.0.1:12379",
      ETCD_LISTEN_PEER_URLS: "http://127.0.0.1:12380",
      ETCD_INITIAL_ADVERTISE_PEER_URLS: "http://127.0.0.1:12380",
      ETCD_INITIAL_CLUSTER: "envy=http://127.0.0.1:12380",
      ETCD_INITIAL_CLUSTER_STATE: "existing",
      ETCD_INITIAL_CLUSTER_TOKEN: "t",
      ETCD_SNAPSHOT_COUNT: "7",
      ETCD_HEARTBEAT_INTERVAL: "10",
      ETCD_ELECTION_TIMEOUT: "60",
      ETCD_QUOTA_BACKEND_BYTES: "1000",
      ETCD_MAX_REQUEST_BYTES: "2000",
      ETCD_MAX_TXN_OPS: "3",
      ETCD_AUTO_COMPACTION_MODE: "revision",
      ETCD_AUTO_COMPACTION_RETENTION: "9",
      ETCD_LISTEN_METRICS_URLS: "http://127.0.0.1:12381",
      ETCD_LOG_LEVEL: "warn",
      ETCD_MAX_SNAPSHOTS: "1",
      ETCD_MAX_WALS: "2",
      ETCD_MAX_CONCURRENT_STREAMS: "8",
      ETCD_LOGGER: "zap",
      ETCD_EXPERIMENTAL_FRONT_ENDS: "3",
      ETCD_BACKEND_BATCH_INTERVAL: "20ms",
      ETCD_BACKEND_BATCH_LIMIT: "7",
    });
    expect(c).toMatchObject({
      frontEnds: 3,
      backendBatchIntervalMs: 20,
      backendBatchLimit: 7,
      name: "envy",
      dataDir: "/d",
      walDir: "/w",
      listenClientUrls: ["http://127.0.0.1:12379"],
      advertiseClientUrls: ["http://127.0.0.1:12379"],
      listenPeerUrls: ["http://127.0.0.1:12380"],
      initialAdvertisePeerUrls: ["http://127.0.0.1:12380"],
      initialClusterText: "envy=http://127.0.0.1:12380",
      initialClusterState: "existing",
      initialClusterToken: "t",
      snapshotCount: 7,
      heartbeatMs: 10,
      electionMs: 60,
      quotaBackendBytes: 1000,
      maxRequestBytes: 2000,
      maxTxnOps: 3,
      autoCompaction: { mode: "revision", retentionRevisions: 9 },
      listenMetricsUrls: ["http://127.0.0.1:12381"],
      logLevel: "warn",
      maxSnapshots: 1,
      maxWals: 2,
      maxConcurrentStreams: 8,
      logger: "zap",
    });
    expect(c.warnings).toEqual([]);
  });

  it("ETCD_PEERS works like --peers", () => {
    expect(parse(["--name", "n2"], { ETCD_PEERS: "n1=http://a:2380,n2=http://b:2380" }).initialAdvertisePeerUrls).toEqual(["http://b:2380"]);
  });

  it("a flag wins over its variable, with etcd's warning", () => {
    const c = parse(["--name", "flag"], { ETCD_NAME: "env" });
    expect(c.name).toBe("flag");
    expect(c.warnings).toContain(
      'conflicting environment variable "ETCD_NAME" is shadowed by corresponding command-line flag (either unset environment variable or disable flag)',
    );
  });

  it("warns about unknown ETCD_ variables and ignores other variables", () => {
    const c = parse([], { ETCD_BOGUS: "1", ETCDCTL_API: "3", PATH: "/bin" });
    expect(c.warnings).toContain("unrecognized environment variable ETCD_BOGUS=1");
    expect(c.warnings.some((w) => w.includes("ETCDCTL_API") || w.includes("PATH"))).toBe(false);
  });

  it("an empty variable counts as unset", () => {
    expect(parse([], { ETCD_NAME: "" }).name).toBe("default");
  });

  it("a malformed variable fails verification with exit 1", () => {
    const e = errorOf([], { ETCD_HEARTBEAT_INTERVAL: "abc" });
    expect(e.exitCode).toBe(1);
    expect(configErrorText(e)).toBe(`error verifying flags, invalid value "abc" for ETCD_HEARTBEAT_INTERVAL: parse error. See 'etcd --help'.\n`);
  });

  it("an explicit ETCD_LISTEN_CLIENT_URLS needs an advertise URL too", () => {
    expect(errorOf([], { ETCD_LISTEN_CLIENT_URLS: "http://0.0.0.0:2379" }).message).toBe(
      "--advertise-client-urls is required when --listen-client-urls is set explicitly",
    );
  });
});

describe("errors as etcd words them", () => {
  const parseErrors: Array<[string[], string]> = [
    [["--bogus-flag"], "flag provided but not defined: -bogus-flag"],
    [["-x=1"], "flag provided but not defined: -x"],
    [["--heartbeat-interval=abc"], 'invalid value "abc" for flag -heartbeat-interval: parse error'],
    [["--snapshot-count", "-1"], 'invalid value "-1" for flag -snapshot-count: parse error'],
    [["--max-request-bytes=abc"], 'invalid value "abc" for flag -max-request-bytes: parse error'],
    [["--heartbeat-interval"], "flag needs an argument: -heartbeat-interval"],
    [["--initial-cluster-state=weird"], 'invalid value "weird" for flag -initial-cluster-state: invalid value'],
    [["--listen-client-urls", "foo"], 'invalid value "foo" for flag -listen-client-urls: URL scheme must be http, https, unix, or unixs: foo'],
    [["--listen-client-urls", "http://localhost:abc"], 'invalid value "http://localhost:abc" for flag -listen-client-urls: parse "http://localhost:abc": invalid port ":abc" after host'],
    [["--listen-peer-urls", "http://localhost"], 'invalid value "http://localhost" for flag -listen-peer-urls: URL address does not have the form "host:port": http://localhost'],
    [["--listen-peer-urls", "http://localhost:2380/x"], 'invalid value "http://localhost:2380/x" for flag -listen-peer-urls: URL must not contain a path: http://localhost:2380/x'],
    [["--listen-metrics-urls", "foo"], 'invalid value "foo" for flag -listen-metrics-urls: URL scheme must be http, https, unix, or unixs: foo'],
    [["--pre-vote=maybe"], 'invalid boolean value "maybe" for -pre-vote: parse error'],
    [["--grpc-keepalive-timeout", "5"], 'invalid value "5" for flag -grpc-keepalive-timeout: time: missing unit in duration "5"'],
    [["---name"], "bad flag syntax: ---name"],
    [["--max-concurrent-streams", "4294967296"], 'invalid value "4294967296" for flag -max-concurrent-streams: value out of range'],
    [["--experimental-front-ends", "65"], 'invalid value "65" for flag -experimental-front-ends: value out of range'],
    [["--experimental-front-ends", "two"], 'invalid value "two" for flag -experimental-front-ends: parse error'],
  ];
  it.each(parseErrors)("%j exits 2: %s", (argv, message) => {
    const e = errorOf(argv);
    expect(e.message).toBe(message);
    expect(e.exitCode).toBe(2);
    expect(configErrorText(e)).toMatch(new RegExp(`^${message.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}\nUsage:`));
  });

  const verifyErrors: Array<[string[], string]> = [
    [["--election-timeout", "100"], "--election-timeout[100ms] should be at least as 5 times as --heartbeat-interval[100ms]"],
    [["--election-timeout", "60000"], "--election-timeout[60000ms] is too long, and should be set less than 50000ms"],
    [["--heartbeat-interval", "0"], "--heartbeat-interval must be >0 (set to 0ms)"],
    [["--election-timeout", "0"], "--election-timeout must be >0 (set to 0ms)"],
    [["--backend-batch-interval=-1s"], "--backend-batch-interval must not be negative (set to -1s)"],
    [["--listen-client-urls", "http://0.0.0.0:2379"], "--advertise-client-urls is required when --listen-client-urls is set explicitly"],
    [["--auto-compaction-mode", "foo"], 'unknown auto-compaction-mode "foo"'],
    [["--auto-compaction-mode", "revision", "--auto-compaction-retention", "1h"], 'invalid auto-compaction-retention "1h" (revision mode takes a number of revisions)'],
    [["--auto-compaction-retention", "soon"], 'error parsing CompactionRetention: time: invalid duration "soon"'],
    [["--logger", "foo"], 'unknown logger option "foo"'],
    [["--log-level", "verbose"], 'unknown log level "verbose" (only supports debug, info, warn, error, panic, or fatal)'],
    [["extra-arg"], "'extra-arg' is not a valid flag"],
    [["gateway", "start", "--endpoints=127.0.0.1:2379"], "'gateway' is an etcd command etcetera does not support (etcetera runs a member only)"],
    [["grpc-proxy", "start"], "'grpc-proxy' is an etcd command etcetera does not support (etcetera runs a member only)"],
    [["--name", "n1", "gateway"], "'gateway' is not a valid flag"],
    [["--name", "n1", "--", "--name"], "'--name' is not a valid flag"],
    [["--name", "n1", "--initial-cluster", "n2=http://localhost:2380"], 'couldn\'t find local name "n1" in the initial cluster configuration'],
    [["--name", "n1", "--initial-cluster", "n1=http://10.0.0.1:2380"], '--initial-cluster has n1=http://10.0.0.1:2380 but missing from --initial-advertise-peer-urls=http://localhost:2380 (resolved urls: "http://localhost:2380" != "http://10.0.0.1:2380")'],
    [
      ["--initial-advertise-peer-urls", "http://127.0.0.1:41390", "--initial-cluster", "default=http://127.0.0.1:41390,default=http://127.0.0.1:41391"],
      '--initial-cluster has default=http://127.0.0.1:41390,http://127.0.0.1:41391 but missing from --initial-advertise-peer-urls=http://127.0.0.1:41390 (len(["http://127.0.0.1:41390"]) != len(["http://127.0.0.1:41390" "http://127.0.0.1:41391"]))',
    ],
    [["--initial-cluster", "default=http://localhost:2380,x=http://localhost:2380"], "initial cluster default=http://localhost:2380,x=http://localhost:2380 has duplicate url"],
    [["--initial-cluster", "garbage"], "error setting up initial cluster: URL scheme must be http, https, unix, or unixs: "],
    [["--name", "n1", "--peers", "n1=http://a:2380", "--initial-cluster", "n1=http://a:2380"], "--peers and --initial-cluster are the same setting; give only one"],
    [["--enable-v2"], "--enable-v2 is not supported: etcetera serves only the v3 API"],
    [["--listen-peer-urls", "https://127.0.0.1:2380"], "cannot listen on TLS for 127.0.0.1:2380: KeyFile and CertFile are not presented"],
    [["--listen-peer-urls", "unixs://127.0.0.1:2380"], "cannot listen on TLS for 127.0.0.1:2380: KeyFile and CertFile are not presented"],
    [
      ["--listen-client-urls", "https://127.0.0.1:2379", "--advertise-client-urls", "https://127.0.0.1:2379"],
      "TLS key/cert (--cert-file, --key-file) must be provided for client url https://127.0.0.1:2379 with HTTPS scheme",
    ],
    [
      ["--listen-client-urls", "unixs://127.0.0.1:2379", "--advertise-client-urls", "https://127.0.0.1:2379"],
      "TLS key/cert (--cert-file, --key-file) must be provided for client url unixs://127.0.0.1:2379 with HTTPS scheme",
    ],
    [["--listen-metrics-urls", "https://127.0.0.1:2381"], "cannot listen on TLS for 127.0.0.1:2381: KeyFile and CertFile are not presented"],
  ];
  it.each(verifyErrors)("%j exits 1: %s", (argv, message) => {
    const e = errorOf(argv);
    expect(e.message).toBe(message);
    expect(e.exitCode).toBe(1);
    expect(configErrorText(e)).toBe(`error verifying flags, ${message}. See 'etcd --help'.\n`);
  });
});

describe("--help and --version", () => {
  it("-h, --help, -help all ask for help, even before a bad flag", () => {
    for (const argv of [["-h"], ["--help"], ["-help"], ["--h"], ["--help", "--bogus"]]) expect(parse(argv).printHelp).toBe(true);
    expect(errorOf(["--bogus", "--help"]).exitCode).toBe(2);
  });

  it("lists every flag with its default", () => {
    const text = usageText();
    for (const spec of FLAG_SPECS) expect(text).toContain(`--${spec.name}`);
    for (const line of [
      "--name 'default'",
      "--data-dir '${name}.etcd'",
      "--snapshot-count '100000'",
      "--heartbeat-interval '100'",
      "--election-timeout '1000'",
      "--listen-peer-urls 'http://localhost:2380'",
      "--listen-client-urls 'http://localhost:2379'",
      "--initial-cluster 'default=http://localhost:2380'",
      "--initial-cluster-state 'new' (new|existing)",
      "--initial-cluster-token 'etcd-cluster'",
      "--max-request-bytes '1572864'",
      "--max-txn-ops '128'",
      "--quota-backend-bytes '0'",
      "--max-snapshots '5'",
      "--max-wals '5'",
      "--auto-compaction-mode 'periodic'",
      "--log-level 'info'",
      "--max-concurrent-streams 'math.MaxUint32'",
      "ETCD_DATA_DIR",
    ]) {
      expect(text).toContain(line);
    }
  });

  it("--version prints etcetera's and the etcd API's versions", () => {
    expect(parse(["--version"]).printVersion).toBe(true);
    expect(versionText()).toMatch(/^etcetera Version: \d+\.\d+\.\d+\netcd API Version: 3\.5\.0\n/);
  });
});

describe("Go value parsers", () => {
  it("durations", () => {
    expect(parseGoDurationMs("1h30m")).toBe(5400000);
    expect(parseGoDurationMs("1.5s")).toBe(1500);
    expect(parseGoDurationMs("250us")).toBe(0.25);
    expect(parseGoDurationMs("-2m")).toBe(-120000);
    expect(parseGoDurationMs("0")).toBe(0);
    expect(() => parseGoDurationMs("")).toThrow(/invalid duration/);
    expect(() => parseGoDurationMs("3x")).toThrow(/invalid duration/);
  });

  it("URL lists are sorted and IPv6 hosts accepted", () => {
    expect(parseUrlList("http://b:1,http://a:1")).toEqual(["http://a:1", "http://b:1"]);
    expect(parseUrlList("http://[::1]:2380")).toEqual(["http://[::1]:2380"]);
    expect(parseUrlList("unix://localhost:0")).toEqual(["unix://localhost:0"]);
  });
});

describe("logger from --log-level", () => {
  async function capture(level: ServerConfig["logLevel"], emit: (l: import("pino").Logger) => void): Promise<Array<Record<string, unknown>>> {
    const { Writable } = await import("node:stream");
    const { createLogger, componentLogger } = await import("../../src/server/logger.js");
    const lines: Array<Record<string, unknown>> = [];
    const destination = new Writable({
      write(chunk: Buffer, _e, cb) {
        for (const l of chunk.toString().split("\n")) if (l !== "") lines.push(JSON.parse(l) as Record<string, unknown>);
        cb();
      },
    });
    const root = createLogger({ level, destination });
    emit(componentLogger(root, "rafthttp"));
    return lines;
  }

  it("writes etcd/zap-shaped JSON lines with the component as caller", async () => {
    const lines = await capture(parse(["--log-level", "info"]).logLevel, (l) => l.info({ "peer-id": "0000000000000002" }, "peer became active"));
    expect(lines).toHaveLength(1);
    expect(Object.keys(lines[0]!)).toEqual(["level", "ts", "caller", "peer-id", "msg"]);
    expect(lines[0]).toMatchObject({ level: "info", caller: "rafthttp", msg: "peer became active" });
    expect(new Date(String(lines[0]!.ts)).toISOString()).toBe(lines[0]!.ts);
  });

  it("honours the level (panic maps to fatal)", async () => {
    const emitAll = (l: import("pino").Logger): void => {
      l.debug("d");
      l.info("i");
      l.warn("w");
      l.error("e");
      l.fatal("f");
    };
    expect((await capture("debug", emitAll)).map((l) => l.msg)).toEqual(["d", "i", "w", "e", "f"]);
    expect((await capture("warn", emitAll)).map((l) => l.level)).toEqual(["warn", "error", "fatal"]);
    expect((await capture("panic", emitAll)).map((l) => l.msg)).toEqual(["f"]);
  });
});

describe("resolveCommandLine (the entry point's first step)", () => {
  async function run(argv: string[], env: NodeJS.ProcessEnv = {}): Promise<{ result: unknown; stdout: string; stderr: string }> {
    const { resolveCommandLine } = await import("../../src/server/config.js");
    let stdout = "";
    let stderr = "";
    const result = resolveCommandLine(argv, env, { stdout: (t) => (stdout += t), stderr: (t) => (stderr += t) });
    return { result, stdout, stderr };
  }

  it("help and version print to stdout and exit 0", async () => {
    const help = await run(["--help"]);
    expect(help.result).toEqual({ exitCode: 0 });
    expect(help.stdout).toContain("--initial-cluster-token");
    const version = await run(["--version"]);
    expect(version.result).toEqual({ exitCode: 0 });
    expect(version.stdout).toMatch(/^etcetera Version/);
  });

  it("errors go to stderr with etcd's exit codes", async () => {
    const unknown = await run(["--nope"]);
    expect(unknown.result).toEqual({ exitCode: 2 });
    expect(unknown.stderr).toMatch(/^flag provided but not defined: -nope\nUsage:/);
    const invalid = await run(["--election-timeout", "10"]);
    expect(invalid.result).toEqual({ exitCode: 1 });
    expect(invalid.stderr).toContain("error verifying flags, --election-timeout[10ms] should be at least as 5 times as --heartbeat-interval[100ms]");
  });

  it("returns the config to serve with otherwise", async () => {
    const ok = await run(["--name", "n9"]);
    expect((ok.result as ServerConfig).name).toBe("n9");
    expect(ok.stdout + ok.stderr).toBe("");
  });
});

describe("logger outputs from --log-outputs", () => {
  it("writes every line to each file output", async () => {
    const { mkdtempSync, readFileSync, rmSync } = await import("node:fs");
    const { tmpdir } = await import("node:os");
    const path = await import("node:path");
    const { createLogger } = await import("../../src/server/logger.js");
    const dir = mkdtempSync(path.join(tmpdir(), "etcetera-log-"));
    try {
      const files = [path.join(dir, "a.log"), path.join(dir, "sub", "b.log")];
      const config = parse(["--log-outputs", files.join(","), "--log-level", "warn"]);
      const logger = createLogger({ level: config.logLevel, outputs: config.logOutputs });
      logger.info("hidden");
      logger.warn({ "member-id": "1" }, "shown");
      for (const f of files) {
        const lines = readFileSync(f, "utf8").trim().split("\n").map((l) => JSON.parse(l) as Record<string, unknown>);
        expect(lines.map((l) => l.msg)).toEqual(["shown"]);
        expect(lines[0]).toMatchObject({ level: "warn", "member-id": "1" });
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
