/**
 * Token providers (src/auth/simple_token.ts, jwt.ts): simple tokens' format, expiry without use
 * and renewal on use, invalidation; JWT claims, expiry, forged and foreign tokens refused; and a
 * seeded fuzz of token parsing and lookup (no input may throw or stand for a user it was not
 * issued to).
 */
import { generateKeyPairSync } from "node:crypto";
import { describe, expect, it } from "vitest";
import { JwtTokenProvider } from "../../src/auth/jwt.js";
import { parseSimpleToken, SimpleTokenProvider } from "../../src/auth/simple_token.js";
import { parseAuthTokenSpec } from "../../src/auth/token.js";
import { mulberry32 } from "../prng.js";
import { testSeed } from "../seed.js";

function simple(ttlMs = 1000) {
  let now = 0;
  const p = new SimpleTokenProvider({ ttlMs, now: () => now, waitApplied: () => Promise.resolve() });
  p.enable();
  return { p, advance: (ms: number) => (now += ms) };
}

describe("simple tokens", () => {
  it("are <16 letters>.<index>, known to the member that applied them, with the current revision", async () => {
    const { p } = simple();
    const prefix = p.genTokenPrefix();
    expect(prefix).toMatch(/^[a-zA-Z]{16}$/);
    const t = p.assignAtApply("u1", 3, prefix, 42);
    expect(t).toBe(`${prefix}.42`);
    expect(await p.info(t, 7)).toEqual({ username: "u1", revision: 7 });
    expect(await p.info(`${prefix}.43`, 7)).toBeUndefined();
    p.close();
  });

  it("expire after the ttl without use; every use pushes the deadline back", async () => {
    const { p, advance } = simple(1000);
    const t = p.assignAtApply("u1", 1, p.genTokenPrefix(), 5);
    advance(900);
    expect(await p.info(t, 1)).toBeDefined();
    advance(900);
    expect(await p.info(t, 1)).toBeDefined();
    advance(1000);
    expect(await p.info(t, 1)).toBeUndefined();
    p.close();
  });

  it("die with their user, and all of them with auth disabled", async () => {
    const { p } = simple();
    const a = p.assignAtApply("u1", 1, p.genTokenPrefix(), 1);
    const b = p.assignAtApply("u2", 1, p.genTokenPrefix(), 2);
    p.invalidateUser("u1");
    expect(await p.info(a, 1)).toBeUndefined();
    expect(await p.info(b, 1)).toBeDefined();
    p.disable();
    expect(await p.info(b, 1)).toBeUndefined();
  });

  it("a seeded fuzz of token strings never throws and never names a user for a token not issued", async () => {
    const seed = testSeed("simple token fuzz");
    const rand = mulberry32(seed);
    const { p } = simple(60_000);
    const issued = new Map<string, string>();
    for (let i = 1; i <= 20; i++) issued.set(p.assignAtApply(`user${i}`, 1, p.genTokenPrefix(), i), `user${i}`);
    const pieces = [".", "..", "0", "1", "99999999999999999999", "-1", "1e3", " ", "a", "Z", "\u0000", "é", ...issued.keys()];
    for (let i = 0; i < 2000; i++) {
      let s = "";
      const n = Math.floor(rand() * 4);
      for (let j = 0; j < n; j++) {
        const piece = pieces[Math.floor(rand() * pieces.length)]!;
        s += rand() < 0.2 ? piece.slice(0, Math.floor(rand() * piece.length)) : piece;
      }
      const parsed = parseSimpleToken(s);
      if (parsed !== undefined) expect(Number.isSafeInteger(parsed.index), `seed ${seed}: ${JSON.stringify(s)}`).toBe(true);
      const ai = await p.info(s, 1);
      expect(ai?.username, `seed ${seed}: ${JSON.stringify(s)}`).toBe(issued.get(s));
    }
    p.close();
  });
});

describe("JWT tokens", () => {
  const { publicKey, privateKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
  let now = Date.UTC(2026, 0, 1);
  const p = new JwtTokenProvider({ signMethod: "RS256", verifyKey: publicKey, signKey: privateKey, ttlMs: 60_000, now: () => now });

  it("carry username and revision, signed; valid until exp", async () => {
    const t = await p.sign("u1", 9);
    const payload = JSON.parse(Buffer.from(t.split(".")[1]!, "base64url").toString()) as Record<string, unknown>;
    expect(payload).toMatchObject({ username: "u1", revision: 9, exp: Math.floor((now + 60_000) / 1000) });
    expect(await p.info(t)).toEqual({ username: "u1", revision: 9 });
    now += 61_000;
    expect(await p.info(t)).toBeUndefined();
  });

  it("refuse a forged payload, another key's token and garbage", async () => {
    const t = await p.sign("u1", 1);
    const [h, , s] = t.split(".");
    const forged = `${h}.${Buffer.from(JSON.stringify({ username: "root", revision: 1, exp: 9e9 })).toString("base64url")}.${s}`;
    expect(await p.info(forged)).toBeUndefined();
    const other = generateKeyPairSync("rsa", { modulusLength: 2048 });
    const q = new JwtTokenProvider({ signMethod: "RS256", verifyKey: other.publicKey, signKey: other.privateKey, ttlMs: 60_000, now: () => now });
    expect(await p.info(await q.sign("root", 1))).toBeUndefined();
    for (const g of ["", "a.b.c", "x", "..", t + "x"]) expect(await p.info(g)).toBeUndefined();
  });

  it("--auth-token parses as etcd's: kind then options", () => {
    expect(parseAuthTokenSpec("simple")).toEqual({ kind: "simple", options: new Map() });
    const j = parseAuthTokenSpec("jwt,pub-key=a.pub,priv-key=a.key,sign-method=RS256,ttl=5m");
    expect(j.kind).toBe("jwt");
    expect(j.options.get("sign-method")).toBe("RS256");
    expect(() => parseAuthTokenSpec("oauth")).toThrow("unknown token type");
    expect(() => parseAuthTokenSpec("jwt,color=blue")).toThrow("unknown token option");
  });
});
