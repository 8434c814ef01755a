/**
 * The gateway's JSON pieces on their own: Go's JSON scanner (errors, one value at a time), Go's
 * base64 offsets, and the protobuf JSON mapping both ways (names, 64-bit text, enums, oneofs).
 * The wire answers themselves are checked against real etcd in test/e2e/gateway_*.test.ts.
 */
import { describe, expect, it } from "vitest";
import { decodeGoBase64 } from "../../src/gateway/go_base64.js";
import { JsonIncomplete, JsonNumber, JsonSyntaxError, readJsonValue } from "../../src/gateway/go_json.js";
import { goJsonString, JsonMappingError } from "../../src/gateway/json_mapping.js";
import { loadGatewayMapping } from "../../src/gateway/index.js";
import { loadMemberCodecs } from "../../src/pb/protos.js";

describe("Go's JSON scanner", () => {
  it("reads one value at a time, with or without whitespace between", () => {
    const s = '{"a":1}{"b":[true,null]}  "x"';
    const first = readJsonValue(s)!;
    expect(first.value).toEqual(new Map([["a", new JsonNumber("1")]]));
    const second = readJsonValue(s, first.end)!;
    expect(second.value).toEqual(new Map([["b", [true, null]]]));
    expect(readJsonValue(s, second.end)!.value).toBe("x");
    expect(readJsonValue("   ")).toBeUndefined();
  });

  it("an input ending inside a value is incomplete (a stream waits for more), not malformed", () => {
    for (const s of ['{"a":1', '{"a":"x', "[1,", "tr", "12"]) expect(() => readJsonValue(s), s).toThrow(JsonIncomplete);
  });

  it("malformed input in Go's words", () => {
    const cases: Array<[string, string]> = [
      ["}", "invalid character '}' looking for beginning of value"],
      ['{"a" 1}', "invalid character '1' after object key"],
      ["[1 2]", "invalid character '2' after array element"],
      ['"a\\x"', "invalid character 'x' in string escape code"],
      ['"\u0001"', "invalid character '\\u0001' in string literal"],
      ["-x", "invalid character 'x' in numeric literal"],
      ["1.x ", "invalid character 'x' after decimal point in numeric literal"],
      ["nul!", "invalid character '!' in literal null (expecting 'l')"],
    ];
    for (const [s, message] of cases) {
      expect(() => readJsonValue(s), s).toThrow(JsonSyntaxError);
      expect(() => readJsonValue(s), s).toThrow(message);
    }
  });
});

describe("Go's base64 (StdEncoding)", () => {
  it("decodes padded input, skipping newlines", () => {
    expect(decodeGoBase64("").toString()).toBe("");
    expect(decodeGoBase64("Zg==").toString()).toBe("f");
    expect(decodeGoBase64("Zm8=").toString()).toBe("fo");
    expect(decodeGoBase64("Zm9v\nYmFy").toString()).toBe("foobar");
  });

  it("refuses what Go refuses, at Go's offset", () => {
    const cases: Array<[string, number]> = [
      ["Zm8", 0],
      ["Zg=", 3],
      ["Z===", 1],
      ["Zm9v=", 4],
      ["Zm9v!", 4],
      ["Zg==x", 4],
    ];
    for (const [s, offset] of cases) expect(() => decodeGoBase64(s), s).toThrow(`illegal base64 data at input byte ${offset}`);
  });
});

describe("protobuf JSON mapping", () => {
  const mapping = loadGatewayMapping();
  const codecs = loadMemberCodecs();

  it("out: proto names in declaration order, 64-bit as exact decimal strings, enums by name, defaults left out", () => {
    const codec = codecs.message<object>("etcdserverpb.WatchResponse");
    const msg = codec.decode(
      codec.encode({
        header: { clusterId: 2n ** 63n, memberId: 2n ** 64n - 1n, revision: 0, raftTerm: 2 },
        watchId: -1,
        events: [{ type: 1, kv: { key: Buffer.from("k"), modRevision: 4 } }],
      }),
    );
    expect(mapping.stringify("etcdserverpb.WatchResponse", msg)).toBe(
      '{"header":{"cluster_id":"9223372036854775808","member_id":"18446744073709551615","raft_term":"2"},"watch_id":"-1","events":[{"type":"DELETE","kv":{"key":"aw==","mod_revision":"4"}}]}',
    );
  });

  it("out: strings escaped as Go's json.Marshal does", () => {
    expect(goJsonString('<a & "b">\u2028')).toBe('"\\u003ca \\u0026 \\"b\\"\\u003e\\u2028"');
  });

  it("in: proto or JSON names, numbers as text or numbers, enums by name or number, oneof members", () => {
    const txn = mapping.parseBody(
      "etcdserverpb.TxnRequest",
      '{"compare":[{"key":"YQ==","target":"MOD","result":2,"mod_revision":"7"}],"success":[{"requestPut":{"key":"YQ==","lease":"9007199254740993"}}]}',
    );
    expect(txn).toEqual({
      compare: [{ key: Buffer.from("a"), target: 2, result: 2, modRevision: 7 }],
      // A lease id is exact: 2^53 + 1 stays itself (a bigint beyond 2^53), never rounds to 2^53.
      success: [{ requestPut: { key: Buffer.from("a"), lease: 9007199254740993n } }],
    });
  });

  it("in: out-of-range integers in Go's words", () => {
    const bad = (body: string) => () => mapping.parseBody("etcdserverpb.LeaseRevokeRequest", body);
    expect(bad('{"ID":"9223372036854775808"}')).toThrow(JsonMappingError);
    expect(bad('{"ID":"9223372036854775808"}')).toThrow("json: cannot unmarshal number 9223372036854775808 into Go value of type int64");
    expect(() => mapping.parseBody("etcdserverpb.MemberRemoveRequest", '{"ID":-1}')).toThrow(
      "json: cannot unmarshal number -1 into Go value of type uint64",
    );
  });
});
