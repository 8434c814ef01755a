/**
 * etcd 3.4's entries after the backend's consistent index as etcetera's (entries_import.ts): its
 * publish, a bare v2 request, becomes etcetera's member_attributes request; every other v2
 * request, or a publish with anything a publish never carries, is refused naming the entry.
 */
import { describe, expect, it } from "vitest";
import { importEntries } from "../../src/etcd_format/import/entries_import.js";
import { ImportRefusedError } from "../../src/etcd_format/import/ids.js";
import { ProtoFieldWriter } from "../../src/etcd_format/proto_fields.js";
import { ETCD_ENTRY_NORMAL } from "../../src/etcd_format/raft_records.js";
import { decodeRaftRequest } from "../../src/server/raft_request.js";

/** A pb.Request as etcd 3.4's gogoproto writes it: every non-nullable field, zero ones too. */
function v2Request(method: string, path: string, val: string, extra: (w: ProtoFieldWriter) => void = () => undefined): Uint8Array {
  const w = new ProtoFieldWriter().uint(1, 11102958839485855233n).bytesField(2, method, true).bytesField(3, path, true).bytesField(4, val, true);
  w.uint(5, 0).bytesField(6, "", true);
  for (const f of [7, 9, 10, 11, 12, 13, 14, 15, 16]) w.uint(f, 0);
  extra(w);
  return w.finish();
}

const entry = (data: Uint8Array) => ({ term: 4, index: 40720, type: ETCD_ENTRY_NORMAL, data });
const ATTRS = '{"name":"e1","clientURLs":["http://127.0.0.1:2379","http://10.0.0.1:2379"]}';

describe("etcd's v2 publish in the WAL's tail", () => {
  it("becomes etcetera's member_attributes request at the entry's index", () => {
    const [e] = importEntries([entry(v2Request("PUT", "/0/members/886b03c4ae679a15/attributes", ATTRS))]);
    expect(e).toMatchObject({ term: 4, index: 40720 });
    const r = decodeRaftRequest(e!.data);
    expect(r.ID).toBe(40720);
    expect(r.memberAttributes).toMatchObject({ member_ID: 0x886b03c4ae679a15n, name: "e1", clientUrls: ["http://127.0.0.1:2379", "http://10.0.0.1:2379"] });
  });

  it("refuses any other v2 request, a publish with a field a publish never sets, and attributes that are not etcd's", () => {
    const refused = (data: Uint8Array, message: RegExp) => {
      expect(() => importEntries([entry(data)])).toThrow(ImportRefusedError);
      expect(() => importEntries([entry(data)])).toThrow(message);
    };
    refused(v2Request("PUT", "/0/version", "3.4.0"), /entry 40720 .*an etcd v2 request/);
    refused(v2Request("DELETE", "/0/members/886b03c4ae679a15/attributes", ATTRS), /entry 40720 .*an etcd v2 request/);
    refused(v2Request("PUT", "/0/members/886b03c4ae679a15/attributes", ATTRS, (w) => w.uint(9, 5)), /entry 40720 .*an etcd v2 request/);
    refused(v2Request("PUT", "/0/members/886b03c4ae679a15/attributes", '{"clientURLs":[]}'), /entry 40720: the attributes published for member 886b03c4ae679a15 are not etcd's/);
    refused(v2Request("PUT", "/0/members/886b03c4ae679a15/attributes", "{"), /entry 40720: the attributes .* are not JSON/);
    refused(v2Request("PUT", "/0/members/0/attributes", ATTRS), /member id 0 is not a uint64 id/);
  });
});
