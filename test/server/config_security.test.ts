/**
 * Fail closed: every etcd security flag and ETCD_* variable etcetera does not serve is a start-up
 * error naming it; left at its default it asks for nothing and passes.
 */
import { describe, expect, it } from "vitest";
import { ConfigError, parseConfig, usageText } from "../../src/server/config.js";
import { flagToEnv } from "../../src/server/flags.js";
import { SECURITY_FLAG_SPECS, SUPPORTED_SECURITY_FLAGS } from "../../src/server/tls/flags.js";

/** A value that asks for protection (or weakens a check) for each kind of security flag. */
function askingValue(name: string, kind: string): string {
  if (kind === "bool") return "true";
  if (kind === "uint") return "12";
  if (name === "auth-token") return "jwt,pub-key=a.pub,priv-key=a.key,sign-method=RS256";
  return "/some/file.pem";
}

function refusal(argv: string[], env: NodeJS.ProcessEnv): ConfigError {
  try {
    parseConfig(argv, env);
  } catch (e) {
    expect(e).toBeInstanceOf(ConfigError);
    return e as ConfigError;
  }
  throw new Error(`expected ${argv.join(" ")} ${JSON.stringify(env)} to be refused`);
}

const unsupported = SECURITY_FLAG_SPECS.filter((s) => !SUPPORTED_SECURITY_FLAGS.has(s.name));

describe("unsupported security flags fail closed", () => {
  it("there is something to refuse", () => {
    expect(unsupported.length).toBeGreaterThan(0);
  });

  it.each(unsupported.map((s) => [s.name, s.kind] as const))("--%s on the command line is refused by name (exit 1)", (name, kind) => {
    const e = refusal([`--${name}=${askingValue(name, kind)}`], {});
    expect(e.exitCode).toBe(1);
    expect(e.message).toContain(`--${name} (${flagToEnv(name)}) is not supported by etcetera`);
  });

  it.each(unsupported.map((s) => [flagToEnv(s.name), s.name, s.kind] as const))("%s in the environment is refused by name, never a warning", (env, name, kind) => {
    const e = refusal([], { [env]: askingValue(name, kind) });
    expect(e.exitCode).toBe(1);
    expect(e.message).toContain(`${env}=`);
    expect(e.message).toContain(`--${name} (${env}) is not supported by etcetera`);
  });

  it("the compose file of the issue (cert, key, client cert auth from ETCD_*, http:// URLs) does not start plaintext", () => {
    const e = refusal([], { ETCD_CERT_FILE: "/certs/server.pem", ETCD_KEY_FILE: "/certs/server-key.pem", ETCD_CLIENT_CERT_AUTH: "true" });
    expect(e.message).toBe(
      "--cert-file, --client-cert-auth given but no --listen-client-urls URL is https:// or unixs:// (http://localhost:2379); refusing to serve plaintext when TLS was asked for",
    );
  });

  it("--auto-tls with only http:// client URLs does not start plaintext either", () => {
    expect(refusal(["--auto-tls"], {}).message).toMatch(/^--auto-tls given but no --listen-client-urls URL is https/);
  });

  it("a security flag left at (or set to) its default asks for nothing", () => {
    const c = parseConfig(["--client-cert-auth=false", "--cors=*", "--bcrypt-cost=10"], { ETCD_AUTO_TLS: "false", ETCD_HOST_WHITELIST: "*" });
    expect(c.warnings.some((w) => w.includes("unrecognized"))).toBe(false);
  });

  it("--help lists the security flags with etcd's texts", () => {
    const text = usageText();
    expect(text).toContain("Security:");
    expect(text).toContain("--cert-file ''");
    expect(text).toContain("Path to the client server TLS cert file.");
    expect(text).toContain("--peer-auto-tls 'false'");
  });
});
