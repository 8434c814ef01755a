/**
 * Two Maintenance answers as etcd 3.4 gives them, field for field (found by rpc_fields' field-by-
 * field comparison with etcd, test/fuzz/response_compare.ts): HashKV's compact_revision is the
 * store's compaction revision as is, -1 before any compaction (etcetera said 0), and MoveLeader
 * answers an empty MoveLeaderResponse, without a header (etcetera sent one). E2E_TARGET=etcd checks
 * the same expectations against real etcd.
 */
import { describe, expect, it } from "vitest";
import { unary } from "./grpc_client.js";
import { oneMemberSuite } from "./one_member.js";

const suite = oneMemberSuite();

interface HashKv {
  header: { revision: string };
  compact_revision: string;
}

describe("maintenance responses, field for field", () => {
  it("HashKV's compact_revision is -1 before any compaction, then the compaction's revision", async () => {
    await unary(suite.c.kv, "Put", { key: Buffer.from("h/a"), value: Buffer.from("1") });
    const before = await unary<HashKv>(suite.c.maintenance, "HashKV", { revision: "0" });
    expect(before.compact_revision).toBe("-1");
    const put = await unary<{ header: { revision: string } }>(suite.c.kv, "Put", { key: Buffer.from("h/a"), value: Buffer.from("2") });
    await unary(suite.c.kv, "Compact", { revision: put.header.revision });
    const after = await unary<HashKv>(suite.c.maintenance, "HashKV", { revision: "0" });
    expect(after.compact_revision).toBe(put.header.revision);
    expect(after.header.revision).toBe(put.header.revision);
  });

  it("MoveLeader to the leader itself succeeds with an empty response: no header", async () => {
    const status = await unary<{ header: { member_id: string }; leader: string }>(suite.c.maintenance, "Status", {});
    expect(status.leader).toBe(status.header.member_id);
    const moved = await unary<{ header: unknown }>(suite.c.maintenance, "MoveLeader", { targetID: status.leader });
    expect(moved.header).toBeNull();
  });
});
