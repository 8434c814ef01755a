/**
 * Progress requests and watch id -1, as etcd 3.4 answers them (issue 16).
 *
 * - etcd 3.4's recvLoop answers a WatchProgressRequest at once, on its control channel: a
 *   WatchResponse with a header at the store's current revision and watch_id -1, no other field.
 *   It does not wait for the stream's watchers to catch up (that is 3.5's RequestProgressAll), so
 *   the answer can be ahead of events still on their way to a watcher that started in the past.
 * - etcd 3.4's mvcc takes any watch id but 0 (AutoWatchID) as the client's choice: -1 and the other
 *   negative ids are watchers like any other, under their own id in every response; a refused
 *   create, also answered under -1, leaves a watcher -1 alone.
 *
 * Requests that must reach the server together go out in one HTTP/2 DATA write of a raw client
 * (node:http2, protobufjs on the protos in proto/), so the server reads them in one go; the rest
 * use the plain @grpc/grpc-js client of watch_client.ts. E2E_TARGET=etcd runs the same
 * expectations against real etcd 3.4.
 */
import http2 from "node:http2";
import protobuf from "protobufjs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { grpcFrame } from "../fuzz/h2_raw.js";
import { messageType } from "../fuzz/methods.js";
import { Cluster } from "./harness.js";
import { endWatchSuite, Kvc, prefixEnd, WatchClient, type WatchResp } from "./watch_client.js";
import { ArrivalQueue } from "./arrival_queue.js";

/** One response as it came: its bytes (to see which fields were on the wire) and decoded. */
interface RawResp {
  raw: Buffer;
  r: WatchResp;
}

/** A Watch stream on node:http2: requests written together, responses queued in arrival order. */
class RawWatch {
  private readonly session: http2.ClientHttp2Session;
  private readonly stream: http2.ClientHttp2Stream;
  private readonly queue = new ArrivalQueue<RawResp>();
  private pending = Buffer.alloc(0);

  constructor(endpoint: string) {
    this.session = http2.connect(`http://${endpoint}`);
    this.session.on("error", () => undefined);
    this.stream = this.session.request(
      { ":method": "POST", ":path": "/etcdserverpb.Watch/Watch", "content-type": "application/grpc", te: "trailers" },
      { endStream: false },
    );
    const type = messageType("etcdserverpb.WatchResponse");
    this.stream.on("data", (chunk: Buffer) => {
      this.pending = Buffer.concat([this.pending, chunk]);
      while (this.pending.length >= 5 && this.pending.length >= 5 + this.pending.readUInt32BE(1)) {
        const raw = this.pending.subarray(5, 5 + this.pending.readUInt32BE(1));
        this.pending = this.pending.subarray(5 + raw.length);
        const r = type.toObject(type.decode(raw), { longs: String, enums: String, defaults: true }) as WatchResp;
        this.queue.push({ raw: Buffer.from(raw), r });
      }
    });
    this.stream.on("trailers", (t) => this.queue.end(`status ${String(t["grpc-status"])} ${String(t["grpc-message"] ?? "")}`));
    this.stream.on("error", (e: Error) => this.queue.end(e.message));
    this.stream.on("close", () => this.queue.end("closed"));
  }

  /** Writes `requests` in one DATA write, so the server reads them in one go. */
  send(...requests: object[]): void {
    const type = messageType("etcdserverpb.WatchRequest");
    this.stream.write(Buffer.concat(requests.map((r) => grpcFrame(Buffer.from(type.encode(type.fromObject(r)).finish())))));
  }

  async next(timeoutMs = 15_000): Promise<RawResp> {
    return this.queue.next(timeoutMs);
  }

  close(): void {
    this.session.destroy();
  }
}

/** The field numbers of a message's top-level fields, in wire order. */
function wireFields(raw: Buffer): number[] {
  const reader = protobuf.Reader.create(raw);
  const out: number[] = [];
  while (reader.pos < reader.len) {
    const tag = reader.uint32();
    out.push(tag >>> 3);
    reader.skipType(tag & 7);
  }
  return out;
}

/** Each response as "<watch id>@<its events' revisions>", sorted (one revision's responses to several watchers come in no set order). */
function tags(rs: readonly WatchResp[]): string[] {
  return rs.map((r) => `${r.watch_id}@${r.events.map((e) => e.kv.mod_revision).join(",")}`).sort();
}

let cluster: Cluster;
let kv: Kvc;
const open: WatchClient[] = [];
const raws: RawWatch[] = [];

function rawWatch(): RawWatch {
  const w = new RawWatch(cluster.members[0]!.endpoint);
  raws.push(w);
  return w;
}

function watchClient(): WatchClient {
  const w = new WatchClient(cluster.members[0]!.endpoint);
  open.push(w);
  return w;
}

beforeAll(async () => {
  cluster = await Cluster.create({ size: 1 });
  await cluster.start();
  kv = new Kvc(cluster.members[0]!.endpoint);
});
afterAll(async () => {
  for (const w of raws) w.close();
  await endWatchSuite(open, kv, cluster);
});

