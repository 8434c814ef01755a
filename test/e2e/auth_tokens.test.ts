/**
 * Auth tokens as etcd 3.4 issues and checks them (issue 14): JWT mode
 * (`--auth-token jwt,pub-key=…,priv-key=…,sign-method=RS256`, an RSA key pair made in the test) and
 * a simple token's expiry after `--auth-token-ttl` seconds without use. Each check is etcd's:
 * run with E2E_TARGET=etcd against real etcd.
 */
import * as grpc from "@grpc/grpc-js";
import { generateKeyPairSync } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { clients, expectStatus, unary } from "./grpc_client.js";
import { Cluster, etcdctl, sleep } from "./harness.js";
import { enableAuthWithRootAndU1 } from "./auth_setup.js";

let cluster: Cluster | undefined;
let c: ReturnType<typeof clients> | undefined;
const keyDirs: string[] = [];

afterEach(async () => {
  c?.close();
  c = undefined;
  await cluster?.destroy();
  cluster = undefined;
  for (const d of keyDirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

const b = (s: string) => Buffer.from(s);
const md = (t: string) => ({ metadata: { token: t } });

async function ok(ep: string, ...args: string[]): Promise<string> {
  const r = await etcdctl(ep, args);
  if (r.code !== 0) throw new Error(`etcdctl ${args.join(" ")} failed (${r.code}): ${r.stderr}\n${cluster?.logs() ?? ""}`);
  return r.stdout;
}

/** A one-member cluster with `extraArgs`, root (password rootpw) and u1 (read/write on app/), auth on. */
async function startWithAuth(extraArgs: (dir: string) => string[]): Promise<{ ep: string; c: ReturnType<typeof clients> }> {
  const dir = mkdtempSync(join(tmpdir(), "etcetera-auth-keys-"));
  keyDirs.push(dir);
  cluster = await Cluster.create({ size: 1, extraArgs: extraArgs(dir) });
  await cluster.start();
  const ep = cluster.endpoints;
  expect(await enableAuthWithRootAndU1((...args) => ok(ep, ...args))).toBe("Authentication Enabled\n");
  c = clients(cluster.members[0]!.endpoint);
  return { ep, c };
}

async function authenticate(cl: ReturnType<typeof clients>, name: string, password: string): Promise<string> {
  return (await unary<{ token: string }>(cl.auth, "Authenticate", { name, password })).token;
}

function jwtPart(token: string, i: number): Record<string, unknown> {
  return JSON.parse(Buffer.from(token.split(".")[i]!, "base64url").toString()) as Record<string, unknown>;
}

describe("JWT tokens (--auth-token jwt,...,sign-method=RS256)", () => {
  it("Authenticate answers an RS256 JWT with username, revision and exp; it authorizes as the user; a tampered one is refused", async () => {
    const { ep, c: cl } = await startWithAuth((dir) => {
      const { publicKey, privateKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
      writeFileSync(join(dir, "jwt.pub"), publicKey.export({ type: "spki", format: "pem" }));
      writeFileSync(join(dir, "jwt.key"), privateKey.export({ type: "pkcs1", format: "pem" }));
      return [`--auth-token=jwt,pub-key=${join(dir, "jwt.pub")},priv-key=${join(dir, "jwt.key")},sign-method=RS256,ttl=10m`];
    });
    const before = Math.floor(Date.now() / 1000);
    const t = await authenticate(cl, "u1", "u1pw");
    expect(t.split(".")).toHaveLength(3);
    expect(jwtPart(t, 0)).toMatchObject({ alg: "RS256" });
    const claims = jwtPart(t, 1);
    expect(Object.keys(claims).sort()).toEqual(["exp", "revision", "username"]);
    expect(claims.username).toBe("u1");
    expect(typeof claims.revision).toBe("number");
    // ttl=10m: exp is ten minutes after the Authenticate (a few seconds of slack for a loaded machine).
    expect(claims.exp as number).toBeGreaterThanOrEqual(before + 600 - 5);
    expect(claims.exp as number).toBeLessThanOrEqual(Math.ceil(Date.now() / 1000) + 600 + 5);

    await unary(cl.kv, "Put", { key: b("app/j"), value: b("1") }, md(t));
    await expectStatus(unary(cl.kv, "Put", { key: b("other"), value: b("1") }, md(t)), grpc.status.PERMISSION_DENIED, "etcdserver: permission denied");
    // The same claims re-signed by nobody (a changed signature), or claims changed under the signature.
    const [h, p, s] = t.split(".") as [string, string, string];
    const badSig = `${h}.${p}.${s.slice(0, -4)}${s.endsWith("AAAA") ? "BBBB" : "AAAA"}`;
    const rootClaims = Buffer.from(JSON.stringify({ ...claims, username: "root" })).toString("base64url");
    for (const forged of [badSig, `${h}.${rootClaims}.${s}`, `${h}.${p}`]) {
      await expectStatus(unary(cl.kv, "Put", { key: b("other"), value: b("2") }, md(forged)), grpc.status.UNAUTHENTICATED, "etcdserver: invalid auth token");
    }
    expect(await ok(ep, "--user", "root:rootpw", "get", "other")).toBe("");
    // etcdctl logs in with a password and gets a JWT too.
    expect(await ok(ep, "--user", "u1:u1pw", "get", "app/j", "--print-value-only")).toBe("1\n");
  }, 60_000);

  it("a JWT past its exp (ttl=2s) is an invalid auth token", async () => {
    const { c: cl } = await startWithAuth((dir) => {
      const { publicKey, privateKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
      writeFileSync(join(dir, "jwt.pub"), publicKey.export({ type: "spki", format: "pem" }));
      writeFileSync(join(dir, "jwt.key"), privateKey.export({ type: "pkcs1", format: "pem" }));
      return [`--auth-token=jwt,pub-key=${join(dir, "jwt.pub")},priv-key=${join(dir, "jwt.key")},sign-method=RS256,ttl=2s`];
    });
    const t = await authenticate(cl, "u1", "u1pw");
    await unary(cl.kv, "Range", { key: b("app/x") }, md(t));
    // exp has a resolution of a second: past it after at most 3 s.
    await sleep(3_500);
    await expectStatus(unary(cl.kv, "Range", { key: b("app/x") }, md(t)), grpc.status.UNAUTHENTICATED, "etcdserver: invalid auth token");
    // A new login works again.
    await unary(cl.kv, "Range", { key: b("app/x") }, md(await authenticate(cl, "u1", "u1pw")));
  }, 60_000);
});

describe("simple tokens (--auth-token-ttl)", () => {
  it("a token unused for longer than --auth-token-ttl is an invalid auth token; a new one works", async () => {
    const { c: cl } = await startWithAuth(() => ["--auth-token=simple", "--auth-token-ttl=2"]);
    const t = await authenticate(cl, "u1", "u1pw");
    // A simple token is <16 random letters>.<raft index>.
    expect(t).toMatch(/^[a-zA-Z]{16}\.\d+$/);
    await unary(cl.kv, "Put", { key: b("app/s"), value: b("1") }, md(t));
    // A token in use stays valid past the ttl (each use restarts it); unused for longer than ttl plus the
    // keeper's one-second resolution, it is gone.
    for (let i = 0; i < 3; i++) {
      await sleep(1_000);
      await unary(cl.kv, "Range", { key: b("app/s") }, md(t));
    }
    const t2 = await authenticate(cl, "u1", "u1pw");
    await unary(cl.kv, "Range", { key: b("app/s") }, md(t2));
    await sleep(4_000);
    await expectStatus(unary(cl.kv, "Range", { key: b("app/s") }, md(t2)), grpc.status.UNAUTHENTICATED, "etcdserver: invalid auth token");
    await expectStatus(unary(cl.kv, "Put", { key: b("app/s"), value: b("2") }, md(t2)), grpc.status.UNAUTHENTICATED, "etcdserver: invalid auth token");
    const t3 = await authenticate(cl, "u1", "u1pw");
    const r = await unary<{ kvs: Array<{ value: Buffer }> }>(cl.kv, "Range", { key: b("app/s") }, md(t3));
    expect(r.kvs.map((kv) => kv.value.toString())).toEqual(["1"]);
  }, 60_000);
});
