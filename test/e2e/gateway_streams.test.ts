/**
 * The gateway's bidi streams, /v3/watch and /v3/lease/keepalive, as etcd 3.4 serves them: the
 * request body is a sequence of JSON messages, the response one long-lived chunked HTTP/1.1
 * body of newline-delimited {"result": …} objects. Compared field by field with real etcd
 * (E2E_TARGET=etcd); member and cluster ids normalized. The request body is ended before the
 * answers are read: etcd's gateway (Go's HTTP/1.1 server, not full duplex) may hold its answers
 * until then (seen both ways in probes), etcetera answers each message as it arrives.
 */
import { describe, expect, it } from "vitest";
import { b64, curl, normalizeIds, openStream, post, request, type JsonObject } from "./gateway_client.js";
import { gatewayHeader, useGatewayMember } from "./gateway_member.js";

const gw = useGatewayMember();
const hdr = gatewayHeader;
const json = (x: unknown) => JSON.stringify(x);

async function put(key: string, value: string): Promise<void> {
  expect((await post(gw.endpoint, "/v3/kv/put", { key: b64(key), value: b64(value) })).status).toBe(200);
}

describe("POST /v3/watch", () => {
  it("created, a progress notification, then the puts and the delete as they happen; the stream stays open", async () => {
    const w = await openStream(gw.endpoint, "/v3/watch", [json({ create_request: { key: b64("w"), watch_id: "5" } }), json({ progress_request: {} })]);
    expect(w.status).toBe(200);
    expect(w.headers["content-type"]).toBe("application/json");
    expect(w.headers["transfer-encoding"]).toBe("chunked");
    expect(normalizeIds(await w.next())).toEqual({ result: { header: hdr("1"), watch_id: "5", created: true } });
    // etcd 3.4 answers a progress request with watch id -1.
    expect(normalizeIds(await w.next())).toEqual({ result: { header: hdr("1"), watch_id: "-1" } });
    await put("w", "1");
    expect(normalizeIds(await w.next())).toEqual({
      result: { header: hdr("2"), watch_id: "5", events: [{ kv: { key: b64("w"), create_revision: "2", mod_revision: "2", version: "1", value: b64("1") } }] },
    });
    await put("w", "2");
    expect(normalizeIds(await post(gw.endpoint, "/v3/kv/deleterange", { key: b64("w") }).then((r) => r.json))).toEqual({ header: hdr("4"), deleted: "1" });
    expect(normalizeIds(await w.next())).toEqual({
      result: { header: hdr("3"), watch_id: "5", events: [{ kv: { key: b64("w"), create_revision: "2", mod_revision: "3", version: "2", value: b64("2") } }] },
    });
    expect(normalizeIds(await w.next())).toEqual({
      result: { header: hdr("4"), watch_id: "5", events: [{ type: "DELETE", kv: { key: b64("w"), mod_revision: "4" } }] },
    });
    // A write elsewhere says nothing here; the stream is still open (its request body ended long ago).
    await put("other", "x");
    expect(await w.quiet(300)).toBe(true);
    let ended = false;
    void w.ended.then(() => (ended = true));
    expect(ended).toBe(false);
    w.close();
  });

  it("a cancel in the same body: created, then canceled", async () => {
    const w = await openStream(gw.endpoint, "/v3/watch", [
      json({ create_request: { key: b64("c"), range_end: b64("d"), prev_kv: true, watch_id: 7 } }),
      // No separator at all between messages, as Go's json.Decoder allows.
      json({ cancel_request: { watch_id: "7" } }) + json({ cancel_request: { watch_id: "77" } }),
    ]);
    expect(normalizeIds(await w.next())).toEqual({ result: { header: hdr("5"), watch_id: "7", created: true } });
    expect(normalizeIds(await w.next())).toEqual({ result: { header: hdr("5"), watch_id: "7", canceled: true } });
    // Canceling an unknown watch gets no answer.
    await put("c1", "x");
    expect(await w.quiet(300)).toBe(true);
    w.close();
  });

  it("a watch from a compacted revision is canceled with compact_revision (its header has no revision)", async () => {
    expect((await post(gw.endpoint, "/v3/kv/compaction", { revision: "3", physical: true })).status).toBe(200);
    const w = await openStream(gw.endpoint, "/v3/watch", [json({ create_request: { key: b64("w"), start_revision: "2" } })]);
    expect(normalizeIds(await w.next())).toEqual({ result: { header: hdr("6"), created: true } });
    expect(normalizeIds(await w.next())).toEqual({
      result: { header: { cluster_id: "<id>", member_id: "<id>", raft_term: "2" }, canceled: true, compact_revision: "3" },
    });
    w.close();
  });

  it("a watch from the past replays history with prev_kv, filters by name", async () => {
    const w = await openStream(gw.endpoint, "/v3/watch", [json({ create_request: { key: b64("c1"), start_revision: 6, prev_kv: true, filters: ["NODELETE"] } })]);
    expect(normalizeIds(await w.next())).toEqual({ result: { header: hdr("6"), created: true } });
    expect(normalizeIds(await w.next())).toEqual({
      result: { header: hdr("6"), events: [{ kv: { key: b64("c1"), create_revision: "6", mod_revision: "6", version: "1", value: b64("x") } }] },
    });
    w.close();
  });

  it("a first message that does not parse: 500 with code 2 and Go's words", async () => {
    const r = await request(gw.endpoint, "/v3/watch", "{bad");
    expect([r.status, JSON.parse(r.body)]).toEqual([
      500,
      { error: "invalid character 'b' looking for beginning of object key string", message: "invalid character 'b' looking for beginning of object key string", code: 2 },
    ]);
  });
});

