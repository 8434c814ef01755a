/**
 * The JSON gateway's unary paths, asked with real HTTP clients (node's http and curl) and compared
 * field by field with what etcd 3.4's grpc-gateway answers (E2E_TARGET=etcd runs the same
 * expectations against real etcd): protobuf's JSON mapping (proto names, int64 as strings, bytes
 * base64, defaults left out), /v3beta/, the mux's 404 and 405, and errors with etcd's statuses and
 * Go's words. Only member and cluster ids are normalized.
 */
import { describe, expect, it } from "vitest";
import { b64, curl, normalizeIds, post, request } from "./gateway_client.js";
import { gatewayHeader, useGatewayMember } from "./gateway_member.js";

const gw = useGatewayMember();
const hdr = gatewayHeader;

async function ok(path: string, body: unknown): Promise<unknown> {
  const r = await post(gw.endpoint, path, body);
  expect(r.status, `${path}: ${r.answer.body}`).toBe(200);
  expect(r.answer.headers["content-type"]).toBe("application/json");
  expect(r.answer.headers["grpc-metadata-content-type"]).toBe("application/grpc");
  return normalizeIds(r.json);
}

describe("KV over the JSON gateway", () => {
  it("put and range with curl, as etcd's README shows them", async () => {
    const put = await curl(["-X", "POST", `http://${gw.endpoint}/v3/kv/put`, "-d", JSON.stringify({ key: b64("foo"), value: b64("bar") })]);
    expect(normalizeIds(JSON.parse(put))).toEqual({ header: hdr("2") });
    const range = await curl(["-X", "POST", `http://${gw.endpoint}/v3/kv/range`, "-d", JSON.stringify({ key: b64("foo") })]);
    expect(normalizeIds(JSON.parse(range))).toEqual({
      header: hdr("2"),
      kvs: [{ key: b64("foo"), create_revision: "2", mod_revision: "2", version: "1", value: b64("bar") }],
      count: "1",
    });
  });

  it("put with prev_kv; an empty value is left out of the JSON; a miss has no kvs and no count", async () => {
    expect(await ok("/v3/kv/put", { key: b64("a"), value: "", prev_kv: true })).toEqual({ header: hdr("3") });
    expect(await ok("/v3/kv/put", { key: b64("a"), value: b64("x"), prev_kv: true })).toEqual({
      header: hdr("4"),
      prev_kv: { key: b64("a"), create_revision: "3", mod_revision: "3", version: "1" },
    });
    expect(await ok("/v3/kv/range", { key: b64("none") })).toEqual({ header: hdr("4") });
  });

  it("range: camelCase names accepted, numbers as strings or numbers, enums by name or number", async () => {
    const both = {
      header: hdr("4"),
      kvs: [{ key: b64("foo"), create_revision: "2", mod_revision: "2", version: "1", value: b64("bar") }],
      count: "2",
      more: true,
    };
    expect(await ok("/v3/kv/range", { key: b64("a"), rangeEnd: b64("z"), limit: 1, sort_order: "DESCEND", sort_target: "KEY" })).toEqual(both);
    expect(await ok("/v3/kv/range", { key: b64("a"), range_end: b64("z"), limit: "1", sort_order: 2, unknown_field: 1 })).toEqual(both);
    expect(await ok("/v3/kv/range", { key: b64("a"), range_end: b64("z"), count_only: true })).toEqual({ header: hdr("4"), count: "2" });
  });

  it("txn: compares and ops by oneof names, responses as response_<op>, the nested header with its revision only", async () => {
    const txn = {
      compare: [{ key: b64("a"), target: "VALUE", result: "EQUAL", value: b64("x") }],
      success: [{ request_range: { key: b64("a") } }, { requestPut: { key: b64("t"), value: b64("1") } }],
      failure: [],
    };
    expect(await ok("/v3/kv/txn", txn)).toEqual({
      header: hdr("5"),
      succeeded: true,
      responses: [
        { response_range: { header: { revision: "4" }, kvs: [{ key: b64("a"), create_revision: "3", mod_revision: "4", version: "2", value: b64("x") }], count: "1" } },
        { response_put: { header: { revision: "5" } } },
      ],
    });
    const failed = { compare: [{ key: b64("a"), target: "MOD", result: "GREATER", mod_revision: "100" }], failure: [{ request_range: { key: b64("a"), count_only: true } }] };
    expect(await ok("/v3/kv/txn", failed)).toEqual({ header: hdr("5"), responses: [{ response_range: { header: { revision: "5" }, count: "1" } }] });
  });

  it("deleterange with prev_kv; compaction", async () => {
    expect(await ok("/v3/kv/deleterange", { key: b64("t"), prev_kv: true })).toEqual({
      header: hdr("6"),
      deleted: "1",
      prev_kvs: [{ key: b64("t"), create_revision: "5", mod_revision: "5", version: "1", value: b64("1") }],
    });
    expect(await ok("/v3/kv/compaction", { revision: "3", physical: true })).toEqual({ header: hdr("6") });
  });

  it("/v3beta/ is /v3/; /v3alpha/ is not served; a /v3/ path the gateway lacks is 404, another method 405", async () => {
    expect(await ok("/v3beta/kv/range", { key: b64("a"), count_only: true })).toEqual({ header: hdr("6"), count: "1" });
    const alpha = await request(gw.endpoint, "/v3alpha/kv/range", JSON.stringify({ key: b64("a") }));
    expect([alpha.status, alpha.body]).toEqual([404, "404 page not found\n"]);
    const missing = await request(gw.endpoint, "/v3/kv/nothing", "{}");
    expect([missing.status, missing.headers["content-type"], missing.body]).toEqual([404, "text/plain; charset=utf-8", "Not Found\n"]);
    // etcd 3.5's paths are not etcd 3.4's.
    for (const p of ["/v3/auth/status", "/v3/maintenance/hashkv", "/v3/maintenance/downgrade"]) expect((await request(gw.endpoint, p, "{}")).status).toBe(404);
    const get = await request(gw.endpoint, "/v3/kv/range", "", { method: "GET" });
    expect([get.status, get.body]).toEqual([405, "Method Not Allowed\n"]);
  });

  it("every answer carries etcd's CORS headers (--cors defaults to *), and OPTIONS is 200 on any path", async () => {
    const r = await request(gw.endpoint, "/v3/kv/range", JSON.stringify({ key: b64("a") }));
    expect(r.headers["access-control-allow-origin"]).toBe("*");
    expect(r.headers["access-control-allow-methods"]).toBe("POST, GET, OPTIONS, PUT, DELETE");
    expect(r.headers["access-control-allow-headers"]).toBe("accept, content-type, authorization");
    for (const path of ["/v3/kv/range", "/anything"]) {
      const o = await request(gw.endpoint, path, "", { method: "OPTIONS" });
      expect([o.status, o.body, o.headers["access-control-allow-origin"]]).toEqual([200, "", "*"]);
    }
    expect((await request(gw.endpoint, "/version", "", { method: "GET" })).headers["access-control-allow-origin"]).toBe("*");
  });
});

