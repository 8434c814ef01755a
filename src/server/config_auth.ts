/**
 * The auth flags (etcd's "Auth" group): --auth-token, --bcrypt-cost, --auth-token-ttl, with etcd's
 * defaults; checked at start so a bad value is a start-up error that names it, not a member
 * serving with less than was asked for.
 */
import { BCRYPT_MAX_COST, BCRYPT_MIN_COST } from "../auth/password.js";
import { parseAuthTokenSpec, type AuthTokenSpec } from "../auth/token.js";
import type { FlagSpec } from "./flags.js";

const AUTH = "Auth";

export const AUTH_FLAG_SPECS: readonly FlagSpec[] = [
  { group: AUTH, name: "auth-token", kind: "string", defaultValue: "simple", usage: "Specify a v3 authentication token type and its options ('simple' or 'jwt')." },
  { group: AUTH, name: "bcrypt-cost", kind: "uint", defaultValue: "10", usage: "Specify the cost / strength of the bcrypt algorithm for hashing auth passwords. Valid values are between 4 and 31." },
  { group: AUTH, name: "auth-token-ttl", kind: "uint", defaultValue: "300", usage: "Time (in seconds) of the auth-token-ttl." },
];

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
