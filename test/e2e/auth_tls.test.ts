/**
 * Auth over client TLS with --client-cert-auth (issue 14): a request that carries no token is made
 * as the user named by its verified certificate's CN, as etcd 3.4's AuthInfoFromTLS does; a token,
 * when present, wins. Certificates are made with openssl in the test. E2E_TARGET=etcd runs the same
 * against real etcd.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { etcdctl, Member } from "./harness.js";
import { enableAuthWithRootAndU1 } from "./auth_setup.js";
import { type Ca, type Leaf, makeCa, makeLeaf } from "./tls_certs.js";
import { singleMemberArgs } from "./tls_process.js";

const dir = mkdtempSync(join(tmpdir(), "etcetera-auth-tls-"));
let ca: Ca;
let rootCert: Leaf;
let u1Cert: Leaf;
let ghostCert: Leaf;
let member: Member | undefined;
let endpoint = "";

const tlsArgs = (leaf: Leaf) => [`--cacert=${ca.cert}`, `--cert=${leaf.cert}`, `--key=${leaf.key}`];

async function run(leaf: Leaf, ...args: string[]): Promise<{ code: number; out: string; err: string }> {
  const r = await etcdctl(endpoint, [...tlsArgs(leaf), ...args]);
  const lines = r.stderr.trim().split("\n");
  return { code: r.code, out: r.stdout, err: lines[lines.length - 1]! };
}
async function ok(leaf: Leaf, ...args: string[]): Promise<string> {
  const r = await run(leaf, ...args);
  if (r.code !== 0) throw new Error(`etcdctl ${args.join(" ")} failed (${r.code}): ${r.err}\n${member?.log.slice(-3000) ?? ""}`);
  return r.out;
}
async function fails(leaf: Leaf, ...args: string[]): Promise<string> {
  const r = await run(leaf, ...args);
  if (r.code === 0) throw new Error(`etcdctl ${args.join(" ")} succeeded: ${r.out}`);
  return r.err;
}

beforeAll(async () => {
  ca = makeCa(dir, "ca");
  const server = makeLeaf(ca, "server");
  rootCert = makeLeaf(ca, "root", []);
  u1Cert = makeLeaf(ca, "u1", []);
  ghostCert = makeLeaf(ca, "ghost", []);
  const m = await singleMemberArgs(join(dir, "m1"), "https", "http");
  member = new Member({ name: "m1", clientPort: m.clientPort, peerPort: m.peerPort, dataDir: join(dir, "m1") }, [
    ...m.args,
    `--cert-file=${server.cert}`,
    `--key-file=${server.key}`,
    `--trusted-ca-file=${ca.cert}`,
    "--client-cert-auth",
  ]);
  member.start();
  await member.waitReady();
  endpoint = `https://127.0.0.1:${m.clientPort}`;
  expect(await enableAuthWithRootAndU1((...args) => ok(rootCert, ...args))).toBe("Authentication Enabled\n");
}, 60_000);

afterAll(async () => {
  await member?.kill();
  rmSync(dir, { recursive: true, force: true });
});

describe("the client certificate's CN is the user (--client-cert-auth, auth enabled)", () => {
  it("CN=root may do anything without a password: writes anywhere, manages auth", async () => {
    expect(await ok(rootCert, "put", "secret", "s")).toBe("OK\n");
    expect(await ok(rootCert, "get", "secret", "--print-value-only")).toBe("s\n");
    expect(await ok(rootCert, "user", "list")).toBe("root\nu1\n");
  });

  it("CN=u1 is held to u1's permissions", async () => {
    expect(await ok(u1Cert, "put", "app/a", "1")).toBe("OK\n");
    expect(await ok(u1Cert, "get", "app/a", "--print-value-only")).toBe("1\n");
    expect(await fails(u1Cert, "get", "secret")).toBe("Error: etcdserver: permission denied");
    expect(await fails(u1Cert, "put", "secret", "x")).toBe("Error: etcdserver: permission denied");
    expect(await fails(u1Cert, "user", "list")).toBe("Error: etcdserver: permission denied");
    expect(await ok(rootCert, "get", "secret", "--print-value-only")).toBe("s\n");
  });

  it("a CN that names no user gets nothing", async () => {
    expect(await fails(ghostCert, "get", "app/a")).toBe("Error: etcdserver: permission denied");
    expect(await fails(ghostCert, "put", "app/g", "1")).toBe("Error: etcdserver: permission denied");
    expect(await ok(rootCert, "get", "app/g")).toBe("");
  });

  it("a token wins over the certificate: u1's certificate with root's password acts as root, with u1's as u1", async () => {
    expect(await ok(u1Cert, "--user", "root:rootpw", "put", "secret", "t")).toBe("OK\n");
    expect(await ok(ghostCert, "--user", "u1:u1pw", "get", "app/a", "--print-value-only")).toBe("1\n");
    expect(await fails(rootCert, "--user", "u1:u1pw", "get", "secret")).toBe("Error: etcdserver: permission denied");
    expect(await fails(rootCert, "--user", "u1:wrong", "get", "app/a")).toBe("Error: etcdserver: authentication failed, invalid user ID or password");
  });

  it("a role change applies to the certificate's user at its next request", async () => {
    expect(await ok(rootCert, "user", "revoke-role", "u1", "r1")).toBe("Role r1 is revoked from user u1\n");
    expect(await fails(u1Cert, "get", "app/a")).toBe("Error: etcdserver: permission denied");
    expect(await ok(rootCert, "user", "grant-role", "u1", "r1")).toBe("Role r1 is granted to user u1\n");
    expect(await ok(u1Cert, "get", "app/a", "--print-value-only")).toBe("1\n");
  });
});
