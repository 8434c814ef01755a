/**
 * The auth state goes with a client's snapshot (issue 14): users (with their password hashes), roles
 * with their permissions, auth enabled and the auth revision are in etcd's authUsers, authRoles
 * and auth buckets of `etcdctl snapshot save`'s file. `etcdctl snapshot restore` makes a data dir
 * of it and real etcd 3.4 (whatever E2E_TARGET says) started there enforces them: auth is on, the
 * passwords work, u1 is held to its role. Against etcd this is the reference behaviour.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { snapshotStatus } from "../../src/etcd_format/index.js";
import { reservePort } from "../ports.js";
import { Cluster, etcdctl, Member } from "./harness.js";

let cluster: Cluster;
let dir: string;
let restored: Member | undefined;

const ROOT = ["--user", "root:rootpw"];

async function run(ep: string, args: string[]): Promise<{ code: number; out: string; err: string }> {
  const r = await etcdctl(ep, args);
  const lines = r.stderr.trim().split("\n");
  return { code: r.code, out: r.stdout, err: lines[lines.length - 1]! };
}
async function ok(ep: string, ...args: string[]): Promise<string> {
  const r = await run(ep, args);
  if (r.code !== 0) throw new Error(`etcdctl ${args.join(" ")} failed (${r.code}): ${r.err}\n${cluster.logs()}\n${restored?.log.slice(-3000) ?? ""}`);
  return r.out;
}
async function fails(ep: string, ...args: string[]): Promise<string> {
  const r = await run(ep, args);
  if (r.code === 0) throw new Error(`etcdctl ${args.join(" ")} succeeded: ${r.out}`);
  return r.err;
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "etcetera-snapshot-auth-"));
  cluster = await Cluster.create({ size: 1 });
  await cluster.start();
});
afterAll(async () => {
  await restored?.kill();
  await cluster?.destroy();
  rmSync(dir, { recursive: true, force: true });
});

describe("a snapshot carries users, roles and auth enabled", () => {
  it("etcd restored from it enforces the same users, passwords and permissions", { timeout: 120_000 }, async () => {
    const ep = cluster.members[0]!.endpoint;
    await ok(ep, "user", "add", "root:rootpw");
    await ok(ep, "role", "add", "root");
    await ok(ep, "user", "grant-role", "root", "root");
    await ok(ep, "user", "add", "u1:u1pw");
    await ok(ep, "user", "add", "u2:u2pw");
    await ok(ep, "role", "add", "r1");
    await ok(ep, "role", "grant-permission", "r1", "readwrite", "app/", "--prefix");
    await ok(ep, "role", "grant-permission", "r1", "read", "pub/", "--from-key");
    await ok(ep, "user", "grant-role", "u1", "r1");
    await ok(ep, "auth", "enable");
    await ok(ep, ...ROOT, "put", "app/a", "1");
    await ok(ep, ...ROOT, "put", "a-secret", "s");
    const sourceRole = await ok(ep, ...ROOT, "role", "get", "r1");

    const file = join(dir, "backup.db");
    const saved = await etcdctl(ep, [...ROOT, "snapshot", "save", file]);
    expect(saved.code, saved.stderr).toBe(0);
    // etcdctl's status (its own hash over every bucket) agrees with ours on the file.
    const status = JSON.parse(await ok(ep, "snapshot", "status", file, "-w", "json")) as { revision: number; totalKey: number; totalSize: number; hash: number };
    expect(snapshotStatus(file, { requireSnapshotHash: true })).toEqual(status);

    const spec = { name: "r1", clientPort: await reservePort(), peerPort: await reservePort(), dataDir: join(dir, "restored.etcd") };
    const peerUrl = `http://127.0.0.1:${spec.peerPort}`;
    await ok(ep, "snapshot", "restore", file, `--data-dir=${spec.dataDir}`, "--name=r1", `--initial-cluster=r1=${peerUrl}`, `--initial-advertise-peer-urls=${peerUrl}`, "--initial-cluster-token=restored");
    restored = new Member(
      spec,
      [
        "--name=r1",
        `--data-dir=${spec.dataDir}`,
        `--listen-client-urls=http://127.0.0.1:${spec.clientPort}`,
        `--advertise-client-urls=http://127.0.0.1:${spec.clientPort}`,
        `--listen-peer-urls=${peerUrl}`,
        `--initial-advertise-peer-urls=${peerUrl}`,
        `--initial-cluster=r1=${peerUrl}`,
        "--initial-cluster-token=restored",
      ],
      {},
      "etcd",
    );
    restored.start();
    await restored.waitReady();
    const rep = restored.endpoint;

    // Auth is on: no user, no access; a wrong password is refused.
    expect(await fails(rep, "get", "app/a")).toBe("Error: etcdserver: user name is empty");
    expect(await fails(rep, "put", "app/b", "1")).toBe("Error: etcdserver: user name is empty");
    expect(await fails(rep, "--user", "u1:nope", "get", "app/a")).toBe("Error: etcdserver: authentication failed, invalid user ID or password");
    // The users and roles, the password hashes (bcrypt, checked by etcd) and the grants.
    expect(await ok(rep, ...ROOT, "user", "list")).toBe("root\nu1\nu2\n");
    expect(await ok(rep, ...ROOT, "role", "list")).toBe("r1\nroot\n");
    expect(await ok(rep, ...ROOT, "user", "get", "u1")).toBe("User: u1\nRoles: r1\n");
    expect(await ok(rep, ...ROOT, "role", "get", "r1")).toBe(sourceRole);
    expect(await ok(rep, "--user", "u1:u1pw", "get", "app/a", "--print-value-only")).toBe("1\n");
    expect(await ok(rep, "--user", "u1:u1pw", "put", "app/b", "2")).toBe("OK\n");
    expect(await fails(rep, "--user", "u1:u1pw", "get", "a-secret")).toBe("Error: etcdserver: permission denied");
    expect(await fails(rep, "--user", "u2:u2pw", "get", "app/a")).toBe("Error: etcdserver: permission denied");
    expect(await ok(rep, ...ROOT, "get", "a-secret", "--print-value-only")).toBe("s\n");
    // The store keeps working: a change after the restore applies.
    expect(await ok(rep, ...ROOT, "user", "grant-role", "u2", "r1")).toBe("Role r1 is granted to user u2\n");
    expect(await ok(rep, "--user", "u2:u2pw", "get", "app/a", "--print-value-only")).toBe("1\n");
  });
});
