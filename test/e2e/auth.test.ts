/**
 * Authentication and RBAC (issue 14) with Debian's etcdctl 3.4, the `etcd3` client and a plain
 * gRPC client, against a real single-member server. Every expectation is etcd 3.4's: run with
 * E2E_TARGET=etcd to check them against real etcd. The tests run in order on one cluster: auth is
 * enabled by the first ones and disabled by the last.
 */
import * as grpc from "@grpc/grpc-js";
import { Etcd3 } from "etcd3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { clients, expectStatus, unary } from "./grpc_client.js";
import { Cluster, etcdctl } from "./harness.js";

let cluster: Cluster;
let ep: string;
let c: ReturnType<typeof clients>;

const ROOT = ["--user", "root:rootpw"];
const U1 = ["--user", "u1:u1pw"];
const b = (s: string) => Buffer.from(s);

async function ok(...args: string[]): Promise<string> {
  const r = await etcdctl(ep, args);
  if (r.code !== 0) throw new Error(`etcdctl ${args.join(" ")} failed (${r.code}): ${r.stderr}\n${cluster.logs()}`);
  return r.stdout;
}
/** The last line etcdctl prints on stderr for a failing command (its "Error: ..." line). */
async function fails(...args: string[]): Promise<string> {
  const r = await etcdctl(ep, args);
  if (r.code === 0) throw new Error(`etcdctl ${args.join(" ")} succeeded: ${r.stdout}`);
  const lines = r.stderr.trim().split("\n");
  return lines[lines.length - 1]!;
}
async function token(name: string, password: string): Promise<string> {
  const r = await unary<{ token: string }>(c.auth, "Authenticate", { name, password });
  return r.token;
}
const md = (t: string) => ({ metadata: { token: t } });

interface WatchResp {
  watch_id: string;
  created: boolean;
  canceled: boolean;
  cancel_reason: string;
  events: Array<{ kv: { key: Buffer } }>;
}

/** A watch stream with the given token; resolves its first `n` responses. */
function watchResponses(t: string, create: object, n: number, after?: () => Promise<void>): Promise<WatchResp[]> {
  const m = new grpc.Metadata();
  m.set("token", t);
  const call = (c.watch as unknown as Record<string, (m: grpc.Metadata) => grpc.ClientDuplexStream<unknown, WatchResp>>).Watch!.call(c.watch, m);
  const got: WatchResp[] = [];
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      call.cancel();
      reject(new Error(`watch: ${got.length} of ${n} responses: ${JSON.stringify(got)}`));
    }, 10_000);
    call.on("error", () => {});
    call.on("data", (r: WatchResp) => {
      got.push(r);
      if (got.length === 1 && after !== undefined) void after();
      if (got.length >= n) {
        clearTimeout(timer);
        call.cancel();
        resolve(got);
      }
    });
    call.write({ create_request: create });
  });
}

beforeAll(async () => {
  cluster = await Cluster.create({ size: 1 });
  await cluster.start();
  ep = cluster.endpoints;
  c = clients(cluster.members[0]!.endpoint);
});
afterAll(async () => {
  c?.close();
  await cluster?.destroy();
});

