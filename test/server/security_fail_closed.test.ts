/**
 * The member process (dist/server.js) refuses, by name, every security flag and ETCD_* variable
 * it does not serve: a start-up error and exit 1, never a warning and a plaintext member.
 * Always etcetera's process (real etcd serves these flags); the unit rules are in config_security.test.ts.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { flagToEnv } from "../../src/server/flags.js";
import { SECURITY_FLAG_SPECS, SUPPORTED_SECURITY_FLAGS } from "../../src/server/tls/flags.js";
import { runToExit, singleMemberArgs } from "../e2e/tls_process.js";

const dir = mkdtempSync(join(tmpdir(), "etcetera-fail-closed-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const ETCETERA = { etceteraOnly: true } as const;
const unsupported = SECURITY_FLAG_SPECS.filter((s) => !SUPPORTED_SECURITY_FLAGS.has(s.name));

function askingValue(name: string, kind: string): string {
  if (kind === "bool") return "true";
  if (kind === "uint") return "12";
  if (name === "auth-token") return "jwt,pub-key=a.pub,priv-key=a.key,sign-method=RS256";
  return "/certs/file.pem";
}

describe("the member process fails closed", () => {
  it("the issue's compose environment (ETCD_CERT_FILE, ETCD_KEY_FILE, ETCD_CLIENT_CERT_AUTH) does not start", async () => {
    const m = await singleMemberArgs(join(dir, "compose"));
    const r = await runToExit(m.args, { ETCD_CERT_FILE: "/certs/server.pem", ETCD_KEY_FILE: "/certs/server-key.pem", ETCD_CLIENT_CERT_AUTH: "true" }, ETCETERA);
    expect(r.code).toBe(1);
    expect(r.log).not.toContain("ready to serve client requests");
    expect(r.log).not.toContain("unrecognized environment variable");
    expect(r.log).toContain("error verifying flags, --cert-file, --client-cert-auth given but no --listen-client-urls URL is https:// or unixs://");
  });

  it(`every unsupported ETCD_* security variable is refused by name (${unsupported.length} of ${SECURITY_FLAG_SPECS.length})`, async () => {
    expect(unsupported.length).toBeGreaterThan(0);
    // Four processes at a time: each exits at once, the machine is shared.
    for (let i = 0; i < unsupported.length; i += 4) {
      await Promise.all(
        unsupported.slice(i, i + 4).map(async (spec) => {
          const env = flagToEnv(spec.name);
          const m = await singleMemberArgs(join(dir, spec.name));
          const r = await runToExit(m.args, { [env]: askingValue(spec.name, spec.kind) }, ETCETERA);
          expect(r.code, `${env}: ${r.log}`).toBe(1);
          expect(r.log).toContain(`--${spec.name} (${env}) is not supported by etcetera`);
        }),
      );
    }
  });

  // The member's own knobs: each bad value is refused by name before the member starts.
  const knobs: Array<{ what: string; dir: string; env: Record<string, string>; logged: string }> = [
    { what: "an ETCETERA_HTTP2 that names no HTTP/2 engine", dir: "http2-engine", env: { ETCETERA_HTTP2: "nghttp3" }, logged: "ETCETERA_HTTP2=nghttp3: expected one of own, node" },
    { what: "an ETCETERA_COMMIT_HOLD_MS that is not an integer in [0, 50]", dir: "commit-hold", env: { ETCETERA_COMMIT_HOLD_MS: "2ms" }, logged: 'ETCETERA_COMMIT_HOLD_MS must be an integer in [0, 50], got \\"2ms\\"' },
    { what: "an ETCETERA_WARMUP other than 0 or 1", dir: "warmup", env: { ETCETERA_WARMUP: "false" }, logged: 'ETCETERA_WARMUP must be 0 or 1, got \\"false\\"' },
    { what: "an ETCETERA_HEAP_GROWING_PERCENT that is not an integer in [0, 1000]", dir: "heap-growing-percent", env: { ETCETERA_HEAP_GROWING_PERCENT: "30%" }, logged: 'ETCETERA_HEAP_GROWING_PERCENT must be an integer in [0, 1000], got \\"30%\\"' },
    { what: "an ETCETERA_V8_INTERRUPT_BUDGET other than 0 or 1", dir: "interrupt-budget", env: { ETCETERA_V8_INTERRUPT_BUDGET: "8192" }, logged: 'ETCETERA_V8_INTERRUPT_BUDGET must be 0 or 1, got \\"8192\\"' },
  ];
  for (const k of knobs) {
    it(`${k.what} is refused by name before the member starts`, async () => {
      const m = await singleMemberArgs(join(dir, k.dir));
      const r = await runToExit(m.args, k.env, ETCETERA);
      expect(r.code, r.log).toBe(1);
      expect(r.log).toContain(k.logged);
      expect(r.log).not.toContain("ready to serve client requests");
    });
  }
});
