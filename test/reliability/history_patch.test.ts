/**
 * Unknown-outcome writes resolved from watch streams: applied ones get their revision and the
 * earliest receipt as return time, unseen ones are dropped, deletes stay unknown — and a stale
 * read that hid behind an unknown write becomes visible once the write is pinned.
 */
import { describe, expect, it } from "vitest";
import type { Operation } from "./history.js";
import { patchUnknownWrites } from "./history_patch.js";
import { checkKvHistory } from "./linearizability.js";
import type { WatchEvent, WatchStream } from "./watch_history.js";

const putEvent = (key: string, value: string, rev: number, version = 1): WatchEvent => ({ type: "put", kv: { key, value, createRevision: rev, modRevision: rev, version } });

function streamOf(id: number, responses: Array<{ time: number; events: WatchEvent[] }>): WatchStream {
  return { id, range: { key: "", rangeEnd: "\u0000" }, prevKv: false, segments: [{ startRevision: 1, responses: responses.map((r) => ({ ...r, headerRevision: 0, progressNotify: false })) }] };
}

describe("patchUnknownWrites", () => {
  const history: Operation[] = [
    { id: 0, clientId: 1, op: { kind: "put", key: "x", value: "a" }, call: 0, ret: 1, result: { kind: "put", revision: 2 } },
    { id: 1, clientId: 2, op: { kind: "put", key: "x", value: "b" }, call: 2, ret: Infinity },
    { id: 2, clientId: 3, op: { kind: "cas", key: "x", compare: { target: "value", value: "zz" }, value: "c" }, call: 2, ret: Infinity },
    { id: 3, clientId: 4, op: { kind: "delete", key: "y" }, call: 2, ret: Infinity },
    // A read after b was surely applied (the watcher saw it at t=5) that returns a: stale.
    { id: 4, clientId: 1, op: { kind: "get", key: "x" }, call: 10, ret: 11, result: { kind: "get", revision: 3, kv: { value: "a", modRevision: 2 } } },
  ];
  const live = streamOf(1, [{ time: 1, events: [putEvent("x", "a", 2)] }, { time: 5, events: [putEvent("x", "b", 3, 2)] }]);
  const replay = streamOf(999, [{ time: 50, events: [putEvent("x", "a", 2), putEvent("x", "b", 3, 2)] }]);

  it("pins applied writes, drops unseen ones, keeps unknown deletes", () => {
    const { history: h, stats } = patchUnknownWrites(history, [live, replay], replay);
    expect(stats).toEqual({ applied: 1, notApplied: 1, stillUnknown: 1 });
    const b = h.find((o) => o.id === 1)!;
    expect(b.result).toEqual({ kind: "put", revision: 3 });
    expect(b.ret).toBe(5);
    expect(h.some((o) => o.id === 2)).toBe(false);
    expect(h.find((o) => o.id === 3)!.ret).toBe(Infinity);
  });

  it("turns a stale read hidden by an unknown write into a caught violation", () => {
    // Unpatched, b may not have been applied, so reading a is allowed.
    expect(checkKvHistory(history).outcome).toBe("ok");
    const { history: h } = patchUnknownWrites(history, [live, replay], replay);
    expect(checkKvHistory(h).outcome).toBe("illegal");
  });

  it("a write seen only by the late replay gets its revision but no return time", () => {
    const { history: h } = patchUnknownWrites(history, [replay], replay);
    const b = h.find((o) => o.id === 1)!;
    expect(b.result).toEqual({ kind: "put", revision: 3 });
    expect(b.ret).toBe(Infinity);
  });
});