describe("a progress request", () => {
  it("is answered with the header at the current revision and watch id -1, no other field", async () => {
    const w = rawWatch();
    w.send({ create_request: { key: Buffer.from("wq/a") } });
    expect((await w.next()).r).toMatchObject({ watch_id: "0", created: true });
    const rev = await kv.put("wq/other", "x");
    const h = await kv.header();
    w.send({ progress_request: {} });
    const p = await w.next();
    expect(p.r).toEqual({
      header: { cluster_id: h.cluster_id, member_id: h.member_id, revision: String(rev), raft_term: h.raft_term },
      watch_id: "-1",
      created: false,
      canceled: false,
      compact_revision: "0",
      cancel_reason: "",
      fragment: false,
      events: [],
    });
    // On the wire: header (1) and watch_id (2) only; every flag left at its default is left out.
    expect(wireFields(p.raw)).toEqual([1, 2]);
    // A stream without watchers gets the same answer.
    const bare = rawWatch();
    bare.send({ progress_request: {} });
    const q = await bare.next();
    expect(wireFields(q.raw)).toEqual([1, 2]);
    expect(q.r).toMatchObject({ watch_id: "-1", header: { revision: String(rev) }, events: [] });
  });

  it("does not wait for a watcher still catching up: it answers at once, ahead of the watcher's events", async () => {
    // More than the 1,000 revisions one catch-up response carries (etcd's watchBatchMaxRevs), so the
    // watcher needs two passes; etcd 3.4 sleeps 100 ms between its sync passes.
    const total = 1_200;
    const first = await kv.put("wc/k", "0");
    for (let i = 1; i < total; i += 20) {
      await Promise.all(Array.from({ length: Math.min(20, total - i) }, (_, j) => kv.put("wc/k", String(i + j))));
    }
    const rev = Number((await kv.header()).revision);
    expect(rev).toBe(first + total - 1);
    const w = rawWatch();
    w.send({ create_request: { key: Buffer.from("wc/k"), start_revision: String(first) } }, { progress_request: {} });
    // The created answer comes first on both (etcd holds a watcher's events until its created answer is out).
    expect((await w.next()).r).toMatchObject({ watch_id: "0", created: true, canceled: false });
    const revs: number[] = [];
    let progress: (RawResp & { eventsBefore: number }) | undefined;
    while (progress === undefined || revs.length < total) {
      const next = await w.next();
      if (next.r.watch_id === "-1") {
        expect(progress, "one answer to one progress request").toBeUndefined();
        progress = { ...next, eventsBefore: revs.length };
        continue;
      }
      expect(next.r).toMatchObject({ watch_id: "0", created: false, canceled: false });
      revs.push(...next.r.events.map((e) => Number(e.kv.mod_revision)));
    }
    expect(revs).toEqual(Array.from({ length: total }, (_, i) => first + i));
    expect(wireFields(progress.raw)).toEqual([1, 2]);
    expect(progress.r).toMatchObject({ watch_id: "-1", created: false, canceled: false, events: [] });
    // The store's revision when the request came, though the watcher had not caught up to it:
    // events at or below that revision still came after the answer.
    expect(Number(progress.r.header.revision)).toBe(rev);
    expect(progress.eventsBefore).toBeLessThan(total);
    expect(revs[progress.eventsBefore]).toBeLessThanOrEqual(rev);
  });
});

describe("watch id -1 and other negative ids", () => {
  it("are the client's ids, as any other but 0: created, events and cancel under them; auto ids still start at 0", async () => {
    const w = watchClient();
    const rev0 = Number((await kv.header()).revision);
    for (const id of ["-1", "-2"]) {
      const created = await w.watch({ key: "wn/a", watch_id: id });
      expect(created).toMatchObject({ watch_id: id, created: true, canceled: false, cancel_reason: "" });
      expect(Number(created.header.revision)).toBe(rev0);
    }
    expect(await w.watch({ key: "wn/", range_end: prefixEnd("wn/") })).toMatchObject({ watch_id: "0", canceled: false });
    // Refused creates are answered under -1 too, and leave the client's watcher -1 alone.
    expect(await w.watch({ key: "wn/b", watch_id: "-1" })).toMatchObject({
      watch_id: "-1",
      created: true,
      canceled: true,
      cancel_reason: "mvcc: duplicate watch ID provided on the WatchStream",
    });
    expect(await w.watch({ key: "wn/b", range_end: "wn/a" })).toMatchObject({ watch_id: "-1", created: true, canceled: true, cancel_reason: "mvcc: watcher range is empty" });

    const put1 = await kv.put("wn/a", "1");
    const got: WatchResp[] = [];
    while (got.length < 3) got.push(await w.next());
    expect(tags(got)).toEqual([`-1@${put1}`, `-2@${put1}`, `0@${put1}`].sort());

    w.cancel("-1");
    expect(await w.next()).toMatchObject({ watch_id: "-1", canceled: true, created: false, events: [] });
    // Watcher -1 is gone: a write to its key reaches -2 and 0 only (the later write, which only 0
    // watches, comes after every response of the earlier revision).
    const put2 = await kv.put("wn/a", "2");
    const put3 = await kv.put("wn/z", "3");
    const after: WatchResp[] = [];
    while (!after.some((r) => r.events.some((e) => Number(e.kv.mod_revision) === put3))) after.push(await w.next());
    expect(tags(after)).toEqual([`-2@${put2}`, `0@${put2}`, `0@${put3}`].sort());
    // The id is free again.
    expect(await w.watch({ key: "wn/a", watch_id: "-1" })).toMatchObject({ watch_id: "-1", canceled: false });
  });
});
