/**
 * The auth flags (etcd's "Auth" group): --auth-token, --bcrypt-cost, --auth-token-ttl, with etcd's
 * defaults; checked at start so a bad value is a start-up error that names it, not a member
 * serving with less than was asked for. The flags themselves are defined with etcd's texts among
 * the security flags (tls/flags.ts) and listed there as served (SUPPORTED_SECURITY_FLAGS).
 */
import { BCRYPT_MAX_COST, BCRYPT_MIN_COST } from "../auth/password.js";
import { parseAuthTokenSpec, type AuthTokenSpec } from "../auth/token.js";

export interface AuthConfig {
  /** --auth-token, parsed (the JWT keys are read when the member starts). */
  readonly token: AuthTokenSpec;
  readonly bcryptCost: number;
  /** --auth-token-ttl: a simple token's life without use. */
  readonly tokenTtlSec: number;
}

/** The auth part of the config; throws an Error with the reason (the caller wraps it). */
export function authConfig(raw: (name: string) => string): AuthConfig {
  const bcryptCost = Number(raw("bcrypt-cost"));
  if (bcryptCost < BCRYPT_MIN_COST || bcryptCost > BCRYPT_MAX_COST) {
    throw new Error(`invalid bcrypt-cost: ${bcryptCost} (must be between ${BCRYPT_MIN_COST} and ${BCRYPT_MAX_COST})`);
  }
  const tokenTtlSec = Number(raw("auth-token-ttl"));
  if (tokenTtlSec <= 0) throw new Error(`invalid auth-token-ttl: ${tokenTtlSec} (must be positive)`);
  return { token: parseAuthTokenSpec(raw("auth-token")), bcryptCost, tokenTtlSec };
}
