/**
 * The header inside each response of a TxnResponse, as etcd 3.4's applier fills it
 * (etcdserver/apply.go): a nested RangeResponse, PutResponse and DeleteRangeResponse carries a
 * ResponseHeader holding only the revision its op saw (cluster_id, member_id and raft_term 0),
 * and a nested TxnResponse an empty header (present, all zero); only the outer header is the
 * member's. Inside a write txn a range or a delete that removes nothing reports the txn's
 * starting revision until the txn has changed something, then the new one. Go clientv3's
 * serializable STM reads the nested range header (and crashed when it was absent).
 * E2E_TARGET=etcd checks every expectation against real etcd.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { clients, unary } from "./grpc_client.js";
import { Cluster } from "./harness.js";

let cluster: Cluster;
let c: ReturnType<typeof clients>;

const b = (s: string) => Buffer.from(s);

interface Header {
  cluster_id: string;
  member_id: string;
  revision: string;
  raft_term: string;
}
interface Op {
  response: string;
  response_range?: { header: Header | null };
  response_put?: { header: Header | null };
  response_delete_range?: { header: Header | null };
  response_txn?: { header: Header | null; responses: Op[] };
}
interface Txn {
  header: Header;
  responses: Op[];
}

/** The nested headers of a txn response, depth first, as "kind:header" (null when absent). */
function nestedHeaders(ops: Op[]): unknown[] {
  return ops.flatMap((op) => {
    const kind = op.response;
    const body = (op as unknown as Record<string, { header: Header | null; responses?: Op[] }>)[kind]!;
    const own = { [kind]: body.header };
    return body.responses ? [own, ...nestedHeaders(body.responses)] : [own];
  });
}

const only = (revision: number): Header => ({ cluster_id: "0", member_id: "0", revision: String(revision), raft_term: "0" });
const EMPTY: Header = only(0);

beforeAll(async () => {
  cluster = await Cluster.create({ size: 1 });
  await cluster.start();
  c = clients(cluster.members[0]!.endpoint);
});
afterAll(async () => {
  c?.close();
  await cluster?.destroy();
});

describe("the header of each response nested in a TxnResponse", () => {
  it("a write txn: the revision each op saw, a nested txn's header empty", async () => {
    await unary(c.kv, "Put", { key: b("h/a"), value: b("1") });
    const put = await unary<{ header: Header }>(c.kv, "Put", { key: b("h/gone"), value: b("1") });
    const start = Number(put.header.revision);
    const r = await unary<Txn>(c.kv, "Txn", {
      success: [
        { request_range: { key: b("h/a") } },
        { request_delete_range: { key: b("h/none") } },
        { request_put: { key: b("h/b"), value: b("2") } },
        { request_range: { key: b("h/a") } },
        { request_delete_range: { key: b("h/none") } },
        { request_delete_range: { key: b("h/gone") } },
        { request_txn: { success: [{ request_range: { key: b("h/b") } }, { request_put: { key: b("h/c"), value: b("3") } }] } },
      ],
    });
    expect(Number(r.header.revision)).toBe(start + 1);
    expect(r.header.cluster_id).not.toBe("0");
    expect(nestedHeaders(r.responses)).toEqual([
      { response_range: only(start) },
      { response_delete_range: only(start) },
      { response_put: only(start + 1) },
      { response_range: only(start + 1) },
      { response_delete_range: only(start + 1) },
      { response_delete_range: only(start + 1) },
      { response_txn: EMPTY },
      { response_range: only(start + 1) },
      { response_put: only(start + 1) },
    ]);
  });

  it("a read-only txn, linearizable and serializable, and the failure branch", async () => {
    const put = await unary<{ header: Header }>(c.kv, "Put", { key: b("h/r"), value: b("1") });
    const rev = Number(put.header.revision);
    for (const serializable of [false, true]) {
      const r = await unary<Txn>(c.kv, "Txn", {
        compare: [{ key: b("h/r"), target: "VALUE", result: "EQUAL", value: b("other") }],
        success: [{ request_put: { key: b("h/never"), value: b("x") } }],
        failure: [{ request_range: { key: b("h/r"), serializable } }, { request_range: { key: b("h/"), range_end: b("h0"), count_only: true, serializable } }],
      });
      expect(Number(r.header.revision)).toBe(rev);
      expect(nestedHeaders(r.responses)).toEqual([{ response_range: only(rev) }, { response_range: only(rev) }]);
    }
    // Only ranges, but nested: proposed like a write, the nested txn's header empty.
    const r = await unary<Txn>(c.kv, "Txn", { success: [{ request_txn: { success: [{ request_range: { key: b("h/r") } }] } }] });
    expect(Number(r.header.revision)).toBe(rev);
    expect(nestedHeaders(r.responses)).toEqual([{ response_txn: EMPTY }, { response_range: only(rev) }]);
  });
});
