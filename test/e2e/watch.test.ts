/**
 * etcdserverpb.Watch over a real three-member cluster, driven by a plain @grpc/grpc-js client (protos
 * from proto/, snake_case fields, int64 as strings). Every expectation was first checked against
 * etcd 3.4 (E2E_TARGET=etcd).
 */
import * as grpc from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Cluster, eventually } from "./harness.js";
import { endWatchSuite, Kvc, pkg, prefixEnd, s, unary, WATCH_SUITE_FLAGS, WatchClient, type Header, type WatchResp } from "./watch_client.js";

// ---------------------------------------------------------------- the suite

let cluster: Cluster;
let kv: Kvc;
const open: WatchClient[] = [];

function watchClient(endpoint = cluster.members[0]!.endpoint, md?: grpc.Metadata): WatchClient {
  const w = new WatchClient(endpoint, md);
  open.push(w);
  return w;
}

beforeAll(async () => {
  cluster = await Cluster.create({
    size: 3,
    extraArgs: [
      "--heartbeat-interval=50",
      "--election-timeout=500",
      ...WATCH_SUITE_FLAGS,
    ],
  });
  await cluster.start();
  kv = new Kvc(cluster.members[0]!.endpoint);
});
afterAll(() => endWatchSuite(open, kv, cluster));

