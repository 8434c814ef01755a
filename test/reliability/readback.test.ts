/**
 * The lost-write check (readback.ts) against in-memory members with injected losses: a put
 * missing on one member, a wrong value, a delete that did not happen, a write compacted before it
 * was read, members down or behind; and the compaction bound it hands the fault injector.
 */
import { describe, expect, it } from "vitest";
import { HistoryRecorder, type KvOp, type KvResult } from "./history.js";
import { ReadBack, writesMissingFromWatch, type MemberReader, type ReadAt } from "./readback.js";
import type { WatchStream } from "./watch_history.js";

/** A member's revision history: per revision, the key it wrote and the value (null: delete). */
class FakeMember implements MemberReader {
  readonly log = new Map<number, { key: string; value: string | null }>();
  applied = 0;
  compacted = 0;
  down = false;
  requests = 0;

  constructor(readonly name: string) {}

  apply(rev: number, key: string, value: string | null): void {
    this.log.set(rev, { key, value });
    this.applied = Math.max(this.applied, rev);
  }

  async localRevision(): Promise<number> {
    if (this.down) throw new Error("UNAVAILABLE");
    return this.applied;
  }

  async readAt(reads: ReadonlyArray<{ key: string; revision: number }>): Promise<ReadAt[]> {
    this.requests++;
    if (this.down) throw new Error("UNAVAILABLE");
    for (const r of reads) {
      if (r.revision < this.compacted) throw Object.assign(new Error("compacted"), { details: "etcdserver: mvcc: required revision has been compacted" });
      if (r.revision > this.applied) throw Object.assign(new Error("future"), { details: "etcdserver: mvcc: required revision is a future revision" });
    }
    return reads.map((r) => {
      let found: ReadAt = { kind: "absent" };
      for (let rev = 1; rev <= r.revision; rev++) {
        const w = this.log.get(rev);
        if (w === undefined || w.key !== r.key) continue;
        found = w.value === null ? { kind: "absent" } : { kind: "kv", value: w.value, modRevision: rev };
      }
      return found;
    });
  }
}

/** Three members that applied the same writes, and the recorded history of those writes. */
function setup(writes: Array<{ op: KvOp; result: KvResult }>) {
  let t = 0;
  const rec = new HistoryRecorder({ now: () => t++ });
  const members = ["n1", "n2", "n3"].map((n) => new FakeMember(n));
  for (const w of writes) {
    const p = rec.invoke(0, w.op);
    rec.ok(p, w.result);
    const rev = w.result.revision;
    if (w.op.kind === "get") continue;
    if (w.result.kind === "cas" && !w.result.succeeded) continue;
    for (const m of members) m.apply(rev, w.op.key, w.op.kind === "delete" ? null : w.op.value);
  }
  const rb = new ReadBack(members, { batch: 4 });
  rb.follow(rec.completed());
  return { rec, members, rb };
}

const put = (key: string, value: string, revision: number) => ({ op: { kind: "put", key, value } as KvOp, result: { kind: "put", revision } as KvResult });
const del = (key: string, revision: number) => ({ op: { kind: "delete", key } as KvOp, result: { kind: "delete", revision, deleted: 1 } as KvResult });
const cas = (key: string, value: string, revision: number) => ({ op: { kind: "cas", key, compare: { target: "mod", modRevision: 0 }, value } as KvOp, result: { kind: "cas", revision, succeeded: true } as KvResult });
const get = (key: string, revision: number) => ({ op: { kind: "get", key } as KvOp, result: { kind: "get", revision, kv: null } as KvResult });

const HISTORY = [put("a", "1", 2), put("b", "1", 3), put("a", "2", 4), del("b", 5), cas("c", "1", 6), get("a", 6), put("a", "3", 7), put("c", "2", 8), put("d", "1", 9)];

