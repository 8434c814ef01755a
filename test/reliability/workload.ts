/**
 * A seeded workload for chaos runs: concurrent clients doing put / get / delete / compare-and-set
 * on a few keys (values unique, so every read names the write it saw), every operation recorded
 * for the linearizability checker; and watchers on the key prefix, every response recorded for
 * the watch checks, resuming on another member when their stream breaks.
 *
 * Two TEST-ONLY switches prove the checks have teeth, from the client side so they work against
 * any server: `staleReadRate` answers some reads from the client's cache of an earlier read, and
 * `serializableGets` sends reads as serializable Ranges — served from the member's local state
 * without ReadIndex, the bug class of "serve linearizable reads locally". Never in the server.
 */
import { definitelyNotSent, EtcdConnection, toWatchEvent, type ClientTls, type PbWatchResponse } from "./etcd_client.js";
import { rng, type Rng } from "./gen.js";
import { HistoryRecorder, type History, type KvOp, type KvResult, type ObservedKv } from "./history.js";
import { prefixRangeEnd, WatchStreamRecorder, type WatchStream } from "./watch_history.js";
import { performance } from "node:perf_hooks";

export interface WorkloadOptions {
  endpoints: string[];
  /** The client certificate for members serving TLS with --client-cert-auth. */
  clientTls?: ClientTls;
  seed: number;
  clients?: number;
  keys?: number;
  keyPrefix?: string;
  opTimeoutMs?: number;
  /** Pause between one client's operations (keeps two shared cores usable). */
  thinkMs?: number;
  watchers?: number;
  /** Hard bound on recorded operations. */
  maxOps?: number;
  /** TEST-ONLY injected client bug: the fraction of gets served from the client's own cache. */
  staleReadRate?: number;
  /** TEST-ONLY injected bug: gets are serializable (served locally, without ReadIndex). */
  serializableGets?: boolean;
  /** Watchers send WatchProgressRequest every 500 ms (default true). */
  progressRequests?: boolean;
}

export type Outcome = "ok" | "fail" | "unknown";

export interface WorkloadStats {
  byKind: Record<KvOp["kind"], Record<Outcome, number>>;
  staleReadsInjected: number;
  watchReconnects: number;
  watchRestartsDeliberate: number;
}

