import { describe, expect, it } from "vitest";
import { JointConfig, MajorityConfig, VoteResult } from "../../src/raft/quorum.js";
import { Inflights } from "../../src/raft/inflights.js";
import { RaftInvariantError } from "../../src/raft/assert.js";
import { decodeConfChangeV1, decodeConfChangeV2, encodeConfChangeV1, encodeConfChangeV2 } from "../../src/raft/confchange_codec.js";

describe("quorum", () => {
  it("majority commit index is the highest index acked by a majority", () => {
    const c = new MajorityConfig([1n, 2n, 3n, 4n, 5n]);
    const acked = new Map([[1n, 10], [2n, 8], [3n, 7], [4n, 2]]);
    expect(c.committedIndex((id) => acked.get(id))).toBe(7);
    expect(new MajorityConfig().committedIndex(() => 0)).toBe(Number.MAX_SAFE_INTEGER);
  });

  it("joint commit index needs both halves", () => {
    const j = new JointConfig(new MajorityConfig([1n, 2n, 3n]), new MajorityConfig([3n, 4n, 5n]));
    const acked = new Map([[1n, 9], [2n, 9], [3n, 5], [4n, 4], [5n, 1]]);
    expect(j.committedIndex((id) => acked.get(id))).toBe(4);
  });

  it("votes: won, pending, lost, and joint combination", () => {
    const c = new MajorityConfig([1n, 2n, 3n]);
    expect(c.voteResult(new Map([[1n, true], [2n, true]]))).toBe(VoteResult.Won);
    expect(c.voteResult(new Map([[1n, true], [2n, false]]))).toBe(VoteResult.Pending);
    expect(c.voteResult(new Map([[1n, false], [2n, false]]))).toBe(VoteResult.Lost);
    const j = new JointConfig(new MajorityConfig([1n, 2n, 3n]), new MajorityConfig([4n, 5n, 6n]));
    expect(j.voteResult(new Map([[1n, true], [2n, true]]))).toBe(VoteResult.Pending);
    expect(j.voteResult(new Map([[1n, true], [2n, true], [4n, false], [5n, false]]))).toBe(VoteResult.Lost);
    expect(j.voteResult(new Map([[1n, true], [2n, true], [4n, true], [5n, true]]))).toBe(VoteResult.Won);
  });
});

describe("inflights", () => {
  it("is bounded by count and by bytes, and frees in order", () => {
    const byCount = new Inflights(3);
    byCount.add(1, 10);
    byCount.add(2, 10);
    byCount.add(3, 10);
    expect(byCount.full()).toBe(true);
    expect(() => byCount.add(4, 1)).toThrow(RaftInvariantError);
    byCount.freeLE(2);
    expect(byCount.size()).toBe(1);
    byCount.add(4, 1);
    byCount.add(5, 1);
    byCount.freeFirstOne();
    expect(byCount.size()).toBe(2);

    const byBytes = new Inflights(100, 50);
    byBytes.add(1, 30);
    expect(byBytes.full()).toBe(false);
    byBytes.add(2, 30);
    expect(byBytes.full()).toBe(true);
    byBytes.freeLE(1);
    expect(byBytes.full()).toBe(false);
    expect(byBytes.sizeBytes()).toBe(30);
  });
});

describe("conf change codec", () => {
  it("round-trips ConfChangeV2 and v1 with large node ids", () => {
    const cc = { transition: 2, changes: [{ type: 3, nodeId: 2n ** 64n - 3n }, { type: 0, nodeId: 1n }], context: Uint8Array.of(1, 2, 3) };
    expect(decodeConfChangeV2(encodeConfChangeV2(cc))).toEqual(cc);
    const v1 = { id: 2n ** 63n + 99n, type: 1, nodeId: 0x8e9e05c52164694dn, context: Uint8Array.of(9) };
    expect(decodeConfChangeV1(encodeConfChangeV1(v1))).toEqual(v1);
    // Field layout matches etcd's raftpb: ConfChangeSingle{type=1,node_id=2} inside field 2.
    expect([...encodeConfChangeV2({ transition: 0, changes: [{ type: 1, nodeId: 5n }], context: new Uint8Array(0) })]).toEqual([0x12, 4, 8, 1, 0x10, 5]);
  });
});