describe("read-back of acknowledged writes", () => {
  it("every write found on every member: nothing lost, every write read on each member, in batches", async () => {
    const { members, rb } = setup(HISTORY);
    await rb.sweep();
    expect(rb.writes).toBe(8);
    expect([rb.lost, rb.unverified, rb.verified, rb.pendingCount()]).toEqual([[], [], 24, 0]);
    // 8 writes, one a delete (two reads), batches of 4 reads: more than one request per member.
    for (const m of members) expect(m.requests).toBeGreaterThan(1);
  });

  it("a put missing on one member is lost, named with the member", async () => {
    const { members, rb } = setup(HISTORY);
    members[1]!.log.delete(4); // n2 never applied a=2
    await rb.sweep();
    expect(rb.lost).toEqual(["n2: put a=2 acknowledged at revision 4, the member has 1@2 at revision 4"]);
  });

  it("a wrong value at the write's revision is lost", async () => {
    const { members, rb } = setup(HISTORY);
    members[2]!.log.set(8, { key: "c", value: "other" });
    await rb.sweep();
    expect(rb.lost).toEqual(["n3: put c=2 acknowledged at revision 8, the member has other@8 at revision 8"]);
  });

  it("a delete that did not happen on a member is lost", async () => {
    const { members, rb } = setup(HISTORY);
    members[0]!.log.delete(5);
    await rb.sweep();
    expect(rb.lost).toEqual(["n1: delete b acknowledged at revision 5, the member has 1@3 at revision 5 and 1@3 at 4"]);
  });

  it("a delete acknowledged at a revision that deleted nothing of that key is lost", async () => {
    const { members, rb } = setup([put("a", "1", 2), del("b", 3)]);
    for (const m of members) m.log.set(3, { key: "a", value: null }); // revision 3 deleted a, not b
    await rb.sweep();
    expect(rb.lost).toHaveLength(3);
    expect(rb.lost[0]).toMatch(/^n1: delete b acknowledged at revision 3, the member has no key at revision 3 and no key at 2$/);
  });

  it("a member that is down keeps its writes pending and holds compaction below them; they are read when it is back", async () => {
    const { members, rb } = setup(HISTORY);
    members[2]!.down = true;
    await rb.sweep();
    expect(rb.pendingCount()).toBe(8);
    expect(rb.pendingByMember()).toEqual({ n1: 0, n2: 0, n3: 8 });
    expect(rb.compactionBound(Infinity)).toBe(1);
    members[2]!.down = false;
    await rb.sweep();
    expect([rb.pendingCount(), rb.lost.length, rb.compactionBound(Infinity)]).toEqual([0, 0, Infinity]);
  });

  it("a member behind reads only what it has applied; the rest waits", async () => {
    const { members, rb } = setup(HISTORY);
    members[1]!.applied = 5;
    await rb.sweep();
    expect(rb.pendingByMember()).toEqual({ n1: 0, n2: 4, n3: 0 });
    expect(rb.compactionBound(Infinity)).toBe(5);
    members[1]!.applied = 9;
    await rb.sweep();
    expect([rb.pendingCount(), rb.lost]).toEqual([0, []]);
  });

  it("a write compacted before it was read back is unverified, not silently passed", async () => {
    const { members, rb } = setup(HISTORY);
    members[0]!.compacted = 5;
    await rb.sweep();
    expect(rb.unverified).toEqual([
      "n1: put a=1 acknowledged at revision 2 was compacted before it was read back",
      "n1: put b=1 acknowledged at revision 3 was compacted before it was read back",
      "n1: put a=2 acknowledged at revision 4 was compacted before it was read back",
      "n1: delete b acknowledged at revision 5 was compacted before it was read back",
    ]);
    expect(rb.lost).toEqual([]);
    await rb.sweep();
    expect(rb.pendingCount()).toBe(0);
  });

  it("writes acknowledged later are taken at the next sweep; the bound stays below operations in flight", async () => {
    let t = 0;
    const rec = new HistoryRecorder({ now: () => t++ });
    const m = new FakeMember("n1");
    const rb = new ReadBack([m]);
    rb.follow(rec.completed());
    const p1 = rec.invoke(0, { kind: "put", key: "a", value: "1" });
    rec.ok(p1, { kind: "put", revision: 10 });
    m.apply(10, "a", "1");
    const inflight = rec.invoke(1, { kind: "delete", key: "a" }); // floor: revision 10 was seen
    await rb.sweep();
    expect([rb.writes, rb.verified]).toEqual([1, 1]);
    expect(rec.inflightFloor()).toBe(10);
    expect(rb.compactionBound(rec.inflightFloor())).toBe(10);
    rec.ok(inflight, { kind: "delete", revision: 11, deleted: 1 });
    m.apply(11, "a", null);
    expect(rec.inflightFloor()).toBe(Infinity);
    expect(rb.compactionBound(rec.inflightFloor())).toBe(Infinity); // not synced yet: the injector syncs first
    rb.sync();
    expect(rb.compactionBound(rec.inflightFloor())).toBe(10); // the delete reads revision 10 too
    await rb.sweep();
    expect([rb.writes, rb.verified, rb.lost]).toEqual([2, 2, []]);
  });
});

describe("writes missing from the watch streams", () => {
  function stream(events: Array<{ rev: number; key: string; value: string | null }>): WatchStream {
    return {
      segments: [
        {
          responses: events.map((e) => ({ events: [{ type: e.value === null ? "delete" : "put", kv: { key: e.key, value: e.value ?? "", modRevision: e.rev, createRevision: 0, version: 0 } }] })),
        },
      ],
    } as unknown as WatchStream;
  }

  it("finds a write with no event, and one whose event has another value", () => {
    const { rec } = setup([put("a", "1", 2), put("a", "2", 3), del("a", 4)]);
    const history = rec.history();
    expect(writesMissingFromWatch(history, [stream([{ rev: 2, key: "a", value: "1" }, { rev: 3, key: "a", value: "2" }, { rev: 4, key: "a", value: null }])])).toEqual([]);
    expect(writesMissingFromWatch(history, [stream([{ rev: 2, key: "a", value: "1" }, { rev: 4, key: "a", value: "x" }])])).toEqual([
      "put a=2 acknowledged at revision 3, the watch streams have nothing",
      "delete a acknowledged at revision 4, the watch streams have a=x",
    ]);
  });
});
