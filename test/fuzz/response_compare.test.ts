/**
 * response_compare.ts on made-up outcomes: a difference deep inside nested txn responses is found
 * and named by its path, the outer header's ids are the only header fields left out, each target's
 * server-chosen lease ids compare equal once named, and unordered lists compare as sets.
 */
import { afterAll, describe, expect, it } from "vitest";
import { EXCLUSIONS, responseDifferences } from "./response_compare.js";
import type { RpcOp } from "./rpc_gen.js";
import { type OpOutcome, TargetSession } from "./rpc_runner.js";

// Never dialled: the comparison reads only the sessions' lease lists and member ids.
const ours = new TargetSession("127.0.0.1:1");
const etcd = new TargetSession("127.0.0.1:1");
ours.member = "111";
etcd.member = "222";
afterAll(() => {
  ours.close();
  etcd.close();
});

const ok = (response: unknown): OpOutcome => ({ code: 0, message: "", response });
const txnOp: RpcOp = { kind: "unary", service: "kv", method: "Txn", request: {} };
const header = (member: string, revision: string) => ({ cluster_id: `9${member}`, member_id: member, revision, raft_term: "2" });
const nested = (revision: string, memberId = "0") => ({ cluster_id: "0", member_id: memberId, revision, raft_term: "0" });
const kv = (value: string, lease = "0") => ({ key: Buffer.from("k"), value: Buffer.from(value), create_revision: "2", mod_revision: "3", version: "2", lease });

function txn(member: string, innerValue: string, innerMember = "0", lease = "0") {
  return {
    header: header(member, "5"),
    succeeded: true,
    responses: [
      { response: "response_put", response_put: { header: nested("5"), prev_kv: null } },
      {
        response: "response_txn",
        response_txn: {
          header: nested("0"),
          succeeded: false,
          responses: [{ response: "response_range", response_range: { header: nested("5", innerMember), kvs: [kv(innerValue, lease)], more: false, count: "1" } }],
        },
      },
    ],
  };
}

describe("responseDifferences", () => {
  it("agrees when only the outer header's cluster and member ids differ", () => {
    expect(responseDifferences(txnOp, ok(txn("111", "v")), ok(txn("222", "v")), ours, etcd)).toEqual([]);
    expect(EXCLUSIONS.some((e) => e.ops.includes("*") && e.path.test("header.revision"))).toBe(false);
  });

  it("names a kv value that differs inside a range inside a nested txn", () => {
    expect(responseDifferences(txnOp, ok(txn("111", "v")), ok(txn("222", "w")), ours, etcd)).toEqual([
      `responses[1].response_txn.responses[0].response_range.kvs[0].value: bytes:${Buffer.from("v").toString("hex")} vs bytes:${Buffer.from("w").toString("hex")}`,
    ]);
  });

  it("compares nested headers' member ids (etcd leaves them 0)", () => {
    expect(responseDifferences(txnOp, ok(txn("111", "v", "111")), ok(txn("222", "v")), ours, etcd)).toEqual([
      'responses[1].response_txn.responses[0].response_range.header.member_id: @member vs "0"',
    ]);
  });

  it("names each target's server-chosen lease by its grant, and a missing field as absent", () => {
    ours.leases.push("7000000000000000001");
    etcd.leases.push("5000000000000000009");
    expect(responseDifferences(txnOp, ok(txn("111", "v", "0", "7000000000000000001")), ok(txn("222", "v", "0", "5000000000000000009")), ours, etcd)).toEqual([]);
    const missing = txn("222", "v");
    delete (missing as { succeeded?: boolean }).succeeded;
    expect(responseDifferences(txnOp, ok(txn("111", "v")), ok(missing), ours, etcd)).toEqual(["succeeded: true vs (absent)"]);
  });

  it("compares LeaseLeases as a set", () => {
    const op: RpcOp = { kind: "unary", service: "lease", method: "LeaseLeases", request: {} };
    const a = { header: header("111", "5"), leases: [{ ID: "1" }, { ID: "7000000000000000001" }] };
    const b = { header: header("222", "5"), leases: [{ ID: "5000000000000000009" }, { ID: "1" }] };
    expect(responseDifferences(op, ok(a), ok(b), ours, etcd)).toEqual([]);
    // Sorted by their names, then compared in place: "1", granted by no LeaseGrant, is named by rank.
    expect(responseDifferences(op, ok(a), ok({ ...b, leases: [{ ID: "1" }] }), ours, etcd)).toEqual([
      "leases.length: 2 vs 1",
      "leases[0].ID: @lease:0 vs @unrecorded-lease:0",
      "leases[1].ID: @unrecorded-lease:0 vs (absent)",
    ]);
  });

  it("groups a watch stream's responses by watch id: the interleaving is free, each watcher's events are compared", () => {
    const op: RpcOp = { kind: "watch", requests: [] };
    const created = (member: string, id: string) => ({ header: header(member, "5"), watch_id: id, created: true, canceled: false, events: [] });
    const events = (member: string, id: string, value: string) => ({
      header: header(member, "3"),
      watch_id: id,
      created: false,
      canceled: false,
      events: [{ type: "PUT", kv: kv(value), prev_kv: null }],
    });
    const a = [created("111", "0"), created("111", "9007199254740993"), events("111", "9007199254740993", "v"), events("111", "0", "v")];
    const b = [created("222", "0"), events("222", "0", "v"), created("222", "9007199254740993"), events("222", "9007199254740993", "v")];
    expect(responseDifferences(op, ok(a), ok(b), ours, etcd)).toEqual([]);
    const c = [created("222", "0"), events("222", "0", "v"), created("222", "9007199254740993"), events("222", "9007199254740993", "w")];
    expect(responseDifferences(op, ok(a), ok(c), ours, etcd)).toEqual([
      `watch 9007199254740993[1].events[0].kv.value: bytes:${Buffer.from("v").toString("hex")} vs bytes:${Buffer.from("w").toString("hex")}`,
    ]);
  });
});
