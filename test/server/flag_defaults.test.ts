/**
 * Every flag that etcd 3.4.23's `--help` and ours both list has the same default, read from the
 * real etcd binary, unless the difference is a listed deviation (deviation: pre-vote-on-by-default,
 * deviation: lease-checkpoint-on-by-default, deviation: zap-logger-by-default); and every flag etcd
 * lists that ours does not is refused, naming it (fail closed), even at etcd's own default value.
 */
import { execFileSync } from "node:child_process";
import { describe, expect, it } from "vitest";
import { ETCD_BIN } from "../binaries.js";
import { BEHAVIOUR_DEVIATIONS } from "../deviations.js";

/** `--name 'default'` pairs of a `--help` text, in etcd's layout ("  --pre-vote 'false'"). */
function defaults(help: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const m of help.matchAll(/^\s+--([a-z0-9-]+) '([^']*)'/gm)) out.set(m[1]!, m[2]!);
  return out;
}

/** Our defaults that differ from etcd 3.4.23's on purpose, each a listed deviation. */
const DIFFERENT: Readonly<Record<string, { ours: string; id: string }>> = {
  "pre-vote": { ours: "true", id: "pre-vote-on-by-default" },
  "experimental-enable-lease-checkpoint": { ours: "true", id: "lease-checkpoint-on-by-default" },
  logger: { ours: "zap", id: "zap-logger-by-default" },
};

async function ourHelp(argv: string[]): Promise<{ exitCode: number | undefined; stdout: string; stderr: string }> {
  const { resolveCommandLine } = await import("../../src/server/config.js");
  let stdout = "";
  let stderr = "";
  const result = resolveCommandLine(argv, {}, { stdout: (t) => (stdout += t), stderr: (t) => (stderr += t) });
  return { exitCode: "exitCode" in result ? (result.exitCode as number) : undefined, stdout, stderr };
}

describe("flag defaults against etcd 3.4.23's --help", () => {
  const etcd = defaults(execFileSync(ETCD_BIN, ["--help"], { encoding: "utf8" }));

  it("reads a realistic number of flags from both", async () => {
    const ours = defaults((await ourHelp(["--help"])).stdout);
    expect(etcd.size).toBeGreaterThan(60);
    expect(ours.size).toBeGreaterThan(60);
    expect(etcd.get("heartbeat-interval")).toBe("100");
  });

  it("every flag both list has etcd's default, or a listed deviation", async () => {
    const ours = defaults((await ourHelp(["--help"])).stdout);
    const differing: Record<string, { etcd: string; ours: string }> = {};
    for (const [name, value] of etcd) {
      const mine = ours.get(name);
      if (mine !== undefined && mine !== value) differing[name] = { etcd: value, ours: mine };
    }
    const listed = Object.fromEntries(Object.entries(DIFFERENT).map(([name, d]) => [name, { etcd: etcd.get(name)!, ours: d.ours }]));
    expect(differing).toEqual(listed);
    for (const d of Object.values(DIFFERENT)) expect(BEHAVIOUR_DEVIATIONS[d.id]?.where).toBe("test/server/flag_defaults.test.ts");
  });

  it("every flag etcd lists and ours does not is refused by name, even at etcd's default", async () => {
    const ours = defaults((await ourHelp(["--help"])).stdout);
    const missing = [...etcd].filter(([name]) => !ours.has(name));
    expect(missing.length).toBeGreaterThan(0);
    for (const [name, value] of missing) {
      const r = await ourHelp([`--${name}=${value}`]);
      expect(r.exitCode, name).not.toBe(0);
      expect(r.exitCode, name).not.toBeUndefined();
      expect(r.stderr, name).toContain(`--${name}`);
    }
  });
});
