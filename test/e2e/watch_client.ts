/**
 * A minimal @grpc/grpc-js client of etcdserverpb.Watch and KV for e2e tests (protos from proto/,
 * snake_case fields, int64 as strings): one Watch stream whose responses queue in arrival order.
 * Shared by watch.test.ts and watch_ids.test.ts.
 */
import * as grpc from "@grpc/grpc-js";
import { expect } from "vitest";
import { etcdServices } from "./grpc_client.js";
import type { Cluster } from "./harness.js";
import { ArrivalQueue } from "./arrival_queue.js";


export interface Header {
  cluster_id: string;
  member_id: string;
  revision: string;
  raft_term: string;
}
export interface Kv {
  key: Buffer;
  value: Buffer;
  create_revision: string;
  mod_revision: string;
  version: string;
}
export interface Ev {
  type: "PUT" | "DELETE";
  kv: Kv;
  prev_kv: Kv | null;
}
export interface WatchResp {
  header: Header;
  watch_id: string;
  created: boolean;
  canceled: boolean;
  compact_revision: string;
  cancel_reason: string;
  fragment: boolean;
  events: Ev[];
}
export type Unary = (req: object, md: grpc.Metadata, opts: grpc.CallOptions, cb: (e: grpc.ServiceError | null, r: never) => void) => void;

export const pkg = etcdServices();

/** Member flags of the watch suites (watch.test.ts, watch_ids.test.ts). */
export const WATCH_SUITE_FLAGS = [
  // Small enough that a delete of a few large keys with prev_kv fragments (limit + 512 KiB overhead).
  "--max-request-bytes=200000",
  // Idle watchers with progress_notify hear their progress within a test's patience.
  "--experimental-watch-progress-notify-interval=500ms",
];

export const CLIENT_OPTS = { "grpc.max_receive_message_length": 64 * 1024 * 1024 };

export function unary<T>(client: grpc.Client, method: string, req: object, md = new grpc.Metadata()): Promise<T> {
  const fn = (client as unknown as Record<string, Unary>)[method]!.bind(client);
  return new Promise((resolve, reject) =>
    fn(req, md, { deadline: Date.now() + 10_000 }, (e, r) => (e ? reject(e) : resolve(r as T))),
  );
}

export class Kvc {
  readonly c: grpc.Client;
  constructor(endpoint: string) {
    this.c = new pkg.etcdserverpb.KV!(endpoint, grpc.credentials.createInsecure(), CLIENT_OPTS);
  }
  async put(key: string, value: string | Buffer): Promise<number> {
    const r = await unary<{ header: Header }>(this.c, "Put", { key: Buffer.from(key), value: Buffer.from(value) });
    return Number(r.header.revision);
  }
  async del(key: string, prefix = false): Promise<number> {
    const range_end = prefix ? prefixEnd(key) : Buffer.alloc(0);
    const r = await unary<{ header: Header }>(this.c, "DeleteRange", { key: Buffer.from(key), range_end });
    return Number(r.header.revision);
  }
  async header(): Promise<Header> {
    return (await unary<{ header: Header }>(this.c, "Range", { key: Buffer.from("\0") })).header;
  }
  async compact(revision: number): Promise<void> {
    await unary(this.c, "Compact", { revision, physical: true });
  }
}

export function prefixEnd(p: string): Buffer {
  const b = Buffer.from(p);
  b[b.length - 1]! += 1;
  return b;
}

/** One Watch stream: requests out, every response queued in arrival order. */
export class WatchClient {
  readonly client: grpc.Client;
  readonly call: grpc.ClientDuplexStream<object, WatchResp>;
  private readonly queue = new ArrivalQueue<WatchResp>();
  /** The stream's final status (error) once it ended. */
  ended: grpc.ServiceError | "ok" | undefined;

  constructor(endpoint: string, md = new grpc.Metadata()) {
    this.client = new pkg.etcdserverpb.Watch!(endpoint, grpc.credentials.createInsecure(), CLIENT_OPTS);
    const fn = (this.client as unknown as Record<string, (md: grpc.Metadata) => grpc.ClientDuplexStream<object, WatchResp>>).Watch!;
    this.call = fn.call(this.client, md);
    this.call.on("data", (r: WatchResp) => this.queue.push(r));
    this.call.on("error", (e: grpc.ServiceError) => {
      this.ended = e;
      this.queue.end(e.message);
    });
    this.call.on("end", () => {
      this.ended ??= "ok";
      this.queue.end("OK");
    });
  }

  create(req: Record<string, unknown>): void {
    const r: Record<string, unknown> = { ...req };
    if (typeof r.key === "string") r.key = Buffer.from(r.key);
    if (typeof r.range_end === "string") r.range_end = Buffer.from(r.range_end);
    this.call.write({ create_request: r });
  }
  cancel(watchId: number | string): void {
    this.call.write({ cancel_request: { watch_id: watchId } });
  }
  progress(): void {
    this.call.write({ progress_request: {} });
  }

  /** The next response (in arrival order). */
  async next(timeoutMs = 10_000): Promise<WatchResp> {
    return this.queue.next(timeoutMs);
  }

  /** Creates a watcher and returns its created response. */
  async watch(req: Record<string, unknown>): Promise<WatchResp> {
    this.create(req);
    const r = await this.next();
    expect(r.created).toBe(true);
    return r;
  }

  /** Responses until they carry at least `n` events in total for `watchId` (events flattened). */
  async events(watchId: string, n: number, timeoutMs = 15_000): Promise<Ev[]> {
    return (await this.eventResponses(watchId, n, timeoutMs)).flatMap((r) => r.events);
  }

  async eventResponses(watchId: string, n: number, timeoutMs = 15_000): Promise<WatchResp[]> {
    const out: WatchResp[] = [];
    let count = 0;
    while (count < n) {
      const r = await this.next(timeoutMs);
      expect(r.watch_id).toBe(watchId);
      out.push(r);
      count += r.events.length;
    }
    return out;
  }

  close(): void {
    this.call.cancel();
    this.client.close();
  }
}

export const s = (b: Buffer | undefined | null) => (b ?? Buffer.alloc(0)).toString();

/** A watch suite's afterAll: its streams, its KV client, then its cluster (each may be unset if beforeAll failed). */
export async function endWatchSuite(open: readonly WatchClient[], kv: Kvc | undefined, cluster: Cluster | undefined): Promise<void> {
  for (const w of open) w.close();
  kv?.c.close();
  await cluster?.destroy();
}
