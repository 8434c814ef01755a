/**
 * The operations flags (src/server/config_ops.ts): defaults, values, refusals; and a real etcd
 * flag etcetera does not take refused by name, on the command line and as an ETCD_* variable.
 */
import { describe, expect, it } from "vitest";
import { ConfigError, parseConfig } from "../../src/server/config.js";
import { ETCD_34_FLAGS } from "../../src/server/config_ops.js";

function errorOf(argv: string[], env: NodeJS.ProcessEnv = {}): ConfigError {
  try {
    parseConfig(argv, env);
  } catch (e) {
    expect(e).toBeInstanceOf(ConfigError);
    return e as ConfigError;
  }
  throw new Error(`expected ${argv.join(" ")} to fail`);
}

describe("operations flags", () => {
  it("defaults: no corruption checks, no force-new-cluster, lease checkpoints on every 5 min", () => {
    expect(parseConfig([], {}).ops).toEqual({
      initialCorruptCheck: false,
      corruptCheckTimeMs: 0,
      forceNewCluster: false,
      leaseCheckpoint: true,
      leaseCheckpointIntervalMs: 300_000,
    });
  });

  it("takes etcd's spellings, on the command line and from ETCD_*", () => {
    const c = parseConfig(
      ["--experimental-initial-corrupt-check", "--experimental-corrupt-check-time=90s", "--force-new-cluster", "--experimental-enable-lease-checkpoint=false"],
      { ETCD_EXPERIMENTAL_LEASE_CHECKPOINT_INTERVAL: "2s" },
    );
    expect(c.ops).toEqual({ initialCorruptCheck: true, corruptCheckTimeMs: 90_000, forceNewCluster: true, leaseCheckpoint: false, leaseCheckpointIntervalMs: 2000 });
  });

  it("refuses bad values with Go's / a clear text", () => {
    expect(errorOf(["--experimental-corrupt-check-time=abc"]).message).toBe('invalid value "abc" for flag -experimental-corrupt-check-time: time: invalid duration "abc"');
    expect(errorOf(["--experimental-lease-checkpoint-interval=0s"]).message).toBe("--experimental-lease-checkpoint-interval must be >0 (set to 0s)");
    expect(errorOf(["--experimental-corrupt-check-time=-1s"]).exitCode).toBe(1);
  });
});

describe("etcd flags etcetera does not take", () => {
  it("on the command line: refused by name, exit 2 as an unknown flag", () => {
    const e = errorOf(["--name=a", "--discovery-srv=example.com"]);
    expect(e.message).toBe("--discovery-srv is an etcd flag etcetera does not support");
    expect(e.exitCode).toBe(2);
    expect(errorOf(["--no-such-flag"]).message).toBe("flag provided but not defined: -no-such-flag");
  });

  it("as ETCD_* variables: a start-up error, not a warning; unknown names stay a warning", () => {
    const e = errorOf([], { ETCD_DISCOVERY: "https://discovery.etcd.io/x" });
    expect(e.message).toBe("ETCD_DISCOVERY=https://discovery.etcd.io/x: --discovery is an etcd flag etcetera does not support");
    expect(e.exitCode).toBe(1);
    expect(parseConfig([], { ETCD_NOT_A_FLAG: "1" }).warnings).toContain("unrecognized environment variable ETCD_NOT_A_FLAG=1");
  });

  it("every flag of etcd 3.4 is either taken or refused by name", () => {
    for (const name of ETCD_34_FLAGS) {
      try {
        parseConfig([`--${name}=1`], {});
      } catch (e) {
        expect((e as Error).message).not.toMatch(/^flag provided but not defined/);
      }
    }
  });
});
