/**
 * Token providers (etcd's auth.TokenProvider): what Authenticate hands a client and how a token in
 * a request's metadata is turned back into an identity (AuthInfo). Two kinds, chosen by
 * `--auth-token` as etcd parses it: `simple` (simple_token.ts) and
 * `jwt,pub-key=…,priv-key=…,sign-method=…,ttl=…` (jwt.ts).
 */
import type { AuthTokenHooks } from "./store.js";
import type { AuthInfo } from "./types.js";

export interface TokenProvider extends AuthTokenHooks {
  readonly kind: "simple" | "jwt";
  /** The proposing member's random part of a simple token (empty for JWT), carried in the entry. */
  genTokenPrefix(): string;
  /**
   * An Authenticate entry was applied (on every member, at log index `index`). A simple token is
   * registered here, so every member knows it; returns it. JWT tokens are signed on demand (sign).
   */
  assignAtApply(username: string, revision: number, prefix: string, index: number): string | undefined;
  /** A signed token for `username` at `revision` (JWT); for simple tokens assignAtApply has it. */
  sign(username: string, revision: number): Promise<string>;
  /** The identity `token` stands for, or undefined when it is not valid (unknown, expired, forged). */
  info(token: string, currentRevision: number, signal?: AbortSignal): Promise<AuthInfo | undefined>;
  /** Stops timers. */
  close(): void;
}

/** `--auth-token` as given: the kind, then `name=value` options. */
export interface AuthTokenSpec {
  kind: "simple" | "jwt";
  options: ReadonlyMap<string, string>;
}

/** The JWT options etcd knows (auth/options.go). */
const JWT_OPTIONS = new Set(["sign-method", "pub-key", "priv-key", "ttl"]);

/** Parses `--auth-token`; throws with etcd's words for an unknown kind or option. */
export function parseAuthTokenSpec(text: string): AuthTokenSpec {
  const [kind, ...rest] = text.split(",");
  if (kind !== "simple" && kind !== "jwt") throw new Error(`unknown token type: ${kind ?? ""}`);
  const options = new Map<string, string>();
  for (const part of rest) {
    const eq = part.indexOf("=");
    if (eq < 0) throw new Error(`invalid auth token option: ${part}`);
    const name = part.slice(0, eq);
    if (kind === "simple" || !JWT_OPTIONS.has(name)) throw new Error(`unknown token option: ${name}`);
    options.set(name, part.slice(eq + 1));
  }
  return { kind, options };
}