function emptyCounts(): Record<Outcome, number> {
  return { ok: 0, fail: 0, unknown: 0 };
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

class Client {
  private n = 0;
  private endpoint: number;
  /** Last thing this client saw per key (to make CAS hit as often as miss). */
  private readonly seen = new Map<string, ObservedKv | null>();
  /** The injected bug's cache: last get result per key. */
  private readonly cache = new Map<string, KvResult>();

  constructor(
    readonly id: number,
    private readonly w: Workload,
    private readonly r: Rng,
  ) {
    this.endpoint = id % w.connections.length;
  }

  private nextOp(): KvOp {
    const key = `${this.w.keyPrefix}k${Math.floor(this.r() * this.w.keyCount)}`;
    const value = `c${this.id}-${this.n++}`;
    const roll = this.r();
    const seen = this.seen.get(key) ?? null;
    if (roll < 0.4) return { kind: "get", key };
    if (roll < 0.65) return { kind: "put", key, value };
    if (roll < 0.73) return { kind: "delete", key };
    if (roll < 0.87) return { kind: "cas", key, compare: { target: "value", value: seen?.value ?? "absent" }, value };
    return { kind: "cas", key, compare: { target: "mod", modRevision: seen?.modRevision ?? 0 }, value };
  }

  async run(): Promise<void> {
    while (!this.w.stopping) {
      const op = this.nextOp();
      await this.once(op);
      await sleep(this.w.thinkMs);
    }
  }

  /** Runs one recorded operation. */
  async once(op: KvOp): Promise<Outcome> {
    const rec = this.w.recorder;
    const counts = this.w.stats.byKind[op.kind];
    const p = rec.invoke(this.id, op);
    const cached = this.cache.get(op.key);
    if (op.kind === "get" && cached !== undefined && this.r() < this.w.staleReadRate) {
      // The injected bug: answer locally from an earlier read.
      await sleep(1);
      rec.ok(p, cached);
      this.w.stats.staleReadsInjected++;
      counts.ok++;
      return "ok";
    }
    const conn = this.w.connections[this.endpoint]!;
    try {
      const res = await conn.execute(op, this.w.opTimeoutMs, this.w.serializableGets);
      rec.ok(p, res);
      counts.ok++;
      this.learn(op, res);
      return "ok";
    } catch (err) {
      this.endpoint = (this.endpoint + 1) % this.w.connections.length;
      if (op.kind === "get" || definitelyNotSent(err)) {
        rec.fail(p);
        counts.fail++;
        return "fail";
      }
      rec.unknown(p);
      counts.unknown++;
      return "unknown";
    }
  }

  private learn(op: KvOp, res: KvResult): void {
    switch (res.kind) {
      case "get":
        this.seen.set(op.key, res.kv);
        this.cache.set(op.key, res);
        return;
      case "put":
        this.seen.set(op.key, { value: (op as { value: string }).value, modRevision: res.revision });
        return;
      case "delete":
        this.seen.set(op.key, null);
        return;
      case "cas":
        this.seen.set(op.key, res.succeeded ? { value: (op as { value: string }).value, modRevision: res.revision } : (res.kv ?? null));
    }
  }
}

class Watcher {
  readonly recorder: WatchStreamRecorder;
  private endpoint: number;
  private stream: ReturnType<EtcdConnection["openWatch"]> | undefined;
  private progressTimer: NodeJS.Timeout | undefined;
  /** Highest revision this watcher is known to have covered (events or progress). */
  covered = 0;
  /** Set when the server canceled the watch because its revision was compacted. */
  compacted = 0;

  constructor(
    readonly id: number,
    private readonly w: Workload,
    private readonly r: Rng,
  ) {
    this.endpoint = (id + 1) % w.connections.length;
    this.recorder = new WatchStreamRecorder(id, { key: w.keyPrefix, rangeEnd: prefixRangeEnd(w.keyPrefix) }, id % 2 === 0);
  }

  async run(): Promise<void> {
    while (!this.w.closed) {
      await this.segment();
      if (this.w.closed || this.compacted > 0) break;
      this.w.stats.watchReconnects++;
      this.endpoint = (this.endpoint + 1) % this.w.connections.length;
      await sleep(100);
    }
  }

  /** One watch stream, until it breaks, is canceled, or is deliberately restarted. */
  private segment(): Promise<void> {
    return new Promise<void>((resolve) => {
      const start = this.recorder.open(1);
      const stream = this.w.connections[this.endpoint]!.openWatch(true);
      this.stream = stream;
      let done = false;
      const finish = () => {
        if (done) return;
        done = true;
        clearInterval(this.progressTimer);
        clearTimeout(restart);
        stream.removeAllListeners("data");
        stream.on("error", () => undefined);
        stream.cancel();
        resolve();
      };
      // Deliberate restarts now and then: resuming from a revision is part of what is checked.
      const restart = setTimeout(() => {
        this.w.stats.watchRestartsDeliberate++;
        finish();
      }, 3_000 + this.r() * 7_000);
      stream.on("data", (res: PbWatchResponse) => this.onResponse(res, finish));
      stream.on("error", finish);
      stream.on("end", finish);
      stream.write({ create_request: { key: Buffer.from(this.w.keyPrefix), range_end: Buffer.from(prefixRangeEnd(this.w.keyPrefix), "latin1"), start_revision: String(start), prev_kv: this.recorder.stream.prevKv, progress_notify: true } });
      if (this.w.progressRequests) this.progressTimer = setInterval(() => stream.write({ progress_request: {} }), 500);
    });
  }

  private onResponse(res: PbWatchResponse, finish: () => void): void {
    const rev = Number(res.header?.revision ?? 0);
    if (res.created) {
      this.recorder.created(rev);
      return;
    }
    if (res.canceled) {
      // Canceled for compaction: resuming below the compacted revision can never succeed.
      if (Number(res.compact_revision) > 0) this.compacted = Number(res.compact_revision);
      finish();
      return;
    }
    const events = res.events.map((e) => toWatchEvent(e, this.recorder.stream.prevKv));
    this.recorder.response({ time: performance.now(), headerRevision: rev, events, progressNotify: events.length === 0 });
    this.covered = Math.max(this.covered, events.length === 0 ? rev : Math.max(...events.map((e) => e.kv.modRevision)));
  }

  stop(): void {
    clearInterval(this.progressTimer);
    this.stream?.cancel();
  }
}

export class Workload {
  readonly connections: EtcdConnection[];
  readonly recorder: HistoryRecorder;
  readonly keyPrefix: string;
  readonly keyCount: number;
  readonly opTimeoutMs: number;
  readonly thinkMs: number;
  readonly staleReadRate: number;
  readonly progressRequests: boolean;
  readonly serializableGets: boolean;
  readonly stats: WorkloadStats = {
    byKind: { put: emptyCounts(), get: emptyCounts(), delete: emptyCounts(), cas: emptyCounts() },
    staleReadsInjected: 0,
    watchReconnects: 0,
    watchRestartsDeliberate: 0,
  };
  stopping = false;
  closed = false;
  private readonly clients: Client[];
  private readonly watchers: Watcher[];
  private running: Promise<void>[] = [];
  private watching: Promise<void>[] = [];

  constructor(opts: WorkloadOptions) {
    this.connections = opts.endpoints.map((e) => new EtcdConnection(e, opts.clientTls));
    this.recorder = new HistoryRecorder({ maxOps: opts.maxOps ?? 500_000 });
    this.keyPrefix = opts.keyPrefix ?? "chaos/";
    this.keyCount = opts.keys ?? 6;
    this.opTimeoutMs = opts.opTimeoutMs ?? 3_000;
    this.thinkMs = opts.thinkMs ?? 5;
    this.staleReadRate = opts.staleReadRate ?? 0;
    this.progressRequests = opts.progressRequests ?? true;
    this.serializableGets = opts.serializableGets ?? false;
    const r = rng(opts.seed);
    this.clients = Array.from({ length: opts.clients ?? 6 }, (_, i) => new Client(i, this, rng(Math.floor(r() * 2 ** 31))));
    this.watchers = Array.from({ length: opts.watchers ?? 2 }, (_, i) => new Watcher(i, this, rng(Math.floor(r() * 2 ** 31))));
  }

  start(): void {
    this.watching = this.watchers.map((w) => w.run());
    this.running = this.clients.map((c) => c.run());
  }

  /** Stops issuing operations and waits for those in flight. */
  async stopClients(): Promise<void> {
    this.stopping = true;
    await Promise.all(this.running);
  }

  /** Final linearizable reads of every key from every endpoint (recorded: they join the history). */
  async finalReads(): Promise<void> {
    const reader = new Client(1000, this, rng(1));
    for (let k = 0; k < this.keyCount; k++) {
      for (let attempt = 0; attempt < 10; attempt++) {
        if ((await reader.once({ kind: "get", key: `${this.keyPrefix}k${k}` })) === "ok") break;
        await sleep(200);
      }
    }
  }

  /** Waits until every watcher has covered `revision` (or the deadline passes); returns laggards. */
  async drainWatchers(revision: number, timeoutMs: number): Promise<number[]> {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      if (this.watchers.every((w) => w.covered >= revision)) return [];
      await sleep(100);
    }
    return this.watchers.filter((w) => w.covered < revision).map((w) => w.id);
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const w of this.watchers) w.stop();
    await Promise.all(this.watching);
    for (const c of this.connections) c.close();
  }

  /** The lowest revision every watcher has covered (compaction below it is safe for them). */
  minWatcherCovered(): number {
    return Math.min(...this.watchers.map((w) => w.covered));
  }

  history(): History {
    return this.recorder.history();
  }

  /** Watchers stopped by a compaction of the revision they needed (must stay empty). */
  compactedWatchers(): number[] {
    return this.watchers.filter((w) => w.compacted > 0).map((w) => w.id);
  }

  watchStreams(): WatchStream[] {
    return this.watchers.map((w) => w.recorder.stream);
  }
}