describe("errors over the JSON gateway", () => {
  const err = (message: string, code: number) => ({ error: message, message, code });

  it("a failed call: grpc-gateway's status, the error body, and the gRPC content type as a trailer", async () => {
    const r = await post(gw.endpoint, "/v3/kv/range", {});
    expect([r.status, r.json]).toEqual([400, err("etcdserver: key is not provided", 3)]);
    expect(r.answer.headers["trailer"]).toBe("Grpc-Trailer-Content-Type");
    expect(r.answer.trailers["grpc-trailer-content-type"]).toBe("application/grpc");
    // An empty body is an empty request, and so is null.
    for (const body of ["", "null"]) {
      const e = await post(gw.endpoint, "/v3/kv/put", body);
      expect([e.status, e.json]).toEqual([400, err("etcdserver: key is not provided", 3)]);
    }
  });

  it("future and compacted revisions: 400 with OUT_OF_RANGE (11)", async () => {
    const future = await post(gw.endpoint, "/v3/kv/range", { key: b64("a"), revision: "100" });
    expect([future.status, future.json]).toEqual([400, err("etcdserver: mvcc: required revision is a future revision", 11)]);
    const compacted = await post(gw.endpoint, "/v3/kv/range", { key: b64("a"), revision: "2" });
    expect([compacted.status, compacted.json]).toEqual([400, err("etcdserver: mvcc: required revision has been compacted", 11)]);
  });

  it("an unknown lease: 404 with NOT_FOUND (5); a bad transferee: 412 with FAILED_PRECONDITION (9)", async () => {
    const r = await post(gw.endpoint, "/v3/lease/revoke", { ID: "12345" });
    expect([r.status, r.json]).toEqual([404, err("etcdserver: requested lease not found", 5)]);
    const k = await post(gw.endpoint, "/v3/kv/lease/revoke", { ID: 12345 });
    expect([k.status, k.json]).toEqual([404, err("etcdserver: requested lease not found", 5)]);
    const t = await post(gw.endpoint, "/v3/maintenance/transfer-leadership", {});
    expect([t.status, t.json]).toEqual([412, err("etcdserver: bad leader transferee", 9)]);
  });

  it("bodies that do not map: 400 with INVALID_ARGUMENT and Go's words, no call made (no trailer)", async () => {
    const cases: Array<[string, string]> = [
      ["{bad", "invalid character 'b' looking for beginning of object key string"],
      ['{"key":"YQ==" "x"', "invalid character '\"' after object key:value pair"],
      ['{"key" 1}', "invalid character '1' after object key"],
      ['{"key":tru}', "invalid character '}' in literal true (expecting 'e')"],
      ['{"key":"YQ==",', "unexpected EOF"],
      ["[1]", "json: cannot unmarshal array into Go value of type map[string]json.RawMessage"],
      ['{"key":"Zm9v!"}', "illegal base64 data at input byte 4"],
      ['{"key":"Zm8"}', "illegal base64 data at input byte 0"],
      ['{"key":5}', "json: cannot unmarshal number into Go value of type []uint8"],
      ['{"key":"YQ==","limit":"x"}', "invalid character 'x' looking for beginning of value"],
      ['{"key":"YQ==","limit":1.5}', "json: cannot unmarshal number 1.5 into Go value of type int64"],
      ['{"key":"YQ==","limit":true}', "json: cannot unmarshal bool into Go value of type int64"],
      ['{"key":"YQ==","serializable":"yes"}', "json: cannot unmarshal string into Go value of type bool"],
      ['{"key":"YQ==","sort_order":"BAD"}', 'unknown value "BAD" for enum etcdserverpb.RangeRequest_SortOrder'],
    ];
    for (const [body, message] of cases) {
      const r = await post(gw.endpoint, "/v3/kv/range", body);
      expect([body, r.status, r.json], body).toEqual([body, 400, err(message, 3)]);
      expect(r.answer.headers["trailer"], body).toBeUndefined();
    }
  });
});

describe("gateway calls in the gRPC metrics", () => {
  /** grpc_server_handled_total of KV.Range with `code`, whatever the label order. */
  async function handled(code: string): Promise<number> {
    const text = (await request(gw.endpoint, "/metrics", "", { method: "GET" })).body;
    for (const line of text.split("\n")) {
      if (!line.startsWith("grpc_server_handled_total{")) continue;
      if (line.includes('grpc_method="Range"') && line.includes('grpc_service="etcdserverpb.KV"') && line.includes(`grpc_code="${code}"`)) {
        return Number(line.slice(line.lastIndexOf(" ") + 1));
      }
    }
    return 0;
  }

  it("count as gRPC calls, as etcd's gateway (a gRPC client of its member) makes them count", async () => {
    const [ok0, bad0] = [await handled("OK"), await handled("InvalidArgument")];
    for (let i = 0; i < 3; i++) expect((await post(gw.endpoint, "/v3/kv/range", { key: b64("a") })).status).toBe(200);
    expect((await post(gw.endpoint, "/v3/kv/range", {})).status).toBe(400);
    expect([(await handled("OK")) - ok0, (await handled("InvalidArgument")) - bad0]).toEqual([3, 1]);
  });
});
