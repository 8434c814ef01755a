/**
 * One gRPC Watch stream carrying many watchers: create requests are answered in order (etcd
 * guarantees it), so pending creations wait in a FIFO; events are routed to their watcher by
 * watch id. Used by the watch commands and by the watch memory benchmark.
 */
import type { ClientDuplexStream } from "@grpc/grpc-js";
import type { Conn } from "./conn.js";
import { type Fields, METHODS, decode, encode, list, num } from "./proto.js";

export interface WatchEvent {
  key: Buffer;
  value: Buffer;
  modRevision: number;
}

export type EventHandler = (events: WatchEvent[], receivedMs: number) => void;

export interface CreateOptions {
  rangeEnd?: Buffer;
  startRevision?: number;
}

/** Most create requests in flight on one stream before `create` waits (a bound on the FIFO). */
const PENDING_CREATES_MAX = 1024;

export class WatchStream {
  private readonly stream: ClientDuplexStream<Buffer, Buffer>;
  private readonly pending: Array<{ res: (id: number) => void; rej: (e: Error) => void; onEvents: EventHandler }> = [];
  private readonly handlers = new Map<number, EventHandler>();
  private failure: Error | undefined;
  private readonly windowWaiters: Array<() => void> = [];

  constructor(conn: Conn) {
    this.stream = conn.bidi(METHODS.watch);
    this.stream.on("data", (buf: Buffer) => this.onResponse(decode("WatchResponse", buf)));
    this.stream.on("error", (e: Error) => this.fail(e));
    this.stream.on("end", () => this.fail(new Error("watch stream ended")));
  }

  get watcherCount(): number {
    return this.handlers.size;
  }

  /** Creates a watcher; resolves with its id once the server confirms it. */
  async create(key: Buffer, onEvents: EventHandler, opts: CreateOptions = {}): Promise<number> {
    while (this.pending.length >= PENDING_CREATES_MAX) await new Promise<void>((r) => this.windowWaiters.push(r));
    if (this.failure !== undefined) throw this.failure;
    const p = new Promise<number>((res, rej) => this.pending.push({ res, rej, onEvents }));
    const create: Fields = { key };
    if (opts.rangeEnd !== undefined) create.range_end = opts.rangeEnd;
    if (opts.startRevision !== undefined) create.start_revision = opts.startRevision;
    this.stream.write(encode("WatchRequest", { create_request: create }));
    return p;
  }

  close(): void {
    this.stream.cancel();
  }

  private onResponse(resp: Fields): void {
    const receivedMs = performance.now();
    const id = num(resp, "watch_id");
    if (resp.created === true) {
      const p = this.pending.shift();
      if (p === undefined) return this.fail(new Error("watch: created response without a pending create"));
      this.windowWaiters.shift()?.();
      if (resp.canceled === true) return p.rej(new Error(`watch create canceled: ${String(resp.cancel_reason)}`));
      this.handlers.set(id, p.onEvents);
      p.res(id);
    }
    const events = list(resp, "events");
    if (events.length === 0) return;
    const handler = this.handlers.get(id);
    if (handler === undefined) return;
    handler(
      events.map((e) => {
        const kv = (e.kv ?? {}) as Fields;
        return { key: kv.key as Buffer, value: kv.value as Buffer, modRevision: num(kv, "mod_revision") };
      }),
      receivedMs,
    );
  }

  private fail(e: Error): void {
    if (this.failure !== undefined) return;
    this.failure = e;
    for (const p of this.pending.splice(0)) p.rej(e);
    for (const w of this.windowWaiters.splice(0)) w();
  }
}
