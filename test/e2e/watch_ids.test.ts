/**
 * Watch ids over the whole int64 range (issue 16). etcd types a watch id as int64 (mvcc.WatchID) and
 * etcd 3.4 lets the client choose it (WatchCreateRequest.watch_id, field 7): an id above 2^53 (where
 * a double cannot hold every integer), the largest and the smallest int64 and negative ones are
 * answered back unchanged in the created response, in every event, progress notification,
 * fragment, compaction cancel and cancel response of their watcher, and a cancel by such an id
 * finds exactly that watcher. A duplicate is refused with etcd's words. Real gRPC (a plain
 * @grpc/grpc-js client, int64s as decimal strings) and the JSON gateway; E2E_TARGET=etcd runs the
 * same expectations against real etcd 3.4.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openStream } from "./gateway_client.js";
import { Cluster } from "./harness.js";
import { endWatchSuite, Kvc, prefixEnd, s, WATCH_SUITE_FLAGS, WatchClient, type WatchResp } from "./watch_client.js";

/** 2^53 + 1: the first integer a double rounds (to 2^53). */
const ABOVE_2_53 = 2n ** 53n + 1n;
const INT64_MAX = 2n ** 63n - 1n;
const INT64_MIN = -(2n ** 63n);

let cluster: Cluster;
let kv: Kvc;
const open: WatchClient[] = [];

function watchClient(): WatchClient {
  const w = new WatchClient(cluster.members[0]!.endpoint);
  open.push(w);
  return w;
}

/** The next `n` responses of `w`, sorted by watch id (a revision's responses to several watchers come in no set order). */
async function nextN(w: WatchClient, n: number): Promise<WatchResp[]> {
  const out: WatchResp[] = [];
  while (out.length < n) out.push(await w.next(15_000));
  return out.sort((a, b) => (BigInt(a.watch_id) < BigInt(b.watch_id) ? -1 : 1));
}

beforeAll(async () => {
  cluster = await Cluster.create({ size: 1, extraArgs: WATCH_SUITE_FLAGS });
  await cluster.start();
  kv = new Kvc(cluster.members[0]!.endpoint);
});
afterAll(() => endWatchSuite(open, kv, cluster));

