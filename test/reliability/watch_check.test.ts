/**
 * Watch checks on good streams (whole, resumed, ranged, with unknown-outcome writes) and on
 * streams broken in each way etcd promises they never are.
 */
import { describe, expect, it } from "vitest";
import type { History, Operation } from "./history.js";
import { checkWatches, type WatchViolationKind } from "./watch_check.js";
import { inRange, prefixRangeEnd, WatchStreamRecorder, type WatchEvent, type WatchKv, type WatchStream } from "./watch_history.js";

interface Scenario {
  history: History;
  /** One event per write, in revision order, with prev_kv and etcd's metadata. */
  events: WatchEvent[];
}

/** Applies writes in order from revision 2; `unknown` marks writes whose client got no answer. */
function scenario(writes: Array<{ key: string; value: string | null; unknown?: boolean }>): Scenario {
  const state = new Map<string, WatchKv>();
  const history: Operation[] = [];
  const events: WatchEvent[] = [];
  let rev = 1;
  writes.forEach((w, i) => {
    const prev = state.get(w.key) ?? null;
    if (w.value === null && prev === null) throw new Error("test bug: delete of an absent key");
    rev++;
    const op: Operation = w.value === null
      ? { id: i, clientId: 1, op: { kind: "delete", key: w.key }, call: i, ret: w.unknown ? Infinity : i + 0.5, ...(w.unknown ? {} : { result: { kind: "delete", revision: rev, deleted: 1 } }) }
      : { id: i, clientId: 1, op: { kind: "put", key: w.key, value: w.value }, call: i, ret: w.unknown ? Infinity : i + 0.5, ...(w.unknown ? {} : { result: { kind: "put", revision: rev } }) };
    history.push(op);
    if (w.value === null) {
      state.delete(w.key);
      events.push({ type: "delete", kv: { key: w.key, value: "", createRevision: 0, modRevision: rev, version: 0 }, prevKv: prev });
    } else {
      const kv = { key: w.key, value: w.value, createRevision: prev?.createRevision ?? rev, modRevision: rev, version: (prev?.version ?? 0) + 1 };
      state.set(w.key, kv);
      events.push({ type: "put", kv, prevKv: prev });
    }
  });
  return { history, events };
}

const basic = () =>
  scenario([
    { key: "a", value: "1" },
    { key: "b", value: "2" },
    { key: "a", value: "3" },
    { key: "a", value: null },
    { key: "b", value: "4" },
    { key: "a", value: "5" },
  ]);

/** A stream over all keys from revision 2, events grouped `perResponse` to a response. */
function stream(events: WatchEvent[], opts: { perResponse?: number; prevKv?: boolean; progressAt?: number; start?: number } = {}): WatchStream {
  const per = opts.perResponse ?? 2;
  const responses = [];
  for (let i = 0; i < events.length; i += per) {
    const evs = events.slice(i, i + per);
    responses.push({ time: i, headerRevision: evs[evs.length - 1]!.kv.modRevision, events: evs, progressNotify: false });
  }
  if (opts.progressAt !== undefined) responses.push({ time: 99, headerRevision: opts.progressAt, events: [], progressNotify: true });
  return { id: 1, range: { key: "\u0000", rangeEnd: "\u0000" }, prevKv: opts.prevKv ?? true, segments: [{ startRevision: opts.start ?? 2, responses }] };
}

function kinds(h: History, streams: WatchStream[]): WatchViolationKind[] {
  return [...new Set(checkWatches(h, streams).violations.map((v) => v.kind))];
}

describe("good watch streams pass", () => {
  it("a whole stream with prev_kv and a trailing progress notification", () => {
    const { history, events } = basic();
    const r = checkWatches(history, [stream(events, { progressAt: 7 })]);
    expect(r.violations).toEqual([]);
    expect(r.stats).toMatchObject({ streams: 1, events: 6, progressNotifies: 1, requiredDeliveries: 6, prevKvChecked: 6, prevKvUnverifiable: 0 });
  });

  it("a stream resumed after a failure, from the revision after its last event", () => {
    const { history, events } = basic();
    const rec = new WatchStreamRecorder(7, { key: "\u0000", rangeEnd: "\u0000" }, true);
    expect(rec.open(2)).toBe(2);
    rec.created(1);
    rec.response({ time: 0, headerRevision: 4, events: events.slice(0, 3), progressNotify: false });
    expect(rec.open(2)).toBe(5);
    rec.created(7);
    rec.response({ time: 1, headerRevision: 7, events: events.slice(3), progressNotify: false });
    expect(checkWatches(history, [rec.stream]).violations).toEqual([]);
  });

  it("single-key and prefix ranges see only their keys; a watch from now starts after creation", () => {
    const { history, events } = basic();
    const onlyB: WatchStream = { id: 2, range: { key: "b", rangeEnd: "" }, prevKv: false, segments: [{ startRevision: 0, createdRevision: 2, responses: [{ time: 0, headerRevision: 6, events: events.filter((e) => e.kv.key === "b"), progressNotify: false }] }] };
    expect(checkWatches(history, [onlyB]).violations).toEqual([]);
    expect(inRange({ key: "a", rangeEnd: prefixRangeEnd("a") }, "ab")).toBe(true);
    expect(inRange({ key: "a", rangeEnd: prefixRangeEnd("a") }, "b")).toBe(false);
  });

  it("an unknown-outcome write revealed by a watch event fills the revision log", () => {
    const { history, events } = scenario([
      { key: "a", value: "1" },
      { key: "a", value: "2", unknown: true },
      { key: "a", value: "3" },
    ]);
    expect(checkWatches(history, [stream(events)]).violations).toEqual([]);
  });
});

