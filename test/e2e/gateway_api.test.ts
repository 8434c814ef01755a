/**
 * The JSON gateway's Lease, Cluster, Maintenance, lock and election paths, and the CORS policy of
 * --cors, with node's http, compared field by field with etcd 3.4's answers (E2E_TARGET=etcd).
 * Normalized: member and cluster ids; lease ids are taken from the grant; the status counters that
 * two implementations cannot share (raft index, database size, version).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { b64, normalizeIds, openStream, post, request, type JsonObject } from "./gateway_client.js";
import { gatewayPaths } from "../../src/gateway/index.js";
import { gatewayHeader, useGatewayMember } from "./gateway_member.js";
import { Cluster } from "./harness.js";

const gw = useGatewayMember();
const hdr = gatewayHeader;

async function ok(path: string, body: unknown): Promise<JsonObject> {
  const r = await post(gw.endpoint, path, body);
  expect(r.status, `${path}: ${r.answer.body}`).toBe(200);
  return r.json;
}

describe("Lease over the JSON gateway", () => {
  it("grant, attach, timetolive with keys, leases, revoke (and the /v3/kv/lease/ aliases)", async () => {
    const grant = await ok("/v3/lease/grant", { TTL: "60" });
    const id = grant["ID"] as string;
    expect(id).toMatch(/^\d+$/);
    expect(normalizeIds(grant)).toEqual({ header: hdr("1"), ID: "<id>", TTL: "60" });
    await ok("/v3/kv/put", { key: b64("l"), value: b64("v"), lease: id });
    const range = await ok("/v3/kv/range", { key: b64("l") });
    expect(normalizeIds(range)).toEqual({
      header: hdr("2"),
      kvs: [{ key: b64("l"), create_revision: "2", mod_revision: "2", version: "1", value: b64("v"), lease: id }],
      count: "1",
    });
    for (const path of ["/v3/lease/timetolive", "/v3/kv/lease/timetolive"]) {
      const ttl = await ok(path, { ID: id, keys: true });
      expect(Number(ttl["TTL"])).toBeGreaterThan(50);
      expect(normalizeIds({ ...ttl, TTL: "<ttl>" }, new Set(["ID"]))).toEqual({ header: hdr("2"), ID: id, TTL: "<ttl>", grantedTTL: "60", keys: [b64("l")] });
    }
    for (const path of ["/v3/lease/leases", "/v3/kv/lease/leases"]) {
      expect(normalizeIds(await ok(path, {}), new Set(["ID"]))).toEqual({ header: hdr("2"), leases: [{ ID: id }] });
    }
    expect(normalizeIds(await ok("/v3/lease/revoke", { ID: id }))).toEqual({ header: hdr("3") });
    // A lease that is gone: TTL -1, and no keys.
    expect(normalizeIds(await ok("/v3/lease/timetolive", { ID: id }), new Set(["ID"]))).toEqual({ header: hdr("3"), ID: id, TTL: "-1" });
    expect(normalizeIds(await ok("/v3/lease/leases", {}))).toEqual({ header: hdr("3") });
  });
});

describe("Cluster and Maintenance over the JSON gateway", () => {
  it("member list: etcd's camelCase proto names (peerURLs, clientURLs), a header without a revision", async () => {
    const m = gw.member;
    expect(normalizeIds(await ok("/v3/cluster/member/list", {}))).toEqual({
      header: { cluster_id: "<id>", member_id: "<id>", raft_term: "2" },
      members: [{ ID: "<id>", name: "n1", peerURLs: [`http://127.0.0.1:${m.spec.peerPort}`], clientURLs: [m.clientUrl] }],
    });
  });

  it("status: the proto's own names (dbSize, raftIndex, ...), the leader is this member", async () => {
    const s = await ok("/v3/maintenance/status", {});
    const header = s["header"] as JsonObject;
    expect(s["leader"]).toBe(header["member_id"]);
    for (const k of ["dbSize", "raftIndex", "raftAppliedIndex", "dbSizeInUse"]) expect(s[k] as string, k).toMatch(/^\d+$/);
    expect(Object.keys(s)).toEqual(["header", "version", "dbSize", "leader", "raftIndex", "raftTerm", "raftAppliedIndex", "dbSizeInUse"]);
    expect(s["raftTerm"]).toBe("2");
  });

  it("hash (Hash: /v3/maintenance/hash is not HashKV in 3.4), alarm and defragment without a header", async () => {
    const h = await ok("/v3/maintenance/hash", { revision: "1" });
    expect(Object.keys(h)).toEqual(["header", "hash"]);
    expect(typeof h["hash"]).toBe("number");
    expect(await ok("/v3/maintenance/alarm", { action: "GET" })).toEqual({});
    expect(await ok("/v3/maintenance/defragment", {})).toEqual({});
  });

  it("snapshot: a stream of {result: {blob}} chunks, the last with remaining_bytes left out", async () => {
    const r = await request(gw.endpoint, "/v3/maintenance/snapshot", "{}");
    expect(r.status).toBe(200);
    expect(r.headers["content-type"]).toBe("application/json");
    const lines = r.body.trim().split("\n").map((l) => JSON.parse(l) as { result: JsonObject });
    expect(lines.length).toBeGreaterThan(0);
    for (const l of lines) expect(typeof l.result["blob"]).toBe("string");
    expect(lines.at(-1)!.result["remaining_bytes"]).toBeUndefined();
    const size = lines.reduce((n, l) => n + Buffer.from(l.result["blob"] as string, "base64").length, 0);
    expect(size).toBeGreaterThan(0);
  });
});

describe("lock and election over the JSON gateway", () => {
  it("lock with a lease, then unlock", async () => {
    const id = (await ok("/v3/lease/grant", { TTL: "60" }))["ID"] as string;
    const lock = await ok("/v3/lock/lock", { name: b64("mylock"), lease: id });
    const key = Buffer.from(lock["key"] as string, "base64").toString();
    expect(key).toBe(`mylock/${BigInt(id).toString(16)}`);
    expect(normalizeIds(lock)).toEqual({ header: hdr("4"), key: b64(key) });
    expect(normalizeIds(await ok("/v3/lock/unlock", { key: lock["key"] }))).toEqual({ header: hdr("5") });
  });

  it("campaign, leader, proclaim, observe (a stream), resign", async () => {
    const id = (await ok("/v3/lease/grant", { TTL: "60" }))["ID"] as string;
    const name = b64("myelection");
    const c = await ok("/v3/election/campaign", { name, lease: id, value: b64("v1") });
    const leader = c["leader"] as JsonObject;
    const key = `myelection/${BigInt(id).toString(16)}`;
    expect(normalizeIds(c, new Set(["ID"]))).toEqual({ header: hdr("6"), leader: { name, key: b64(key), rev: "6", lease: id } });
    const kv = { key: b64(key), create_revision: "6", mod_revision: "6", version: "1", value: b64("v1"), lease: id };
    expect(normalizeIds(await ok("/v3/election/leader", { name }))).toEqual({ header: hdr("6"), kv });
    expect(normalizeIds(await ok("/v3/election/proclaim", { leader, value: b64("v2") }))).toEqual({ header: hdr("7") });
    // Observe never ends by itself: read its first chunk, then hang up.
    const observe = await openStream(gw.endpoint, "/v3/election/observe", [JSON.stringify({ name })]);
    const first = await observe.next();
    observe.close();
    expect(normalizeIds(first)).toEqual({
      result: { header: hdr("7"), kv: { ...kv, mod_revision: "7", version: "2", value: b64("v2") } },
    });
    expect(normalizeIds(await ok("/v3/election/resign", { leader }))).toEqual({ header: hdr("8") });
    const none = await post(gw.endpoint, "/v3/election/leader", { name });
    expect([none.status, none.json]).toEqual([500, { error: "election: no leader", message: "election: no leader", code: 2 }]);
  });
});

describe("--cors with a list of origins", () => {
  let listed: Cluster;
  beforeAll(async () => {
    listed = await Cluster.create({ size: 1, extraArgs: ["--cors=http://a.example:8080,http://b.example:8080"] });
    await listed.start();
  });
  afterAll(async () => {
    await listed?.destroy();
  });

  it("an allowed origin is echoed back; another origin, or none, gets no CORS headers", async () => {
    const lep = listed.members[0]!.endpoint;
    const body = JSON.stringify({ key: b64("a") });
    const allowed = await request(lep, "/v3/kv/range", body, { headers: { origin: "http://b.example:8080" } });
    expect(allowed.status).toBe(200);
    expect(allowed.headers["access-control-allow-origin"]).toBe("http://b.example:8080");
    expect(allowed.headers["access-control-allow-headers"]).toBe("accept, content-type, authorization");
    const other = await request(lep, "/v3/kv/range", body, { headers: { origin: "http://c.example" } });
    expect(other.status).toBe(200);
    expect(other.headers["access-control-allow-origin"]).toBeUndefined();
    expect((await request(lep, "/v3/kv/range", body)).headers["access-control-allow-origin"]).toBeUndefined();
    const preflight = await request(lep, "/v3/kv/range", "", { method: "OPTIONS", headers: { origin: "http://a.example:8080" } });
    expect([preflight.status, preflight.headers["access-control-allow-origin"]]).toEqual([200, "http://a.example:8080"]);
  });
});

describe("every path of etcd 3.4's gateway", () => {
  // Long-lived by nature with an empty request: a watch, an observe, a campaign for the empty name.
  const LONG_LIVED = new Set(["/v3/watch", "/v3/election/observe", "/v3/election/campaign"]);

  it("is served: a JSON answer, never the mux's 404 or 405", async () => {
    const paths = gatewayPaths();
    expect(paths.length).toBe(48);
    for (const path of paths) {
      if (LONG_LIVED.has(path)) continue;
      const r = await request(gw.endpoint, path, "{}");
      // The mux's own 404 and 405 are text/plain; a call's answer (an error too) is JSON.
      expect([path, r.headers["content-type"]], r.body).toEqual([path, "application/json"]);
      expect(() => JSON.parse(r.body.split("\n")[0]!), `${path}: ${r.body}`).not.toThrow();
    }
  });
});