describe("client-chosen watch ids over the whole int64 range", () => {
  const ids = [INT64_MIN, -5n, 2n ** 53n, ABOVE_2_53, INT64_MAX];

  it("are created, deliver events and are canceled under their exact id; a duplicate is refused; auto ids stay 0, 1, ...", async () => {
    const w = watchClient();
    const rev = Number((await kv.header()).revision);
    for (const id of ids) {
      const created = await w.watch({ key: "wi/a", watch_id: String(id) });
      expect(created).toMatchObject({ watch_id: String(id), created: true, canceled: false, cancel_reason: "" });
      expect(Number(created.header.revision)).toBe(rev);
    }
    // 2^53 + 1 again: taken (2^53, the double it would round to, was a new watcher above).
    const dup = await w.watch({ key: "wi/b", watch_id: String(ABOVE_2_53) });
    expect(dup).toMatchObject({ watch_id: "-1", created: true, canceled: true, cancel_reason: "mvcc: duplicate watch ID provided on the WatchStream" });
    const auto = await w.watch({ key: "wi/a" });
    expect(auto.watch_id).toBe("0");

    const put1 = await kv.put("wi/a", "1");
    const got = await nextN(w, ids.length + 1);
    expect(got.map((r) => r.watch_id)).toEqual([String(INT64_MIN), "-5", "0", String(2n ** 53n), String(ABOVE_2_53), String(INT64_MAX)]);
    for (const r of got) {
      expect(r.events.map((e) => [e.type, s(e.kv.key), s(e.kv.value), Number(e.kv.mod_revision)])).toEqual([["PUT", "wi/a", "1", put1]]);
      expect(Number(r.header.revision)).toBe(put1);
    }

    // A cancel finds the exact id: 2^53 + 1 goes, 2^53 stays.
    w.cancel(String(ABOVE_2_53));
    expect(await w.next()).toMatchObject({ watch_id: String(ABOVE_2_53), canceled: true, created: false, events: [] });
    // The same id again, and its neighbour above, are unknown now: no answer (the next response is an event).
    w.cancel(String(ABOVE_2_53));
    w.cancel(String(ABOVE_2_53 + 1n));
    const put2 = await kv.put("wi/a", "2");
    const after = await nextN(w, ids.length);
    expect(after.map((r) => [r.watch_id, r.canceled, r.events.length, Number(r.header.revision)])).toEqual(
      [String(INT64_MIN), "-5", "0", String(2n ** 53n), String(INT64_MAX)].map((id) => [id, false, 1, put2]),
    );
    w.cancel(String(INT64_MIN));
    expect(await w.next()).toMatchObject({ watch_id: String(INT64_MIN), canceled: true });
  });

  it("progress notifications carry the exact id; a progress request is answered with -1", async () => {
    const w = watchClient();
    expect((await w.watch({ key: "wp/a", watch_id: String(INT64_MAX), progress_notify: true })).watch_id).toBe(String(INT64_MAX));
    // --experimental-watch-progress-notify-interval=500ms: an idle synced watcher hears its progress.
    const notify = await w.next(15_000);
    expect(notify).toMatchObject({ watch_id: String(INT64_MAX), created: false, canceled: false, events: [] });
    w.progress();
    // A progress notification of the watcher may come first; the request's answer is -1, not a watcher's id.
    let r = await w.next(15_000);
    while (r.watch_id === String(INT64_MAX) && r.events.length === 0) r = await w.next(15_000);
    expect(r).toMatchObject({ watch_id: "-1", created: false, canceled: false, events: [] });
  });

  it("fragments of a large revision all carry the exact id", async () => {
    const value = Buffer.alloc(100_000, "v");
    for (let i = 0; i < 10; i++) await kv.put(`wf/${i}`, value);
    const w = watchClient();
    expect((await w.watch({ key: "wf/", range_end: prefixEnd("wf/"), prev_kv: true, fragment: true, watch_id: String(ABOVE_2_53) })).watch_id).toBe(
      String(ABOVE_2_53),
    );
    const rev = await kv.del("wf/", true);
    const parts: WatchResp[] = [];
    do parts.push(await w.next(15_000));
    while (parts[parts.length - 1]!.fragment);
    expect(parts.length).toBeGreaterThan(1);
    expect(parts.map((p) => p.watch_id)).toEqual(parts.map(() => String(ABOVE_2_53)));
    expect(parts.flatMap((p) => p.events.map((e) => s(e.kv.key)))).toEqual(Array.from({ length: 10 }, (_, i) => `wf/${i}`));
    for (const p of parts) expect(Number(p.header.revision)).toBe(rev);
  });

  it("the JSON gateway carries a watch id beyond 2^53 as an exact decimal string", async () => {
    const key = Buffer.from("wg/a").toString("base64");
    const w = await openStream(cluster.members[0]!.endpoint, "/v3/watch", [JSON.stringify({ create_request: { key, watch_id: String(ABOVE_2_53) } })]);
    try {
      expect(w.status).toBe(200);
      expect((await w.next(15_000)).result).toMatchObject({ watch_id: String(ABOVE_2_53), created: true });
      await kv.put("wg/a", "x");
      const ev = (await w.next(15_000)).result as { watch_id: string; events: { kv: { key: string } }[] };
      expect(ev.watch_id).toBe(String(ABOVE_2_53));
      expect(ev.events.map((e) => e.kv.key)).toEqual([key]);
    } finally {
      w.close();
    }
  });

  // Last: it compacts the keyspace.
  it("a compaction's cancel carries the exact id, and the dropped watcher's cancel is answered under it", async () => {
    await kv.put("wc/k", "1");
    const compactAt = await kv.put("wc/k", "2");
    await kv.compact(compactAt);
    const w = watchClient();
    const created = await w.watch({ key: "wc/k", start_revision: 1, watch_id: String(INT64_MIN) });
    expect(created).toMatchObject({ watch_id: String(INT64_MIN), canceled: false });
    const dropped = await w.next(15_000);
    expect(dropped).toMatchObject({ watch_id: String(INT64_MIN), canceled: true, compact_revision: String(compactAt), events: [] });
    w.cancel(String(INT64_MIN));
    expect(await w.next()).toMatchObject({ watch_id: String(INT64_MIN), canceled: true, compact_revision: "0" });
  });
});
