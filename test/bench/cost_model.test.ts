import { describe, expect, it } from "vitest";
import { clientShareOfProfile, costModel, frameSide, rowCpu } from "../../bench/cost_model.js";
import type { RunRecord } from "../../bench/compare/summary.js";

describe("multicore cost model (docs/multicore.md)", () => {
  it("today the main thread caps the member on any core count; after, the least of core, front ends and follower", () => {
    const out = costModel({ mainUs: 100, processUs: 140, followerMainUs: 25, clientShare: 0.4, handoffCoreUs: 2, handoffFrontUs: 2 }, [2, 4, 16]);
    expect(out.ceilingToday).toBeCloseTo(10_000, 6);
    expect(out.coreUsAfter).toBeCloseTo(62, 9); // 100 × 0.6 + 2
    expect(out.frontUsPerPut).toBeCloseTo(40 + 40 * 0.4 + 2, 9);
    expect(out.helperUs).toBeCloseTo(24, 9);
    const [c2, c4, c16] = out.ceilings;
    expect(c2!.bound).toBe("front ends");
    expect(c2!.frontLimit).toBeCloseTo(((2 - 1 - 24 / 62) * 1e6) / 58, 6);
    expect(c4!.bound).toBe("core");
    expect(c4!.putsPerSec).toBeCloseTo(1e6 / 62, 6);
    expect(c16!.putsPerSec).toBeCloseTo(1e6 / 62, 6);
    const fast = costModel({ mainUs: 100, processUs: 100, followerMainUs: 50, clientShare: 0.9, handoffCoreUs: 1, handoffFrontUs: 1 }, [16]);
    expect(fast.ceilings[0]!.bound).toBe("follower");
    expect(fast.ceilings[0]!.putsPerSec).toBeCloseTo(20_000, 6);
    expect(() => costModel({ mainUs: 1, processUs: 1, followerMainUs: 1, clientShare: 1, handoffCoreUs: 0, handoffFrontUs: 0 }, [4])).toThrow(/client share/);
  });

  it("the apply thread takes its share off the core's and a follower's main thread, adds its hand-off, and caps the member itself", () => {
    const apply = { share: 0.25, handoffUs: 1, workerExtraUs: 2 };
    const out = costModel({ mainUs: 100, processUs: 140, followerMainUs: 25, clientShare: 0.4, handoffCoreUs: 2, handoffFrontUs: 2, apply }, [2, 16]);
    const a = out.applied!;
    expect(a.coreUs).toBeCloseTo(62 - 15.5 + 1, 9); // a quarter of the 62 after front ends moves
    expect(a.applyThreadUs).toBeCloseTo(15.5 + 2, 9);
    expect(a.followerMainUs).toBeCloseTo(25 - 15.5 + 1, 9);
    const [c2, c16] = a.ceilings;
    // 2 cores: the core thread and, beside it, helpers (24) and the apply thread (17.5) leave 1 - 41.5/47.5 cores to front ends.
    expect(c2!.frontLimit).toBeCloseTo(((2 - 1 - 41.5 / 47.5) * 1e6) / 58, 6);
    expect(c2!.bound).toBe("front ends");
    expect(c16!.bound).toBe("core");
    expect(c16!.putsPerSec).toBeCloseTo(1e6 / 47.5, 6);
    const heavy = costModel({ mainUs: 100, processUs: 100, followerMainUs: 10, clientShare: 0.4, handoffCoreUs: 2, handoffFrontUs: 2, apply: { share: 0.9, handoffUs: 1, workerExtraUs: 20 } }, [16]);
    expect(heavy.applied!.ceilings[0]!.bound).toBe("apply thread");
    expect(heavy.applied!.ceilings[0]!.putsPerSec).toBeCloseTo(1e6 / (62 * 0.9 + 20), 6);
    expect(out.ceilings[1]!.putsPerSec).toBeCloseTo(1e6 / 62, 6); // without the apply thread: unchanged
    expect(() => costModel({ mainUs: 1, processUs: 1, followerMainUs: 1, clientShare: 0, handoffCoreUs: 0, handoffFrontUs: 0, apply: { share: 1, handoffUs: 0, workerExtraUs: 0 } }, [4])).toThrow(/apply share/);
  });

  it("sorts frames into the client port and the core; protobuf goes to its caller", () => {
    expect(frameSide("file:///x/dist/grpc/call.js")).toBe("client");
    expect(frameSide("file:///x/dist/server/api/kv.js")).toBe("client");
    expect(frameSide("file:///x/dist/server/raft_loop.js")).toBe("core");
    expect(frameSide("file:///x/dist/mvcc/tree_index.js")).toBe("core");
    expect(frameSide("file:///x/dist/pb/codec.js")).toBeUndefined();
    expect(frameSide("node:internal/http2/core")).toBeUndefined();
  });

  it("a profile's samples in the window go to the nearest project frame's side, GC apart", () => {
    const frame = (id: number, url: string, functionName = "f", children: number[] = []) => ({ id, callFrame: { functionName, url }, children });
    const p = {
      nodes: [
        frame(1, "", "(root)", [2, 3, 6, 7]),
        frame(2, "file:///r/dist/grpc/call.js", "respond", [4]),
        frame(3, "file:///r/dist/server/apply.js", "apply", [5]),
        frame(4, "file:///r/dist/pb/codec.js", "encode"),
        frame(5, "file:///r/dist/pb/codec.js", "decode"),
        frame(6, "", "(garbage collector)"),
        frame(7, "node:internal/http2/core", "Http2Stream"),
      ],
      startTime: 1000,
      // samples at 1000+10, +20, ... each lasting the next delta (10 µs); the last one is outside the window
      samples: [4, 5, 5, 6, 7, 4],
      timeDeltas: [10, 10, 10, 10, 10, 10],
    };
    expect(clientShareOfProfile(p, 1000, 1055)).toEqual({ client: 20, core: 20, unattributed: 0, gcAndProgram: 10 });
  });

  it("takes the leader's process and main thread and the busier follower from a results file's runs", () => {
    const cpu = (leader: number, main: number, followers: number[]) => [
      { name: "n1", role: "leader" as const, usPerRequest: leader, threads: [{ tid: 1, comm: "node", usPerRequest: main, main: true }] },
      ...followers.map((f, i) => ({ name: `n${i + 2}`, role: "follower" as const, usPerRequest: f, threads: [{ tid: 9, comm: "node", usPerRequest: f / 2, main: true }] })),
    ];
    const runs: RunRecord[] = [
      { row: "p", target: "etcetera", round: 1, ok: true, cpu: cpu(150, 90, [40, 45]) },
      { row: "p", target: "etcetera", round: 2, ok: true, cpu: cpu(170, 110, [50, 42]) },
      { row: "p", target: "etcetera", round: 3, ok: false },
      { row: "p", target: "etcd", round: 1, ok: true, cpu: cpu(75, 0, [40]) },
    ];
    expect(rowCpu(runs, "p", "etcetera")).toEqual({ rounds: 2, leaderUs: 160, leaderMainUs: 100, followerUs: 47.5, followerMainUs: 23.75 });
    expect(rowCpu(runs, "q", "etcetera")).toBeUndefined();
  });
});
