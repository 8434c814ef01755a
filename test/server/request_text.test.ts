/**
 * Requests as etcd writes them into its "took too long" warnings: Go's compact protobuf text with
 * etcd's redactions (src/server/request_text.ts). The e2e test (test/e2e/slow_requests.test.ts)
 * compares whole lines with etcd's; these pin the corners it does not reach.
 */
import { describe, expect, it } from "vitest";
import { loadMemberCodecs } from "../../src/pb/protos.js";
import type { Compare, InternalRaftRequest, RangeRequest } from "../../src/pb/member-types.js";
import { compactText, goTextBytes, raftRequestText } from "../../src/server/request_text.js";

function decoded<T>(type: string, init: object): T {
  const codec = loadMemberCodecs().message<T, object>(`etcdserverpb.${type}`);
  return codec.decode(codec.encode(init));
}

describe("request text", () => {
  it("quotes bytes as Go's text format does: \\n \\r \\t \\\" \\\\ escaped, other unprintable bytes in octal", () => {
    expect(goTextBytes(Buffer.from([0x0a, 0x0d, 0x09, 0x22, 0x5c, 0x00, 0xff, 0x41, 0x7f]))).toBe('"\\n\\r\\t\\"\\\\\\000\\377A\\177"');
  });

  it("writes set fields in declaration order, enums by name, no proto3 zero values", () => {
    const r = decoded<RangeRequest>("RangeRequest", { key: Buffer.from("a"), rangeEnd: Buffer.from("b"), sortOrder: 1, sortTarget: 0, serializable: true, limit: 0 });
    expect(compactText("etcdserverpb.RangeRequest", r)).toBe('key:"a" range_end:"b" sort_order:ASCEND serializable:true ');
  });

  it("writes a oneof member even at zero", () => {
    const c = decoded<Compare>("Compare", { result: 1, target: 0, key: Buffer.from("k"), version: 0 });
    expect(compactText("etcdserverpb.Compare", c)).toBe('result:GREATER key:"k" version:0 ');
  });

  it("shows the request id in the header, a lease id in hex, and no token", () => {
    const revoke = decoded<InternalRaftRequest>("InternalRaftRequest", { ID: 42, leaseRevoke: { ID: 0x694da24dc395e509n } });
    expect(raftRequestText(revoke)).toBe("header:<ID:42 > lease_revoke:<id:694da24dc395e509>");
    const auth = decoded<InternalRaftRequest>("InternalRaftRequest", { header: { ID: 7, username: "root" }, authenticate: { name: "root", simpleToken: "secret.1" } });
    expect(raftRequestText(auth)).toBe('header:<ID:7 username:"root" > authenticate:<name:root simple_token:<value removed>>');
    const compaction = decoded<InternalRaftRequest>("InternalRaftRequest", { ID: 9, compaction: { revision: 5, physical: true } });
    expect(raftRequestText(compaction)).toBe("header:<ID:9 > compaction:<revision:5 physical:true > ");
  });
});