describe("broken watch streams are caught", () => {
  it("a gap: an acknowledged write in range is missing", () => {
    const { history, events } = basic();
    expect(kinds(history, [stream(events.filter((_, i) => i !== 2), { prevKv: false })])).toEqual(["gap"]);
  });

  it("a gap revealed only by a progress notification past the missing write", () => {
    const { history, events } = basic();
    expect(kinds(history, [stream(events.slice(0, 4), { progressAt: 7, prevKv: false })])).toEqual(["gap"]);
  });

  it("out of order", () => {
    const { history, events } = basic();
    const swapped = [events[0]!, events[2]!, events[1]!, ...events.slice(3)];
    expect(kinds(history, [stream(swapped, { perResponse: 1, prevKv: false })])).toContain("out-of-order");
  });

  it("a duplicate: a resumed segment redelivers below the revision it resumed from", () => {
    const { history, events } = basic();
    const s = stream(events.slice(0, 3), { prevKv: false });
    s.segments.push({ startRevision: 5, responses: [{ time: 5, headerRevision: 7, events: events.slice(2), progressNotify: false }] });
    expect(kinds(history, [s]).sort()).toEqual(["duplicate", "not-atomic", "resumed-below-start"]);
  });

  it("a revision's events split across responses", () => {
    const { history, events } = basic();
    const twin: WatchEvent = { ...events[1]!, kv: { ...events[1]!.kv } };
    const s = stream([events[0]!, events[1]!], { perResponse: 1, prevKv: false });
    // A second event of revision 3 (a multi-key txn) delivered in a later response.
    twin.kv.key = "c";
    s.segments[0]!.responses.push({ time: 9, headerRevision: 3, events: [twin], progressNotify: false });
    expect(kinds(history, [s])).toContain("not-atomic");
  });

  it("an event that contradicts the history, and one nobody wrote", () => {
    const { history, events } = basic();
    const wrong = events.map((e, i) => (i === 1 ? { ...e, kv: { ...e.kv, value: "XX" } } : e));
    expect(kinds(history, [stream(wrong, { prevKv: false })])).toContain("event-contradicts-history");
    const ghost: WatchEvent = { type: "put", kv: { key: "z", value: "ghost", createRevision: 8, modRevision: 8, version: 1 } };
    expect(kinds(history, [stream([...events, ghost], { prevKv: false })])).toContain("event-never-written");
  });

  it("a progress notification ahead of delivered events", () => {
    const { history, events } = basic();
    const s = stream(events.slice(0, 3), { prevKv: false });
    s.segments[0]!.responses.push({ time: 50, headerRevision: 6, events: [], progressNotify: true });
    s.segments[0]!.responses.push({ time: 51, headerRevision: 7, events: events.slice(3), progressNotify: false });
    expect(kinds(history, [s])).toEqual(["progress-ahead"]);
  });

  it("a wrong prev_kv and wrong version / create_revision", () => {
    const { history, events } = basic();
    const badPrev = events.map((e, i) => (i === 2 ? { ...e, prevKv: null } : e));
    expect(kinds(history, [stream(badPrev)])).toEqual(["prev-kv-wrong"]);
    const badVersion = events.map((e, i) => (i === 5 ? { ...e, kv: { ...e.kv, version: 3, createRevision: 2 } } : e));
    expect(kinds(history, [stream(badVersion)])).toEqual(["kv-metadata-wrong"]);
  });

  it("prev_kv is not judged across a hole in the revision log (unknown write nobody saw)", () => {
    const { history, events } = scenario([
      { key: "a", value: "1" },
      { key: "a", value: "2", unknown: true },
      { key: "a", value: "3" },
    ]);
    // A watcher on "a" that only starts at revision 4: nobody saw revision 3.
    const late: WatchStream = { id: 3, range: { key: "a", rangeEnd: "" }, prevKv: true, segments: [{ startRevision: 4, responses: [{ time: 0, headerRevision: 4, events: [events[2]!], progressNotify: false }] }] };
    const r = checkWatches(history, [late]);
    expect(r.violations).toEqual([]);
    expect(r.stats.prevKvUnverifiable).toBe(1);
  });
});
