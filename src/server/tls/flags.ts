/**
 * etcd 3.4's security flags (its --help "Security" group, the auth flags and the one experimental
 * flag that weakens peer checks), and the fail-closed rule for the ones etcetera does not serve yet.
 *
 * Why fail closed: a flag etcetera did not know used to be only a warning ("unrecognized
 * environment variable ETCD_CERT_FILE") and the member then served plaintext to anyone. Every
 * security flag is therefore defined here (so --help lists it and ETCD_* sets it), and one that
 * asks for protection etcetera cannot give is a start-up error that names it. A flag left at its
 * default asks for nothing and passes.
 */
import { type FlagSpec, parseGoBool, type ValueSource } from "../flags.js";

const SECURITY = "Security";
const AUTH = "Auth";
const EXPERIMENTAL = "Experimental feature";

/** etcd 3.4's usage texts, in its --help order. */
export const SECURITY_FLAG_SPECS: readonly FlagSpec[] = [
  { group: SECURITY, name: "cert-file", kind: "string", defaultValue: "", usage: "Path to the client server TLS cert file." },
  { group: SECURITY, name: "key-file", kind: "string", defaultValue: "", usage: "Path to the client server TLS key file." },
  { group: SECURITY, name: "client-cert-auth", kind: "bool", defaultValue: "false", usage: "Enable client cert authentication." },
  { group: SECURITY, name: "client-crl-file", kind: "string", defaultValue: "", usage: "Path to the client certificate revocation list file." },
  { group: SECURITY, name: "client-cert-allowed-hostname", kind: "string", defaultValue: "", usage: "Allowed TLS hostname for client cert authentication." },
  { group: SECURITY, name: "trusted-ca-file", kind: "string", defaultValue: "", usage: "Path to the client server TLS trusted CA cert file." },
  { group: SECURITY, name: "auto-tls", kind: "bool", defaultValue: "false", usage: "Client TLS using generated certificates." },
  { group: SECURITY, name: "peer-cert-file", kind: "string", defaultValue: "", usage: "Path to the peer server TLS cert file." },
  { group: SECURITY, name: "peer-key-file", kind: "string", defaultValue: "", usage: "Path to the peer server TLS key file." },
  { group: SECURITY, name: "peer-client-cert-auth", kind: "bool", defaultValue: "false", usage: "Enable peer client cert authentication." },
  { group: SECURITY, name: "peer-trusted-ca-file", kind: "string", defaultValue: "", usage: "Path to the peer server TLS trusted CA file." },
  { group: SECURITY, name: "peer-cert-allowed-cn", kind: "string", defaultValue: "", usage: "Required CN for client certs connecting to the peer endpoint." },
  { group: SECURITY, name: "peer-cert-allowed-hostname", kind: "string", defaultValue: "", usage: "Allowed TLS hostname for inter peer authentication." },
  { group: SECURITY, name: "peer-auto-tls", kind: "bool", defaultValue: "false", usage: "Peer TLS using self-generated certificates if --peer-key-file and --peer-cert-file are not provided." },
  { group: SECURITY, name: "peer-crl-file", kind: "string", defaultValue: "", usage: "Path to the peer certificate revocation list file." },
  { group: SECURITY, name: "cipher-suites", kind: "string", defaultValue: "", usage: "Comma-separated list of supported TLS cipher suites between client/server and peers (empty will be auto-populated by Go)." },
  { group: SECURITY, name: "cors", kind: "string", defaultValue: "*", usage: "Comma-separated whitelist of origins for CORS, or cross-origin resource sharing, (empty or * means allow all)." },
  { group: SECURITY, name: "host-whitelist", kind: "string", defaultValue: "*", usage: "Acceptable hostnames from HTTP client requests, if server is not secure (empty or * means allow all)." },
  { group: AUTH, name: "auth-token", kind: "string", defaultValue: "simple", usage: "Specify a v3 authentication token type and its options ('simple' or 'jwt')." },
  { group: AUTH, name: "bcrypt-cost", kind: "uint", defaultValue: "10", usage: "Specify the cost / strength of the bcrypt algorithm for hashing auth passwords. Valid values are between 4 and 31." },
  { group: AUTH, name: "auth-token-ttl", kind: "uint", defaultValue: "300", usage: "Time (in seconds) of the auth-token-ttl." },
  { group: EXPERIMENTAL, name: "experimental-peer-skip-client-san-verification", kind: "bool", defaultValue: "false", usage: "Skip verification of SAN field in client certificate for peer connections." },
];

/**
 * Security flags etcetera serves. A name leaves the fail-closed list by being added here, once
 * the protection it asks for is really given.
 */
export const SUPPORTED_SECURITY_FLAGS: ReadonlySet<string> = new Set<string>([
  // The client port's access controller (src/gateway/access.ts) sends CORS headers as it says.
  "cors",
  // The same controller refuses a plaintext request whose Host the list does not name (src/gateway/host_whitelist.ts).
  "host-whitelist",
  "cert-file",
  "key-file",
  "client-cert-auth",
  "client-crl-file",
  "client-cert-allowed-hostname",
  "trusted-ca-file",
  "auto-tls",
  "cipher-suites",
  "peer-cert-file",
  "peer-key-file",
  "peer-client-cert-auth",
  "peer-trusted-ca-file",
  "peer-cert-allowed-cn",
  "peer-cert-allowed-hostname",
  "peer-auto-tls",
  "peer-crl-file",
  // Authentication (src/auth, src/server/config_auth.ts).
  "auth-token",
  "bcrypt-cost",
  "auth-token-ttl",
]);

/**
 * The security specs to add to the parser: those not already defined by `defined` (another
 * feature's own spec array, e.g. auth's, wins over the fail-closed placeholder here).
 */
export function securitySpecsBesides(defined: readonly FlagSpec[]): FlagSpec[] {
  const names = new Set(defined.map((s) => s.name));
  return SECURITY_FLAG_SPECS.filter((s) => !names.has(s.name));
}

/** True when `value` means the same as the spec's default ("false" and "0" for a bool, "" and "*" for --cors). */
function isDefault(spec: FlagSpec, value: string): boolean {
  if (spec.kind === "bool") return parseGoBool(value) === parseGoBool(spec.defaultValue);
  if (spec.name === "cors" || spec.name === "host-whitelist") return value === "" || value === "*";
  return value === spec.defaultValue;
}

/**
 * The fail-closed check: the error text for the first unsupported security flag that asks for
 * something (command line or ETCD_* variable), or undefined. `specs` are the placeholder specs
 * the parser was given (securitySpecsBesides); supported ones are skipped.
 */
export function unsupportedSecurityFlag(
  specs: readonly FlagSpec[],
  value: (name: string) => string,
  source: (name: string) => ValueSource,
  envName: (name: string) => string,
): string | undefined {
  for (const spec of specs) {
    if (SUPPORTED_SECURITY_FLAGS.has(spec.name)) continue;
    const from = source(spec.name);
    if (from === "default" || isDefault(spec, value(spec.name))) continue;
    const given = from === "env" ? `${envName(spec.name)}=${value(spec.name)}` : `--${spec.name}=${value(spec.name)}`;
    return `--${spec.name} (${envName(spec.name)}) is not supported by etcetera yet; refusing to start with less protection than asked for (${given})`;
  }
  return undefined;
}
