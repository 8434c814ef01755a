/**
 * The corruption checks' rules (src/server/corrupt/corruption.ts, etcd 3.4's corrupt.go) with the
 * peers' HashKV answers given directly: which mismatch refuses the initial check, which member the
 * leader's periodic check alarms, and that it alarms at most once a pass.
 */
import { describe, expect, it } from "vitest";
import type { HashKvResult } from "../../src/mvcc/kvstore.js";
import { AlarmAction, AlarmType } from "../../src/server/alarms.js";
import { CorruptionCheck } from "../../src/server/corrupt/corruption.js";
import type { PeerHashKv } from "../../src/server/corrupt/peer_hashkv.js";
import { silentLogger } from "../../src/server/logger.js";

const SELF = 0xaan;

function check(local: HashKvResult[], peers: PeerHashKv[]) {
  const alarms: Array<{ memberID: bigint; action: AlarmAction; alarm: AlarmType }> = [];
  const asked: number[] = [];
  let call = 0;
  const c = new CorruptionCheck({
    memberId: SELF,
    hashKV: () => Promise.resolve(local[Math.min(call++, local.length - 1)]!),
    peers: () => peers.map((p) => ({ id: p.id, clientUrls: ["http://127.0.0.1:1"] })),
    isLeader: () => true,
    readBarrier: () => Promise.resolve(),
    raiseAlarm: (a) => {
      alarms.push(a);
      return Promise.resolve();
    },
    requestTimeoutMs: 1000,
    logger: silentLogger(),
    peerHashKVs: (_peers, rev) => {
      asked.push(rev);
      return Promise.resolve(peers);
    },
  });
  return { c, alarms, asked };
}

const at = (hash: number, revision = 10, compactRevision = 0): HashKvResult => ({ hash, revision, compactRevision });
const peer = (id: bigint, hash: number, revision = 10, compactRevision = 0): PeerHashKv => ({ id, resp: { memberId: id, hash, revision, compactRevision } });

describe("initial corruption check", () => {
  it("passes when every answering peer has the same hash; asks at the local revision", async () => {
    const { c, asked } = check([at(1, 42)], [peer(2n, 1, 50), { id: 3n, err: "connection refused" }]);
    await c.initialCheck();
    expect(asked).toEqual([42]);
  });

  it("refuses on another hash at the same compact revision, with etcd's message", async () => {
    const { c } = check([at(1)], [peer(2n, 1), peer(0xbbn, 7)]);
    await expect(c.initialCheck()).rejects.toThrow("00000000000000aa found data inconsistency with peers");
  });

  it("another hash at another compact revision is only a warning", async () => {
    const { c } = check([at(1, 10, 0)], [peer(2n, 7, 10, 5)]);
    await c.initialCheck();
  });
});

describe("periodic corruption check (leader)", () => {
  it("a follower with another hash at the same compact revision gets the CORRUPT alarm", async () => {
    const { c, alarms } = check([at(1)], [peer(2n, 1), peer(3n, 9)]);
    expect(await c.checkHashKV()).toEqual([3n]);
    expect(alarms).toEqual([{ memberID: 3n, action: AlarmAction.ACTIVATE, alarm: AlarmType.CORRUPT }]);
  });

  it("a follower ahead of the leader (revision or compact revision) is alarmed; one alarm a pass", async () => {
    expect((await check([at(1, 10, 2)], [peer(2n, 1, 11, 2)]).c.checkHashKV())).toEqual([2n]);
    expect((await check([at(1, 10, 2)], [peer(2n, 1, 10, 3)]).c.checkHashKV())).toEqual([2n]);
    const both = check([at(1)], [peer(2n, 5), peer(3n, 6)]);
    expect(await both.c.checkHashKV()).toEqual([2n]);
    expect(both.alarms).toHaveLength(1);
  });

  it("the leader's own hash changing at the same revision alarms the leader", async () => {
    const { c, alarms } = check([at(1), at(2)], []);
    expect(await c.checkHashKV()).toEqual([SELF]);
    expect(alarms[0]!.memberID).toBe(SELF);
  });

  it("agreeing members, or a follower behind at an older compact revision, raise nothing", async () => {
    expect(await check([at(1, 10, 4)], [peer(2n, 1, 10, 4), peer(3n, 77, 8, 2)]).c.checkHashKV()).toEqual([]);
  });
});
