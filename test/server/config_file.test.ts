/**
 * --config-file / ETCD_CONFIG_FILE (src/server/config_file.ts): etcd 3.4's YAML file read into the
 * same ServerConfig the flags make, typed as etcd types it, with etcd's file-mode defaults, and
 * refused (naming the key) where etcd would silently ignore a key (deviation: config-file-unknown-key-refused).
 * The real binaries read the same files in test/e2e/config_file.test.ts.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { ConfigError, configErrorText, parseConfig, type ServerConfig } from "../../src/server/config.js";

const dir = mkdtempSync(join(tmpdir(), "config-file-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let n = 0;

/** Writes `yaml` to a new file and returns its path. */
function file(yaml: string): string {
  const p = join(dir, `c${n++}.yml`);
  writeFileSync(p, yaml);
  return p;
}

const fromFile = (yaml: string, argv: string[] = [], env: NodeJS.ProcessEnv = {}): ServerConfig => parseConfig(["--config-file", file(yaml), ...argv], env);

function errorOf(yaml: string): ConfigError {
  try {
    fromFile(yaml);
  } catch (e) {
    expect(e).toBeInstanceOf(ConfigError);
    return e as ConfigError;
  }
  throw new Error(`expected the file to be refused:\n${yaml}`);
}

/** etcd's etcd.conf.yml.sample (3.4), every key at its default, with loopback ports. */
const SAMPLE = `
name: 'default'
data-dir:
wal-dir:
snapshot-count: 10000
heartbeat-interval: 100
election-timeout: 1000
quota-backend-bytes: 0
listen-peer-urls: http://localhost:2380
listen-client-urls: http://localhost:2379
max-snapshots: 5
max-wals: 5
cors:
initial-advertise-peer-urls: http://localhost:2380
advertise-client-urls: http://localhost:2379
discovery:
discovery-fallback: 'proxy'
discovery-proxy:
discovery-srv:
initial-cluster:
initial-cluster-token: 'etcd-cluster'
initial-cluster-state: 'new'
strict-reconfig-check: false
enable-v2: false
enable-pprof: true
proxy: 'off'
proxy-failure-wait: 5000
proxy-refresh-interval: 30000
proxy-dial-timeout: 1000
proxy-write-timeout: 5000
proxy-read-timeout: 0
client-transport-security:
  cert-file:
  key-file:
  client-cert-auth: false
  trusted-ca-file:
  auto-tls: false
peer-transport-security:
  cert-file:
  key-file:
  client-cert-auth: false
  trusted-ca-file:
  auto-tls: false
debug: false
logger: zap
log-outputs: [stderr]
force-new-cluster: false
auto-compaction-mode: periodic
auto-compaction-retention: "1"
`;