describe("POST /v3/lease/keepalive", () => {
  it("one result per request in the body, then the stream ends with the body (curl)", async () => {
    const grant = await post(gw.endpoint, "/v3/lease/grant", { TTL: 30 });
    const id = grant.json["ID"] as string;
    const out = await curl(["-X", "POST", `http://${gw.endpoint}/v3/lease/keepalive`, "-d", json({ ID: id }) + "\n" + json({ ID: id })]);
    const lines = out.trim().split("\n").map((l) => normalizeIds(JSON.parse(l) as JsonObject, new Set(["ID"])));
    expect(lines).toEqual([
      { result: { header: hdr("6"), ID: id, TTL: "30" } },
      { result: { header: hdr("6"), ID: id, TTL: "30" } },
    ]);
  });

  it("an unknown lease is answered on the stream with no TTL (0 is left out)", async () => {
    const r = await request(gw.endpoint, "/v3/lease/keepalive", json({ ID: "12345" }));
    expect(r.status).toBe(200);
    expect(r.headers["grpc-metadata-content-type"]).toBe("application/grpc");
    expect(normalizeIds(JSON.parse(r.body), new Set(["ID"]))).toEqual({ result: { header: hdr("6"), ID: "12345" } });
    expect(r.body.endsWith("}\n")).toBe(true);
  });

  it("an empty body: 200 and nothing; a truncated first message: 500 unexpected EOF (code 2)", async () => {
    const empty = await request(gw.endpoint, "/v3/lease/keepalive", "");
    expect([empty.status, empty.body, empty.headers["transfer-encoding"]]).toEqual([200, "", "chunked"]);
    const cut = await request(gw.endpoint, "/v3/lease/keepalive", '{"ID":"1');
    expect([cut.status, JSON.parse(cut.body)]).toEqual([500, { error: "unexpected EOF", message: "unexpected EOF", code: 2 }]);
  });

  it("requests written over time in one body get their answers (a keep-alive loop)", async () => {
    const id = (await post(gw.endpoint, "/v3/lease/grant", { TTL: 30 })).json["ID"] as string;
    const r = await request(gw.endpoint, "/v3/lease/keepalive", [json({ ID: id }), json({ ID: id }), json({ ID: id })], { pauseMs: 100 });
    const lines = r.body.trim().split("\n").map((l) => (JSON.parse(l) as { result: JsonObject }).result);
    expect(lines.map((l) => [l["ID"], l["TTL"]])).toEqual([
      [id, "30"],
      [id, "30"],
      [id, "30"],
    ]);
  });
});