describe("watch", () => {
  it("create answers created with an id and the current revision; events follow; cancel stops them", async () => {
    const rev0 = await kv.put("wc/a", "0");
    const w = watchClient();
    const created = await w.watch({ key: "wc/a" });
    expect(created.watch_id).toBe("0");
    expect(created.canceled).toBe(false);
    expect(created.events).toEqual([]);
    expect(Number(created.header.revision)).toBe(rev0);
    const h = await kv.header();
    expect(created.header.cluster_id).toBe(h.cluster_id);
    expect(created.header.member_id).toBe(h.member_id);
    expect(created.header.raft_term).toBe(h.raft_term);

    const rev1 = await kv.put("wc/a", "1");
    const r = await w.next();
    expect(r.watch_id).toBe("0");
    expect(Number(r.header.revision)).toBe(rev1);
    expect(r.events.map((e) => [e.type, s(e.kv.key), s(e.kv.value), Number(e.kv.mod_revision)])).toEqual([["PUT", "wc/a", "1", rev1]]);
    expect(r.events[0]!.prev_kv).toBeNull();

    w.cancel(0);
    const c = await w.next();
    expect(c).toMatchObject({ watch_id: "0", canceled: true, created: false, events: [] });
    expect(Number(c.header.revision)).toBe(rev1);

    // A watcher created after the cancel sees the next writes; the canceled one none.
    const second = await w.watch({ key: "wc/b" });
    expect(second.watch_id).toBe("1");
    await kv.put("wc/a", "2");
    await kv.put("wc/b", "x");
    const next = await w.next();
    expect(next.watch_id).toBe("1");
    expect(s(next.events[0]!.kv.key)).toBe("wc/b");
  });

  // Before any compaction (keep this above the tests that compact): etcd's compact revision is -1.
  it("a negative start revision: -1 watches live without history, -2 is canceled with compact_revision -1", async () => {
    await kv.put("wneg/k", "old");
    const w = watchClient();
    const minusOne = await w.watch({ key: "wneg/k", start_revision: -1 });
    expect(minusOne.canceled).toBe(false);
    const minusTwo = await w.watch({ key: "wneg/k", start_revision: -2 });
    expect(minusTwo.canceled).toBe(false);
    const c = await w.next();
    expect(c).toMatchObject({ watch_id: minusTwo.watch_id, canceled: true, compact_revision: "-1", cancel_reason: "", events: [] });
    expect(c.header.revision).toBe("0");
    const rev = await kv.put("wneg/k", "live");
    const live = await w.next();
    expect(live.watch_id).toBe(minusOne.watch_id);
    expect(live.events.map((e) => [s(e.kv.value), Number(e.kv.mod_revision)])).toEqual([["live", rev]]);
  });

  it("/metrics exports etcd_debugging_mvcc_watcher_total, following watchers as they come and go", async () => {
    const member = cluster.members[0]!;
    const gauge = async (): Promise<number | undefined> => {
      const text = await (await fetch(`${member.clientUrl}/metrics`)).text();
      const m = /^etcd_debugging_mvcc_watcher_total (\S+)$/m.exec(text);
      return m === null ? undefined : Number(m[1]);
    };
    const before = await gauge();
    expect(before, "etcd_debugging_mvcc_watcher_total on /metrics").toBeDefined();
    const w = watchClient(member.endpoint);
    const a = await w.watch({ key: "wmet/a" });
    await w.watch({ key: "wmet/b" });
    await eventually(async () => ((await gauge()) === before! + 2 ? true : undefined), 10_000, "watcher_total + 2");
    // A watcher dropped by compaction (-2 is below etcd's initial compact revision -1) still counts
    // until its client cancels it: etcd's watcherGauge goes down only in cancelWatcher.
    const dropped = await w.watch({ key: "wmet/c", start_revision: -2 });
    expect(await w.next()).toMatchObject({ watch_id: dropped.watch_id, canceled: true, compact_revision: "-1" });
    await eventually(async () => ((await gauge()) === before! + 3 ? true : undefined), 10_000, "watcher_total + 3");
    w.cancel(dropped.watch_id);
    expect((await w.next()).canceled).toBe(true);
    await eventually(async () => ((await gauge()) === before! + 2 ? true : undefined), 10_000, "watcher_total + 2 again");
    w.cancel(a.watch_id);
    expect((await w.next()).canceled).toBe(true);
    await eventually(async () => ((await gauge()) === before! + 1 ? true : undefined), 10_000, "watcher_total + 1");
    w.close();
    await eventually(async () => ((await gauge()) === before ? true : undefined), 10_000, "watcher_total back");
  });

  it("canceling an unknown id gets no answer", async () => {
    const w = watchClient();
    await w.watch({ key: "wu/a" });
    w.cancel(42);
    await kv.put("wu/a", "1");
    const r = await w.next();
    expect(r.watch_id).toBe("0");
    expect(r.canceled).toBe(false);
    expect(r.events).toHaveLength(1);
  });

  it("honours a client-given watch id; a duplicate id or an empty range is created and canceled at once", async () => {
    const w = watchClient();
    const rev = Number((await kv.header()).revision);
    const mine = await w.watch({ key: "wd/a", watch_id: 7 });
    expect(mine.watch_id).toBe("7");
    const dup = await w.watch({ key: "wd/b", watch_id: 7 });
    expect(dup).toMatchObject({ watch_id: "-1", created: true, canceled: true, cancel_reason: "mvcc: duplicate watch ID provided on the WatchStream" });
    expect(Number(dup.header.revision)).toBe(rev);
    const empty = await w.watch({ key: "wd/z", range_end: "wd/a" });
    expect(empty).toMatchObject({ watch_id: "-1", created: true, canceled: true, cancel_reason: "mvcc: watcher range is empty" });
    const same = await w.watch({ key: "wd/a", range_end: "wd/a" });
    expect(same).toMatchObject({ watch_id: "-1", canceled: true, cancel_reason: "mvcc: watcher range is empty" });
    // Auto ids skip the taken one.
    const auto = await w.watch({ key: "wd/c" });
    expect(auto.watch_id).toBe("0");
    await kv.put("wd/a", "1");
    const r = await w.next();
    expect(r.watch_id).toBe("7");
  });

  it("multiplexes several watchers (key, prefix, from-key) on one stream", async () => {
    const w = watchClient();
    const one = await w.watch({ key: "wm/a" });
    const prefix = await w.watch({ key: "wm/", range_end: prefixEnd("wm/") });
    const fromKey = await w.watch({ key: "wm/b", range_end: Buffer.from([0]) });
    expect([one.watch_id, prefix.watch_id, fromKey.watch_id]).toEqual(["0", "1", "2"]);
    const r1 = await kv.put("wm/a", "1");
    const r2 = await kv.put("wm/b", "2");
    const got: Array<[string, string, number]> = [];
    while (got.length < 4) {
      const r = await w.next();
      for (const e of r.events) got.push([r.watch_id, s(e.kv.key), Number(r.header.revision)]);
    }
    got.sort((a, b) => a[2] - b[2] || a[0].localeCompare(b[0]));
    expect(got).toEqual([
      ["0", "wm/a", r1],
      ["1", "wm/a", r1],
      ["1", "wm/b", r2],
      ["2", "wm/b", r2],
    ]);
  });

  it("a start revision in the past replays history, then continues live", async () => {
    const r1 = await kv.put("wp/k", "1");
    const r2 = await kv.put("wp/k", "2");
    const r3 = await kv.del("wp/k");
    const w = watchClient();
    const created = await w.watch({ key: "wp/k", start_revision: r1 });
    expect(Number(created.header.revision)).toBe(r3);
    const history = await w.events("0", 3);
    expect(history.map((e) => [e.type, Number(e.kv.mod_revision), s(e.kv.value)])).toEqual([
      ["PUT", r1, "1"],
      ["PUT", r2, "2"],
      ["DELETE", r3, ""],
    ]);
    const r4 = await kv.put("wp/k", "4");
    const live = await w.next();
    expect(live.events.map((e) => [e.type, Number(e.kv.mod_revision), Number(e.kv.version)])).toEqual([["PUT", r4, 1]]);
  });

  it("a start revision in the future waits for it", async () => {
    const cur = Number((await kv.header()).revision);
    const w = watchClient();
    await w.watch({ key: "wfu/k", start_revision: cur + 2 });
    await kv.put("wfu/k", "skipped");
    const r2 = await kv.put("wfu/k", "seen");
    const evs = await w.events("0", 1);
    expect(evs.map((e) => [s(e.kv.value), Number(e.kv.mod_revision)])).toEqual([["seen", r2]]);
  });

  it("a client that half-closes its side keeps receiving events", async () => {
    const w = watchClient();
    await w.watch({ key: "whc/k" });
    w.call.end();
    const rev = await kv.put("whc/k", "after-end");
    const evs = await w.events("0", 1);
    expect(Number(evs[0]!.kv.mod_revision)).toBe(rev);
  });

  it("a compacted start revision cancels the watcher with compact_revision", async () => {
    const r1 = await kv.put("wx/k", "1");
    await kv.put("wx/k", "2");
    const r3 = await kv.put("wx/k", "3");
    await kv.compact(r3);
    const w = watchClient();
    const created = await w.watch({ key: "wx/k", start_revision: r1, watch_id: 7 });
    expect(created.canceled).toBe(false);
    const c = await w.next();
    expect(c).toMatchObject({ watch_id: created.watch_id, canceled: true, compact_revision: String(r3), events: [] });
    // etcd 3.4 gives no cancel_reason here: clients derive ErrCompacted from compact_revision.
    expect(c.cancel_reason).toBe("");
    // ... and, like etcd's mvcc response for it, no revision in the header.
    expect(c.header.revision).toBe("0");
    // After a compaction every negative start is a compacted one.
    const neg = await w.watch({ key: "wx/k", start_revision: -1 });
    expect(await w.next()).toMatchObject({ watch_id: neg.watch_id, canceled: true, compact_revision: String(r3), events: [] });
    // A start at the compaction revision itself is still readable.
    const ok = await w.watch({ key: "wx/k", start_revision: r3 });
    const ev = await w.events(ok.watch_id, 1);
    expect(Number(ev[0]!.kv.mod_revision)).toBe(r3);
    // The lowest start of all is compacted too.
    const lowest = await w.watch({ key: "wx/k", start_revision: "-9223372036854775808" });
    expect(await w.next()).toMatchObject({ watch_id: lowest.watch_id, canceled: true, compact_revision: String(r3) });
    // A compacted watcher leaves the store, not its stream (etcd's w.compacted): its id is still
    // taken, and the client's cancel of it is answered; then the id is free again.
    w.create({ key: "wx/k", watch_id: created.watch_id });
    expect(await w.next()).toMatchObject({ watch_id: "-1", created: true, canceled: true, cancel_reason: "mvcc: duplicate watch ID provided on the WatchStream" });
    w.cancel(created.watch_id);
    expect(await w.next()).toMatchObject({ watch_id: created.watch_id, created: false, canceled: true, cancel_reason: "" });
    const again = await w.watch({ key: "wx/k", watch_id: created.watch_id });
    expect(again).toMatchObject({ watch_id: created.watch_id, canceled: false });
  });

  it("prev_kv carries the previous value of puts and deletes", async () => {
    await kv.put("wk/a", "v1");
    const w = watchClient();
    await w.watch({ key: "wk/a", prev_kv: true });
    await kv.put("wk/a", "v2");
    await kv.del("wk/a");
    await kv.put("wk/a", "v3");
    const evs = await w.events("0", 3);
    expect(evs.map((e) => [e.type, s(e.kv.value), e.prev_kv === null ? null : s(e.prev_kv.value)])).toEqual([
      ["PUT", "v2", "v1"],
      ["DELETE", "", "v2"],
      ["PUT", "v3", null],
    ]);
  });

  it("filters drop puts (NOPUT) or deletes (NODELETE)", async () => {
    const w = watchClient();
    await w.watch({ key: "wf/", range_end: prefixEnd("wf/"), filters: ["NOPUT"] });
    await w.watch({ key: "wf/", range_end: prefixEnd("wf/"), filters: ["NODELETE"] });
    await kv.put("wf/a", "1");
    await kv.del("wf/a");
    await kv.put("wf/b", "2");
    const seen: string[] = [];
    while (seen.length < 3) {
      const r = await w.next();
      for (const e of r.events) seen.push(`${r.watch_id} ${e.type} ${s(e.kv.key)}`);
    }
    expect(seen.sort()).toEqual(["0 DELETE wf/a", "1 PUT wf/a", "1 PUT wf/b"]);
  });

  it("a progress request is answered with watch id -1 at the current revision", async () => {
    const w = watchClient();
    await w.watch({ key: "wg/a" });
    const rev = await kv.put("wz/other", "x");
    w.progress();
    const p = await w.next();
    expect(p).toMatchObject({ watch_id: "-1", created: false, canceled: false, events: [] });
    expect(Number(p.header.revision)).toBe(rev);
    // Also on a stream without watchers.
    const bare = watchClient();
    bare.progress();
    expect((await bare.next()).watch_id).toBe("-1");
  });

  it("progress_notify sends empty responses to an idle watcher", async () => {
    const w = watchClient();
    const created = await w.watch({ key: "wn/a", progress_notify: true });
    const rev = Number((await kv.header()).revision);
    const p = await w.next(10_000);
    expect(p).toMatchObject({ watch_id: created.watch_id, events: [], canceled: false });
    expect(Number(p.header.revision)).toBeGreaterThanOrEqual(rev);
  });

  it("fragment splits a revision larger than the response limit; without it one response", async () => {
    const value = Buffer.alloc(100_000, "v");
    for (let i = 0; i < 10; i++) await kv.put(`wfrag/${i}`, value);
    const w = watchClient();
    await w.watch({ key: "wfrag/", range_end: prefixEnd("wfrag/"), prev_kv: true, fragment: true });
    await w.watch({ key: "wfrag/", range_end: prefixEnd("wfrag/"), prev_kv: true });
    const rev = await kv.del("wfrag/", true);
    const parts: WatchResp[] = [];
    let whole: WatchResp | undefined;
    while (whole === undefined || parts.length === 0 || parts[parts.length - 1]!.fragment) {
      const r = await w.next();
      if (r.watch_id === "0") parts.push(r);
      else whole = r;
    }
    expect(parts.length).toBeGreaterThan(1);
    expect(parts.slice(0, -1).every((p) => p.fragment)).toBe(true);
    for (const p of parts) expect(Number(p.header.revision)).toBe(rev);
    const keys = parts.flatMap((p) => p.events.map((e) => s(e.kv.key)));
    expect(keys).toEqual(Array.from({ length: 10 }, (_, i) => `wfrag/${i}`));
    expect(parts.flatMap((p) => p.events).every((e) => e.type === "DELETE" && e.prev_kv?.value.length === 100_000)).toBe(true);
    expect(whole.fragment).toBe(false);
    expect(whole.events).toHaveLength(10);
  });

  it("many events arrive in order with no gaps, also when the client stops reading for a while", async () => {
    const w = watchClient();
    const created = await w.watch({ key: "wo/", range_end: prefixEnd("wo/") });
    const start = Number(created.header.revision) + 1;
    w.call.pause(); // the client stops reading: the server must park, not buffer without bound
    const N = 1000;
    const value = Buffer.alloc(2048, "x");
    let next = 0;
    const writer = async () => {
      while (next < N) {
        const i = next++;
        await kv.put(`wo/${i % 50}`, value);
      }
    };
    await Promise.all(Array.from({ length: 16 }, writer));
    w.call.resume();
    const resps = await w.eventResponses("0", N, 30_000);
    const evs = resps.flatMap((r) => r.events);
    expect(evs).toHaveLength(N);
    // One response per revision unless the stream was parked and caught up from the backend in batches.
    expect(resps.length).toBeLessThan(N);
    const revs = evs.map((e) => Number(e.kv.mod_revision));
    expect(revs).toEqual(Array.from({ length: N }, (_, i) => start + i));
  });

  it("a watcher on a follower sees the writes made through the leader", async () => {
    const status = await Promise.all(
      cluster.members.map(async (m) => {
        const c = new pkg.etcdserverpb.Maintenance!(m.endpoint, grpc.credentials.createInsecure());
        try {
          const r = await unary<{ leader: string; header: Header }>(c, "Status", {});
          return { m, leader: r.leader, id: r.header.member_id };
        } finally {
          c.close();
        }
      }),
    );
    const leaderId = status[0]!.leader;
    const leader = status.find((x) => x.id === leaderId)!.m;
    const follower = status.find((x) => x.id !== leaderId)!.m;
    const w = watchClient(follower.endpoint);
    const created = await w.watch({ key: "wl/k" });
    expect(created.header.member_id).not.toBe(leaderId);
    const lkv = new Kvc(leader.endpoint);
    try {
      const rev = await lkv.put("wl/k", "from-leader");
      const evs = await w.events("0", 1);
      expect([s(evs[0]!.kv.value), Number(evs[0]!.kv.mod_revision)]).toEqual(["from-leader", rev]);
    } finally {
      lkv.c.close();
    }
  });

  // Destructive: stops two members. Keep last.
  it("with hasleader, a stream ends with 'no leader' once the member loses its leader; new ones are refused", async () => {
    const survivor = cluster.members[2]!;
    const md = new grpc.Metadata();
    md.set("hasleader", "true");
    const w = watchClient(survivor.endpoint, md);
    await w.watch({ key: "wh/k" });
    const plain = watchClient(survivor.endpoint);
    await plain.watch({ key: "wh/k" });
    // Other streams with hasleader end too (etcd's interceptor cancels them).
    const election = new pkg.v3electionpb.Election!(survivor.endpoint, grpc.credentials.createInsecure());
    const observe = (election as unknown as Record<string, (req: object, md: grpc.Metadata) => grpc.ClientReadableStream<unknown>>).Observe!;
    const obs = observe.call(election, { name: Buffer.from("wh-election") }, md);
    let obsEnd: grpc.ServiceError | undefined;
    obs.on("error", (e: grpc.ServiceError) => (obsEnd = e));
    obs.on("data", () => undefined);
    await cluster.members[0]!.kill("SIGKILL");
    await cluster.members[1]!.kill("SIGKILL");
    const err = await eventually(async () => (w.ended !== undefined ? w.ended : undefined), 20_000, "hasleader stream end");
    expect(err).not.toBe("ok");
    expect((err as grpc.ServiceError).code).toBe(grpc.status.UNAVAILABLE);
    expect((err as grpc.ServiceError).details).toBe("etcdserver: no leader");
    const oe = await eventually(async () => obsEnd, 10_000, "hasleader observe end");
    expect([oe.code, oe.details]).toEqual([grpc.status.UNAVAILABLE, "etcdserver: no leader"]);
    election.close();
    // The stream without hasleader stays open.
    expect(plain.ended).toBeUndefined();
    const late = watchClient(survivor.endpoint, md);
    const lateErr = await eventually(async () => (late.ended !== undefined ? late.ended : undefined), 10_000, "refused stream");
    expect((lateErr as grpc.ServiceError).code).toBe(grpc.status.UNAVAILABLE);
    expect((lateErr as grpc.ServiceError).details).toBe("etcdserver: no leader");
  });
});
