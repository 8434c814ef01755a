/**
 * JWT tokens (etcd's auth/jwt.go), signed and verified with the `jose` package: claims `username`,
 * `revision` (the auth revision at Authenticate) and `exp` (now + ttl, etcd's default 5 minutes).
 * Any member holding the keys verifies any member's token, so nothing is registered at apply; a
 * token older than the auth store's revision answers "revision of auth store is old" at the check,
 * and the client authenticates again. Keys are PEM files (`pub-key`, `priv-key`): RSA for RS256..PS512,
 * EC for ES256..ES512; HS256..HS512 take the private key file's bytes as the shared secret. Without `priv-key` the
 * member only verifies (etcd's verify-only mode).
 */
import { createPrivateKey, createPublicKey, createSecretKey, type KeyObject } from "node:crypto";
import { readFileSync } from "node:fs";
import { jwtVerify, SignJWT } from "jose";
import type { TokenProvider } from "./token.js";
import type { AuthInfo } from "./types.js";

/** The sign methods etcd 3.4 accepts (jwt-go's names). */
export const JWT_SIGN_METHODS = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "HS256", "HS384", "HS512"] as const;
export type JwtSignMethod = (typeof JWT_SIGN_METHODS)[number];

/** etcd's DefaultTTL for JWT tokens. */
export const JWT_DEFAULT_TTL_MS = 5 * 60 * 1000;

export interface JwtOptions {
  signMethod: JwtSignMethod;
  /** Verifies tokens (for HS*: the secret). */
  verifyKey: KeyObject;
  /** Signs tokens; undefined: verify-only. */
  signKey: KeyObject | undefined;
  ttlMs: number;
  /** Wall-clock milliseconds (exp is wall time). */
  now?: () => number;
}

/** Reads the keys `--auth-token jwt,...` names; throws with the reason. */
export function jwtOptionsFromSpec(options: ReadonlyMap<string, string>, parseDurationMs: (s: string) => number): JwtOptions {
  const method = options.get("sign-method");
  if (method === undefined || method === "") throw new Error("jwt: sign-method is required");
  if (!(JWT_SIGN_METHODS as readonly string[]).includes(method)) throw new Error(`jwt: invalid auth signature method: ${method}`);
  const signMethod = method as JwtSignMethod;
  const ttlText = options.get("ttl");
  const ttlMs = ttlText === undefined ? JWT_DEFAULT_TTL_MS : parseDurationMs(ttlText);
  if (!(ttlMs > 0)) throw new Error(`jwt: ttl must be positive: ${ttlText ?? ""}`);
  const privPath = options.get("priv-key");
  const pubPath = options.get("pub-key");
  if (signMethod.startsWith("HS")) {
    const path = privPath ?? pubPath;
    if (path === undefined) throw new Error("jwt: missing key data");
    const secret = createSecretKey(readFileSync(path));
    return { signMethod, verifyKey: secret, signKey: privPath === undefined ? undefined : secret, ttlMs };
  }
  if (pubPath === undefined) throw new Error("jwt: missing key data (pub-key)");
  const verifyKey = createPublicKey(readFileSync(pubPath));
  const signKey = privPath === undefined ? undefined : createPrivateKey(readFileSync(privPath));
  const wantType = signMethod.startsWith("ES") ? "ec" : "rsa";
  if (verifyKey.asymmetricKeyType !== wantType && !(wantType === "rsa" && verifyKey.asymmetricKeyType === "rsa-pss")) {
    throw new Error(`jwt: ${signMethod} needs an ${wantType.toUpperCase()} key, pub-key is ${verifyKey.asymmetricKeyType ?? "unknown"}`);
  }
  if (signKey !== undefined) {
    const derived = createPublicKey(signKey).export({ format: "der", type: "spki" });
    if (!derived.equals(verifyKey.export({ format: "der", type: "spki" }))) throw new Error("jwt: public and private keys don't match");
  }
  return { signMethod, verifyKey, signKey, ttlMs };
}

export class JwtTokenProvider implements TokenProvider {
  readonly kind = "jwt";
  private readonly now: () => number;

  constructor(private readonly o: JwtOptions) {
    this.now = o.now ?? Date.now;
  }

  enable(): void {}
  disable(): void {}
  /** A JWT cannot be taken back; the revision it carries goes stale at the user's change. */
  invalidateUser(): void {}
  close(): void {}

  genTokenPrefix(): string {
    return "";
  }

  assignAtApply(): undefined {
    return undefined;
  }

  async sign(username: string, revision: number): Promise<string> {
    if (this.o.signKey === undefined) throw new Error("auth: token signing attempted with verify-only key");
    return new SignJWT({ username, revision })
      .setProtectedHeader({ alg: this.o.signMethod, typ: "JWT" })
      .setExpirationTime(Math.floor((this.now() + this.o.ttlMs) / 1000))
      .sign(this.o.signKey);
  }

  async info(token: string): Promise<AuthInfo | undefined> {
    try {
      const { payload } = await jwtVerify(token, this.o.verifyKey, {
        algorithms: [this.o.signMethod],
        currentDate: new Date(this.now()),
        requiredClaims: ["exp"],
      });
      const { username, revision } = payload;
      if (typeof username !== "string" || typeof revision !== "number" || !Number.isSafeInteger(revision) || revision < 0) return undefined;
      return { username, revision };
    } catch {
      return undefined;
    }
  }
}