describe("--config-file", () => {
  it("reads etcd's sample file: its values, etcd's defaults for the rest, and notes for the features etcetera lacks", () => {
    const c = fromFile(SAMPLE);
    expect(c.name).toBe("default");
    expect(c.dataDir).toBe("default.etcd");
    expect(c.snapshotCount).toBe(10000);
    expect(c.strictReconfigCheck).toBe(false);
    expect(c.enablePprof).toBe(true);
    expect(c.logOutputs).toEqual(["stderr"]);
    expect(c.autoCompaction).toEqual({ mode: "periodic", retentionMs: 3_600_000 });
    expect(c.initialCluster).toEqual([{ name: "default", peerUrls: ["http://localhost:2380"] }]);
    expect(c.listenClientUrls).toEqual(["http://localhost:2379"]);
    expect(c.configFile).toMatch(/c\d+\.yml$/);
    // etcd's file mode serves no JSON gateway unless the file asks for it.
    expect(c.enableGrpcGateway).toBe(false);
    for (const key of ["discovery-fallback", "proxy", "proxy-failure-wait"]) expect(c.warnings.join("\n")).toContain(`"${key}" is at its default`);
    // debug is a setting of etcetera's too (etcd 3.4's deprecated --debug).
    expect(c.debug).toBe(false);
    expect(c.warnings.join("\n")).not.toContain('"debug"');
  });

  it("debug: true is etcd 3.4's deprecated --debug", () => {
    const c = fromFile("logger: capnslog\ndebug: true\n");
    expect([c.debug, c.logLevel]).toEqual([true, "debug"]);
  });

  it("types values as etcd's config struct does: durations in nanoseconds, lists for log-outputs", () => {
    const c = fromFile("grpc-keepalive-min-time: 5000000000\nexperimental-corrupt-check-time: 1500000000\nlog-outputs: [stdout, stderr]\nenable-grpc-gateway: true\nmax-txn-ops: 64\n");
    expect(c.grpcKeepaliveMinTimeMs).toBe(5000);
    expect(c.ops.corruptCheckTimeMs).toBe(1500);
    expect(c.logOutputs).toEqual(["stdout", "stderr"]);
    expect(c.enableGrpcGateway).toBe(true);
    expect(c.maxTxnOps).toBe(64);
    const batch = fromFile("backend-batch-interval: 50000000\nbackend-batch-limit: 200\n");
    expect([batch.backendBatchIntervalMs, batch.backendBatchLimit]).toEqual([50, 200]);
    expect([c.backendBatchIntervalMs, c.backendBatchLimit]).toEqual([undefined, undefined]);
  });

  it("refuses a value of the wrong type with encoding/json's words, as etcd does", () => {
    const cases: Array<[string, string]> = [
      ['heartbeat-interval: "100"', "cannot unmarshal string into Go struct field configYAML.heartbeat-interval of type uint"],
      ["heartbeat-interval: -1", "cannot unmarshal number -1 into Go struct field configYAML.heartbeat-interval of type uint"],
      ["auto-compaction-retention: 1", "cannot unmarshal number into Go struct field configYAML.auto-compaction-retention of type string"],
      ["strict-reconfig-check: 1", "cannot unmarshal number into Go struct field configYAML.strict-reconfig-check of type bool"],
      ["grpc-keepalive-min-time: 5s", "cannot unmarshal string into Go struct field configYAML.grpc-keepalive-min-time of type time.Duration"],
      ["log-outputs: stderr", "cannot unmarshal string into Go struct field configYAML.log-outputs of type []string"],
      ["client-transport-security: yes", "cannot unmarshal bool into Go struct field configYAML.client-transport-security of type embed.securityConfig"],
    ];
    for (const [yaml, message] of cases) {
      const e = errorOf(yaml);
      expect(e.exitCode, yaml).toBe(1);
      expect(configErrorText(e), yaml).toBe(`error verifying flags, error unmarshaling JSON: while decoding JSON: json: ${message}. See 'etcd --help'.\n`);
    }
  });

  it("refuses, by name, a key etcd 3.4 would ignore, and an unsupported feature asked for", () => {
    expect(errorOf("heartbeat-intreval: 100").message).toMatch(/: unknown key "heartbeat-intreval"$/);
    expect(errorOf("client-transport-security:\n  crl-file: x\n").message).toContain('unknown key "crl-file" in "client-transport-security"');
    expect(errorOf("discovery-srv: example.com").message).toContain('"discovery-srv" is an etcd setting etcetera does not support ("example.com")');
    // YAML 1.1, as go-yaml reads it: an unquoted off is a boolean, which asks for something else than 'off'.
    expect(errorOf("proxy: on").message).toContain('"proxy" is an etcd setting etcetera does not support (true)');
    expect(errorOf("config-file: other.yml").message).toContain('unknown key "config-file"');
    expect(errorOf("log-output: [stdout]").message).toContain('"log-output" is an etcd setting etcetera does not support (["stdout"])');
    expect(fromFile("log-output: [default]").warnings.join("\n")).toContain('"log-output" is at its default');
    expect(errorOf("enable-v2: true").message).toContain("--enable-v2 is not supported");
  });

  it("maps the TLS sections onto the TLS flags, with the flags' fail-closed checks", () => {
    const c = fromFile("client-transport-security:\n  client-cert-auth: true\n  trusted-ca-file: /ca.pem\n  auto-tls: true\nlisten-client-urls: https://127.0.0.1:2379\nadvertise-client-urls: https://127.0.0.1:2379\npeer-transport-security:\n  auto-tls: true\nlisten-peer-urls: https://127.0.0.1:2380\ninitial-advertise-peer-urls: https://127.0.0.1:2380\n");
    expect(c.tls.client).toMatchObject({ clientCertAuth: true, trustedCaFile: "/ca.pem", autoTls: true });
    expect(c.tls.peer.autoTls).toBe(true);
    // Asked for TLS on a plaintext URL: refused as the flags are, never served in the clear.
    expect(errorOf("client-transport-security:\n  cert-file: /c.pem\n  key-file: /k.pem\n").message).toContain("refusing to serve plaintext when TLS was asked for");
    expect(errorOf("cert-file: /a.pem\nclient-transport-security:\n  cert-file: /b.pem\n").message).toContain('"client-transport-security.cert-file" and "cert-file" both set --cert-file');
  });

  it("keeps etcd's default advertise URL when the file gives only the listen URL (the command line refuses that)", () => {
    expect(fromFile("listen-client-urls: http://127.0.0.1:2379\n").advertiseClientUrls).toEqual(["http://localhost:2379"]);
    expect(() => parseConfig(["--listen-client-urls", "http://127.0.0.1:2379"], {})).toThrow(/advertise-client-urls/);
  });

  it("ignores the other flags and ETCD_* variables as etcd does, and says which", () => {
    const c = fromFile("name: from-file\n", ["--name", "from-flag", "--snapshot-count=5"], { ETCD_NAME: "from-env", ETCD_DISCOVERY_SRV: "x" });
    expect(c.name).toBe("from-file");
    expect(c.snapshotCount).toBe(100000);
    expect(c.warnings[0]).toBe("ignored with --config-file, as etcd ignores them: --name, --snapshot-count, ETCD_DISCOVERY_SRV, ETCD_NAME");
    // The command line is still parsed: an unknown flag is an error with a file too.
    expect(() => fromFile("name: x\n", ["--bogus"])).toThrow("flag provided but not defined: -bogus");
  });

  it("--help and --version answer without reading the file, as etcd's do", () => {
    const missing = join(dir, "never-written.yml");
    expect(parseConfig(["--config-file", missing, "--version"], {}).printVersion).toBe(true);
    expect(parseConfig(["--config-file", missing, "--help"], {}).printHelp).toBe(true);
  });

  it("takes the file from ETCD_CONFIG_FILE when the flag is not given", () => {
    const c = parseConfig([], { ETCD_CONFIG_FILE: file("name: from-env-file\n") });
    expect(c.name).toBe("from-env-file");
    expect(c.configFile).not.toBeNull();
  });

  it("fails as etcd does on a file it cannot read or parse", () => {
    let e: unknown;
    try {
      parseConfig(["--config-file", join(dir, "missing.yml")], {});
    } catch (err) {
      e = err;
    }
    expect(configErrorText(e as ConfigError)).toBe(`error verifying flags, open ${join(dir, "missing.yml")}: no such file or directory. See 'etcd --help'.\n`);
    expect(errorOf("name: [\n").message).toMatch(/^error converting YAML to JSON: /);
    expect(errorOf("- a\n- b\n").message).toContain("cannot unmarshal array into Go value of type embed.configYAML");
    expect(fromFile("").name).toBe("default");
  });

  it("without a file the command line keeps its defaults: the gateway on, no file", () => {
    const c = parseConfig([], {});
    expect(c.enableGrpcGateway).toBe(true);
    expect(c.configFile).toBeNull();
    expect(parseConfig(["--enable-grpc-gateway=false"], {}).enableGrpcGateway).toBe(false);
  });
});
