/**
 * The token provider `--auth-token` names (etcd's NewTokenProvider).
 */
import { jwtOptionsFromSpec, JwtTokenProvider } from "./jwt.js";
import { SimpleTokenProvider } from "./simple_token.js";
import type { AuthTokenSpec, TokenProvider } from "./token.js";

export interface TokenProviderDeps {
  /** --auth-token-ttl (simple tokens). */
  simpleTtlMs: number;
  /** Monotonic milliseconds. */
  now(): number;
  /** Resolves once the member applied `index`. */
  waitApplied(index: number, signal?: AbortSignal): Promise<void>;
  /** Go duration text to milliseconds (the JWT `ttl` option). */
  parseDurationMs(text: string): number;
}

export function newTokenProvider(spec: AuthTokenSpec, d: TokenProviderDeps): TokenProvider {
  if (spec.kind === "simple") return new SimpleTokenProvider({ ttlMs: d.simpleTtlMs, now: d.now, waitApplied: d.waitApplied });
  return new JwtTokenProvider(jwtOptionsFromSpec(spec.options, d.parseDurationMs));
}