describe("auth enable", () => {
  it("is refused without a root user, then without the root role", async () => {
    expect(await fails("auth", "enable")).toBe("Error: etcdserver: root user does not exist");
    expect(await ok("user", "add", "root:rootpw")).toBe("User root created\n");
    expect(await fails("user", "add", "root:again")).toBe("Error: etcdserver: user name already exists");
    await expectStatus(unary(c.auth, "AuthEnable", {}), grpc.status.FAILED_PRECONDITION, "etcdserver: root user does not have root role");
  });

  it("succeeds once root has the root role; then a request without a token is refused and writes nothing", async () => {
    expect(await ok("role", "add", "root")).toBe("Role root created\n");
    expect(await ok("user", "grant-role", "root", "root")).toBe("Role root is granted to user root\n");
    expect(await ok("auth", "enable")).toBe("Authentication Enabled\n");
    // Enabling again is no error (etcd ignores it).
    expect(await ok(...ROOT, "auth", "enable")).toBe("Authentication Enabled\n");

    expect(await fails("put", "nobody", "1")).toBe("Error: etcdserver: user name is empty");
    expect(await fails("get", "nobody")).toBe("Error: etcdserver: user name is empty");
    await expectStatus(unary(c.kv, "Put", { key: b("nobody"), value: b("2") }), grpc.status.INVALID_ARGUMENT, "etcdserver: user name is empty");
    await expectStatus(unary(c.kv, "Put", { key: b("nobody"), value: b("3") }, md("forged.1")), grpc.status.UNAUTHENTICATED, "etcdserver: invalid auth token");
    await expectStatus(unary(c.kv, "Put", { key: b("nobody"), value: b("4") }, md("garbage")), grpc.status.UNAUTHENTICATED, "etcdserver: invalid auth token");
    await expectStatus(
      unary(c.kv, "Txn", { success: [{ request_put: { key: b("nobody"), value: b("5") } }] }, md("forged.2")),
      grpc.status.UNAUTHENTICATED,
      "etcdserver: invalid auth token",
    );
    expect(await ok(...ROOT, "get", "nobody")).toBe("");
    expect(await ok(...ROOT, "put", "nobody", "root")).toBe("OK\n");
    expect(await ok(...ROOT, "get", "nobody", "--print-value-only")).toBe("root\n");
  });

  it("a wrong password or an unknown user is refused with etcd's error", async () => {
    expect(await fails("--user", "root:wrong", "get", "a")).toBe("Error: etcdserver: authentication failed, invalid user ID or password");
    await expectStatus(unary(c.auth, "Authenticate", { name: "root", password: "wrong" }), grpc.status.INVALID_ARGUMENT, "etcdserver: authentication failed, invalid user ID or password");
    await expectStatus(unary(c.auth, "Authenticate", { name: "ghost", password: "x" }), grpc.status.INVALID_ARGUMENT, "etcdserver: authentication failed, invalid user ID or password");
  });
});

describe("users and roles", () => {
  it("adds, lists, gets and grants as etcdctl shows it", async () => {
    expect(await ok(...ROOT, "user", "add", "u1:u1pw")).toBe("User u1 created\n");
    expect(await ok(...ROOT, "user", "add", "u2:u2pw")).toBe("User u2 created\n");
    expect(await ok(...ROOT, "role", "add", "r1")).toBe("Role r1 created\n");
    expect(await ok(...ROOT, "role", "grant-permission", "r1", "readwrite", "app/", "--prefix")).toBe("Role r1 updated\n");
    expect(await ok(...ROOT, "role", "grant-permission", "r1", "read", "pub/", "--from-key")).toBe("Role r1 updated\n");
    expect(await ok(...ROOT, "role", "grant-permission", "r1", "write", "a1")).toBe("Role r1 updated\n");
    expect(await ok(...ROOT, "user", "grant-role", "u1", "r1")).toBe("Role r1 is granted to user u1\n");
    expect(await ok(...ROOT, "user", "list")).toBe("root\nu1\nu2\n");
    expect(await ok(...ROOT, "role", "list")).toBe("r1\nroot\n");
    expect(await ok(...ROOT, "user", "get", "u1")).toBe("User: u1\nRoles: r1\n");
    expect(await ok(...ROOT, "role", "get", "r1")).toBe("Role r1\nKV Read:\n\t[app/, app0) (prefix app/)\n\t[pub/, <open ended>\nKV Write:\n\ta1\n\t[app/, app0) (prefix app/)\n");
    // A user may read itself and its own roles.
    expect(await ok(...U1, "user", "get", "u1")).toBe("User: u1\nRoles: r1\n");
    expect(await ok(...U1, "role", "get", "r1")).toContain("Role r1\n");
  });

  it("answers etcd's errors for duplicates, missing names and forbidden changes", async () => {
    expect(await fails(...ROOT, "user", "add", "u1:x")).toBe("Error: etcdserver: user name already exists");
    expect(await fails(...ROOT, "role", "add", "r1")).toBe("Error: etcdserver: role name already exists");
    expect(await fails(...ROOT, "user", "get", "ghost")).toBe("Error: etcdserver: user name not found");
    expect(await fails(...ROOT, "role", "get", "nope")).toBe("Error: etcdserver: role name not found");
    expect(await fails(...ROOT, "user", "grant-role", "u1", "nope")).toBe("Error: etcdserver: role name not found");
    expect(await fails(...ROOT, "user", "revoke-role", "u2", "r1")).toBe("Error: etcdserver: role is not granted to the user");
    expect(await fails(...ROOT, "role", "revoke-permission", "r1", "nokey")).toBe("Error: etcdserver: permission is not granted to the role");
    expect(await fails(...ROOT, "user", "delete", "root")).toBe("Error: etcdserver: invalid auth management");
    expect(await fails(...ROOT, "user", "revoke-role", "root", "root")).toBe("Error: etcdserver: invalid auth management");
    expect(await fails(...ROOT, "role", "delete", "root")).toBe("Error: etcdserver: invalid auth management");
    await expectStatus(unary(c.auth, "RoleAdd", { name: "" }, md(await token("root", "rootpw"))), grpc.status.INVALID_ARGUMENT, "etcdserver: role name is empty");
    await expectStatus(unary(c.auth, "UserAdd", { name: "" }, md(await token("root", "rootpw"))), grpc.status.INVALID_ARGUMENT, "etcdserver: user name is empty");
  });

  it("a user without the root role may not manage auth or read others", async () => {
    for (const args of [["user", "list"], ["role", "list"], ["user", "add", "x:y"], ["role", "add", "x"], ["user", "get", "u2"], ["role", "get", "root"], ["auth", "disable"]]) {
      expect(await fails(...U1, ...args), args.join(" ")).toBe("Error: etcdserver: permission denied");
    }
  });

  it("a changed password takes effect; a deleted user cannot log in", async () => {
    const passwd = await etcdctl(ep, [...ROOT, "user", "passwd", "u2", "--interactive=false"], "newpw\n");
    expect(passwd.stdout).toBe("Password updated\n");
    expect(await ok("--user", "u2:newpw", "user", "get", "u2")).toBe("User: u2\nRoles:\n");
    expect(await fails("--user", "u2:u2pw", "get", "app/x")).toBe("Error: etcdserver: authentication failed, invalid user ID or password");
    expect(await ok(...ROOT, "user", "delete", "u2")).toBe("User u2 deleted\n");
    expect(await fails("--user", "u2:u2pw", "get", "app/x")).toBe("Error: etcdserver: authentication failed, invalid user ID or password");
  });
});

