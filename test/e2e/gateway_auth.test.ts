/**
 * Auth over the JSON gateway (issues 14 and 17): POST /v3/auth/authenticate answers a token, which
 * later requests carry in the `Authorization` header as etcd's grpc-gateway passes it on; without
 * it, or with a forged one, or outside the user's permissions, the answer is etcd's error JSON with
 * etcd's HTTP status. The auth admin paths work with root's token. Compared with real etcd's
 * answers: E2E_TARGET=etcd runs the same expectations.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { b64, normalizeIds, openStream, post, type JsonObject } from "./gateway_client.js";
import { gatewayHeader, useGatewayMember } from "./gateway_member.js";
import { etcdctl } from "./harness.js";
import { enableAuthWithRootAndU1 } from "./auth_setup.js";

const gw = useGatewayMember();
const err = (message: string, code: number) => ({ error: message, message, code });
const json = (o: unknown) => JSON.stringify(o);

async function ctl(...args: string[]): Promise<string> {
  const r = await etcdctl(gw.endpoint, args);
  if (r.code !== 0) throw new Error(`etcdctl ${args.join(" ")} failed: ${r.stderr}\n${gw.member.log.slice(-3000)}`);
  return r.stdout;
}

async function login(name: string, password: string): Promise<string> {
  const r = await post(gw.endpoint, "/v3/auth/authenticate", { name, password });
  expect(r.status, r.answer.body).toBe(200);
  const body = normalizeIds(r.json) as JsonObject;
  expect(Object.keys(body).sort()).toEqual(["header", "token"]);
  expect(typeof body.token).toBe("string");
  return body.token as string;
}

beforeAll(async () => {
  expect(await enableAuthWithRootAndU1((...args) => ctl(...args))).toBe("Authentication Enabled\n");
});

describe("auth over the JSON gateway", () => {
  it("authenticate: a token with a header; a wrong password is 400 with etcd's message", async () => {
    const t = await login("u1", "u1pw");
    expect(t).toMatch(/^[a-zA-Z]{16}\.\d+$/);
    const bad = await post(gw.endpoint, "/v3/auth/authenticate", { name: "u1", password: "nope" });
    expect([bad.status, bad.json]).toEqual([400, err("etcdserver: authentication failed, invalid user ID or password", 3)]);
  });

  it("without a token a request is refused and writes nothing; a forged token is 401", async () => {
    const none = await post(gw.endpoint, "/v3/kv/put", { key: b64("app/x"), value: b64("1") });
    expect([none.status, none.json]).toEqual([400, err("etcdserver: user name is empty", 3)]);
    const forged = await post(gw.endpoint, "/v3/kv/put", { key: b64("app/x"), value: b64("1") }, { Authorization: "forged.1" });
    expect([forged.status, forged.json]).toEqual([401, err("etcdserver: invalid auth token", 16)]);
    const read = await post(gw.endpoint, "/v3/kv/range", { key: b64("app/x") }, { Authorization: await login("root", "rootpw") });
    expect(read.status).toBe(200);
    expect(read.json.kvs).toBeUndefined();
  });

  it("the token in the Authorization header: allowed inside the user's permissions, 403 outside", async () => {
    const t = await login("u1", "u1pw");
    const put = await post(gw.endpoint, "/v3/kv/put", { key: b64("app/a"), value: b64("v") }, { Authorization: t });
    expect([put.status, normalizeIds(put.json)]).toEqual([200, { header: gatewayHeader("2") }]);
    const range = await post(gw.endpoint, "/v3/kv/range", { key: b64("app/a") }, { Authorization: t });
    expect(normalizeIds(range.json)).toEqual({
      header: gatewayHeader("2"),
      kvs: [{ key: b64("app/a"), create_revision: "2", mod_revision: "2", version: "1", value: b64("v") }],
      count: "1",
    });
    const denied = await post(gw.endpoint, "/v3/kv/put", { key: b64("other"), value: b64("v") }, { Authorization: t });
    expect([denied.status, denied.json]).toEqual([403, err("etcdserver: permission denied", 7)]);
    const txn = await post(gw.endpoint, "/v3/kv/txn", { success: [{ request_range: { key: b64("other") } }] }, { Authorization: t });
    expect([txn.status, txn.json]).toEqual([403, err("etcdserver: permission denied", 7)]);
    const users = await post(gw.endpoint, "/v3/auth/user/list", {}, { Authorization: t });
    expect([users.status, users.json]).toEqual([403, err("etcdserver: permission denied", 7)]);
  });

  it("root's token manages auth over the gateway", async () => {
    const t = await login("root", "rootpw");
    const users = await post(gw.endpoint, "/v3/auth/user/list", {}, { Authorization: t });
    expect([users.status, normalizeIds(users.json)]).toEqual([200, { header: gatewayHeader("2"), users: ["root", "u1"] }]);
    const role = await post(gw.endpoint, "/v3/auth/role/get", { role: "r1" }, { Authorization: t });
    expect([role.status, normalizeIds(role.json)]).toEqual([200, { header: gatewayHeader("2"), perm: [{ permType: "READWRITE", key: b64("app/"), range_end: b64("app0") }] }]);
  });

  it("a watch stream with the token sees the user's keys; without one, with a forged one or outside the permissions it is canceled with etcd's reason", async () => {
    const t = await login("u1", "u1pw");
    const w = await openStream(gw.endpoint, "/v3/watch", [json({ create_request: { key: b64("app/w") } })], { Authorization: t });
    try {
      expect(w.status).toBe(200);
      expect(normalizeIds(await w.next())).toEqual({ result: { header: gatewayHeader("2"), created: true } });
      const put = await post(gw.endpoint, "/v3/kv/put", { key: b64("app/w"), value: b64("1") }, { Authorization: t });
      expect(put.status).toBe(200);
      const ev = (await w.next()) as { result: { events: Array<{ kv: { key: string } }> } };
      expect(ev.result.events.map((e) => Buffer.from(e.kv.key, "base64").toString())).toEqual(["app/w"]);
    } finally {
      w.close();
    }
    const anon = await openStream(gw.endpoint, "/v3/watch", [json({ create_request: { key: b64("app/w") } })]);
    try {
      const first = normalizeIds(await anon.next());
      expect(first).toEqual({ result: { header: gatewayHeader("3"), watch_id: "-1", created: true, canceled: true, cancel_reason: "rpc error: code = InvalidArgument desc = etcdserver: user name is empty" } });
    } finally {
      anon.close();
    }
    const forged = await openStream(gw.endpoint, "/v3/watch", [json({ create_request: { key: b64("app/w") } })], { Authorization: "forged.1" });
    try {
      const first = normalizeIds(await forged.next());
      expect(first).toEqual({ result: { header: gatewayHeader("3"), watch_id: "-1", created: true, canceled: true, cancel_reason: "rpc error: code = Unauthenticated desc = etcdserver: invalid auth token" } });
    } finally {
      forged.close();
    }
    const outside = await openStream(gw.endpoint, "/v3/watch", [json({ create_request: { key: b64("other") } })], { Authorization: t });
    try {
      const first = normalizeIds(await outside.next());
      expect(first).toEqual({ result: { header: gatewayHeader("3"), watch_id: "-1", created: true, canceled: true, cancel_reason: "rpc error: code = PermissionDenied desc = etcdserver: permission denied" } });
    } finally {
      outside.close();
    }
  });
});