describe("permissions", () => {
  it("prefix, from-key and single-key permissions allow and deny reads and writes", async () => {
    expect(await ok(...U1, "put", "app/a", "1")).toBe("OK\n");
    expect(await ok(...U1, "get", "app/", "--prefix")).toBe("app/a\n1\n");
    expect(await ok(...U1, "put", "a1", "x")).toBe("OK\n");
    expect(await fails(...U1, "get", "a1")).toBe("Error: etcdserver: permission denied");
    expect(await fails(...U1, "put", "a10", "x")).toBe("Error: etcdserver: permission denied");
    expect(await fails(...U1, "put", "other", "1")).toBe("Error: etcdserver: permission denied");
    expect(await fails(...U1, "get", "other")).toBe("Error: etcdserver: permission denied");
    expect(await ok(...ROOT, "put", "pub/a", "p")).toBe("OK\n");
    expect(await ok(...ROOT, "put", "zzz", "z")).toBe("OK\n");
    expect(await ok(...U1, "get", "pub/a", "--print-value-only")).toBe("p\n");
    expect(await ok(...U1, "get", "zzz", "--print-value-only")).toBe("z\n");
    expect(await ok(...U1, "get", "pub/", "--from-key", "--keys-only")).toBe("pub/a\n\nzzz\n\n");
    expect(await fails(...U1, "put", "pub/a", "x")).toBe("Error: etcdserver: permission denied");
    // [app/, pub/) is not all covered: between them lies "other".
    expect(await fails(...U1, "get", "app/", "--from-key")).toBe("Error: etcdserver: permission denied");
    expect(await fails(...U1, "get", "", "--prefix")).toBe("Error: etcdserver: permission denied");
    expect(await fails(...U1, "del", "other")).toBe("Error: etcdserver: permission denied");
    expect(await ok(...U1, "del", "app/a")).toBe("1\n");
    expect(await ok(...ROOT, "get", "other")).toBe("");
  });

  it("a txn needs permission for every compare and every op of both branches", async () => {
    const t = await token("u1", "u1pw");
    const allowed = await unary<{ succeeded: boolean }>(
      c.kv,
      "Txn",
      {
        compare: [{ key: b("app/t"), target: "VERSION", result: "EQUAL", version: "0" }],
        success: [{ request_put: { key: b("app/t"), value: b("1") } }, { request_range: { key: b("pub/a") } }],
        failure: [{ request_range: { key: b("app/t") } }],
      },
      md(t),
    );
    expect(allowed.succeeded).toBe(true);
    // The failure branch is not taken, its op is still checked.
    await expectStatus(
      unary(c.kv, "Txn", { success: [{ request_put: { key: b("app/t2"), value: b("1") } }], failure: [{ request_put: { key: b("other"), value: b("1") } }] }, md(t)),
      grpc.status.PERMISSION_DENIED,
      "etcdserver: permission denied",
    );
    await expectStatus(
      unary(c.kv, "Txn", { compare: [{ key: b("other"), target: "VERSION", result: "EQUAL", version: "0" }], success: [{ request_put: { key: b("app/t3"), value: b("1") } }] }, md(t)),
      grpc.status.PERMISSION_DENIED,
      "etcdserver: permission denied",
    );
    // A read-only txn is checked too.
    await expectStatus(unary(c.kv, "Txn", { success: [{ request_range: { key: b("other") } }] }, md(t)), grpc.status.PERMISSION_DENIED, "etcdserver: permission denied");
    // Denied txns wrote nothing.
    expect(await ok(...ROOT, "get", "app/t2")).toBe("");
    expect(await ok(...ROOT, "get", "app/t3")).toBe("");
    expect(await ok(...ROOT, "get", "other")).toBe("");
  });

  it("a watch outside the user's permissions is created canceled with permission denied; an allowed one sees events", async () => {
    const t = await token("u1", "u1pw");
    const denied = await watchResponses(t, { key: b("other") }, 1);
    // etcd's cancel reason is the gRPC error's text (rpctypes.ErrGRPCPermissionDenied.Error()).
    expect(denied.map((r) => [r.watch_id, r.created, r.canceled, r.cancel_reason])).toEqual([
      ["-1", true, true, "rpc error: code = PermissionDenied desc = etcdserver: permission denied"],
    ]);
    const deniedWithId = await watchResponses(t, { key: b("other"), watch_id: "7" }, 1);
    expect(deniedWithId.map((r) => [r.watch_id, r.canceled])).toEqual([["-1", true]]);
    const allowed = await watchResponses(t, { key: b("app/"), range_end: b("app0") }, 2, async () => {
      await ok(...ROOT, "put", "app/w", "1");
    });
    expect(allowed[0]!.created).toBe(true);
    expect(allowed[1]!.events.map((e) => e.kv.key.toString())).toEqual(["app/w"]);
  });

  it("revoking a lease needs write permission on every key attached to it", async () => {
    const t = await token("u1", "u1pw");
    const { ID } = await unary<{ ID: string }>(c.lease, "LeaseGrant", { TTL: "100" }, md(t));
    expect(await ok(...ROOT, "put", "secret", "s", `--lease=${BigInt(ID).toString(16)}`)).toBe("OK\n");
    // Attaching more keys to a lease the user could not revoke is refused too.
    await expectStatus(unary(c.kv, "Put", { key: b("app/l"), value: b("1"), lease: ID }, md(t)), grpc.status.PERMISSION_DENIED, "etcdserver: permission denied");
    await expectStatus(unary(c.lease, "LeaseRevoke", { ID }, md(t)), grpc.status.PERMISSION_DENIED, "etcdserver: permission denied");
    expect(await ok(...ROOT, "get", "secret", "--print-value-only")).toBe("s\n");
    expect(await ok(...ROOT, "lease", "revoke", BigInt(ID).toString(16))).toContain("revoked\n");
    expect(await ok(...ROOT, "get", "secret")).toBe("");
  });

  it("a lock outside the user's permissions is refused; inside them it is granted", async () => {
    const t = await token("u1", "u1pw");
    const { ID } = await unary<{ ID: string }>(c.lease, "LeaseGrant", { TTL: "30" }, md(t));
    const got = await unary<{ key: Buffer }>(c.lock, "Lock", { name: b("app/lk"), lease: ID }, md(t));
    expect(got.key.toString()).toBe(`app/lk/${BigInt(ID).toString(16)}`);
    await unary(c.lock, "Unlock", { key: got.key }, md(t));
    await expectStatus(unary(c.lock, "Lock", { name: b("nolock"), lease: ID }, md(t)), grpc.status.UNKNOWN, "etcdserver: permission denied");
  });

  it("a revoked permission or role takes effect at the next request, with the same token", async () => {
    const t = await token("u1", "u1pw");
    await unary(c.kv, "Put", { key: b("app/r"), value: b("1") }, md(t));
    expect(await ok(...ROOT, "role", "revoke-permission", "r1", "app/", "--prefix")).toBe("Permission of range [app/, app0) is revoked from role r1\n");
    await expectStatus(unary(c.kv, "Range", { key: b("app/r") }, md(t)), grpc.status.PERMISSION_DENIED, "etcdserver: permission denied");
    await expectStatus(unary(c.kv, "Put", { key: b("app/r"), value: b("2") }, md(t)), grpc.status.PERMISSION_DENIED, "etcdserver: permission denied");
    expect(await ok(...ROOT, "role", "grant-permission", "r1", "readwrite", "app/", "--prefix")).toBe("Role r1 updated\n");
    await unary(c.kv, "Put", { key: b("app/r"), value: b("3") }, md(t));
    expect(await ok(...ROOT, "user", "revoke-role", "u1", "r1")).toBe("Role r1 is revoked from user u1\n");
    await expectStatus(unary(c.kv, "Range", { key: b("app/r") }, md(t)), grpc.status.PERMISSION_DENIED, "etcdserver: permission denied");
    expect(await ok(...ROOT, "user", "grant-role", "u1", "r1")).toBe("Role r1 is granted to user u1\n");
    expect(await ok(...ROOT, "get", "app/r", "--print-value-only")).toBe("3\n");
  });

  it("admin RPCs need the root role (etcd 3.4: maintenance errors unmapped, code Unknown); status, alarms and compaction do not", async () => {
    expect(await fails(...U1, "defrag")).toContain("auth: permission denied");
    expect(await fails(...U1, "endpoint", "hash")).toContain("auth: permission denied");
    const t = await token("u1", "u1pw");
    await expectStatus(unary(c.maintenance, "Defragment", {}, md(t)), grpc.status.UNKNOWN, "auth: permission denied");
    await expectStatus(unary(c.maintenance, "Hash", {}, md(t)), grpc.status.UNKNOWN, "auth: permission denied");
    await expectStatus(unary(c.maintenance, "HashKV", { revision: "0" }, md(t)), grpc.status.UNKNOWN, "auth: permission denied");
    await expectStatus(unary(c.maintenance, "Defragment", {}), grpc.status.UNKNOWN, "auth: user name is empty");
    await expectStatus(unary(c.maintenance, "Defragment", {}, md("forged.1")), grpc.status.UNKNOWN, "auth: invalid auth token");
    const snap = await etcdctl(ep, [...U1, "snapshot", "save", `${cluster.dir}/u1.db`]);
    expect(snap.code).not.toBe(0);
    expect(snap.stderr).toContain("auth: permission denied");
    expect(await ok(...U1, "endpoint", "status")).toContain("true, false");
    expect(await ok(...U1, "alarm", "list")).toBe("");
    expect(await ok(...U1, "member", "list")).toContain("started, n1");
    expect(await fails(...U1, "member", "add", "n9", "--peer-urls=http://127.0.0.1:9")).toBe("Error: etcdserver: permission denied");
    expect(await fails(...U1, "member", "remove", "1234")).toBe("Error: etcdserver: permission denied");
    expect(await ok(...ROOT, "defrag")).toContain("Finished defragmenting etcd member");
    expect(await ok(...ROOT, "endpoint", "hash")).toContain(ep);
  });

  it("the etcd3 client authenticates and is held to the user's permissions", async () => {
    const e3 = new Etcd3({ hosts: cluster.members[0]!.clientUrl, auth: { username: "u1", password: "u1pw" } });
    try {
      await e3.put("app/e3").value("v");
      expect(await e3.get("app/e3").string()).toBe("v");
      await expect(e3.put("other").value("v")).rejects.toThrow("etcdserver: permission denied");
      await expect(e3.get("other").string()).rejects.toThrow("etcdserver: permission denied");
    } finally {
      e3.close();
    }
    const bad = new Etcd3({ hosts: cluster.members[0]!.clientUrl, auth: { username: "u1", password: "nope" } });
    try {
      await expect(bad.get("app/e3").string()).rejects.toThrow("etcdserver: authentication failed, invalid user ID or password");
    } finally {
      bad.close();
    }
  });
});

describe("auth disable", () => {
  it("needs root; afterwards requests need no token", async () => {
    expect(await fails("auth", "disable")).toBe("Error: etcdserver: user name is empty");
    expect(await ok(...ROOT, "auth", "disable")).toBe("Authentication Disabled\n");
    expect(await ok("put", "free", "1")).toBe("OK\n");
    expect(await ok("get", "free", "--print-value-only")).toBe("1\n");
    await expectStatus(unary(c.auth, "Authenticate", { name: "root", password: "rootpw" }), grpc.status.FAILED_PRECONDITION, "etcdserver: authentication is not enabled");
    // The users and roles are kept for the next enable.
    expect(await ok("user", "list")).toBe("root\nu1\n");
  });
});
