/**
 * The watch commands (watch, watch-latency, watch-get). They measure the server's fan-out of
 * events, not request throughput, so they run on the main thread: one process holds every
 * stream, and event latency is measured on one clock (put issued -> event received).
 */
import { randomBytes, randomInt } from "node:crypto";
import type { CommandFlags, GlobalOptions } from "./flags.js";
import { Conn, errorText } from "./conn.js";
import { Progress } from "./progress.js";
import { METHODS, decode, encode, encodePut, num, sub, varintKey } from "./proto.js";
import { computeStats } from "./report.js";
import type { SeriesResult } from "./runner.js";
import { type WatchEvent, WatchStream } from "./watch-stream.js";

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Latencies of one phase, with its wall time and errors. */
class Phase {
  readonly lat: number[] = [];
  readonly errors: Record<string, number> = {};
  private readonly t0 = performance.now();
  constructor(
    readonly name: string,
    total: number,
    showProgress: boolean,
  ) {
    this.progress = new Progress(total, showProgress);
    this.progress.start();
  }
  private readonly progress: Progress;
  ok(sec: number): void {
    this.lat.push(sec);
    this.progress.update(this.lat.length);
  }
  err(e: unknown): void {
    const m = errorText(e);
    this.errors[m] = (this.errors[m] ?? 0) + 1;
  }
  finish(): SeriesResult {
    this.progress.finish(this.lat.length);
    return { name: this.name, stats: computeStats(Float64Array.from(this.lat), (performance.now() - this.t0) / 1000, this.errors) };
  }
}

async function openConns(global: GlobalOptions, endpoints: string[], n: number): Promise<Conn[]> {
  const conns = Array.from({ length: n }, () => new Conn(endpoints, global.transport));
  await Promise.all(conns.map((c) => c.waitReady(global.dialTimeoutMs)));
  return conns;
}

/** Runs `count` tasks from `n` concurrent loops, optionally limited to `ratePerSec`. */
async function pool(count: number, n: number, ratePerSec: number, task: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  let slot = performance.now();
  const interval = ratePerSec > 0 ? 1000 / ratePerSec : 0;
  await Promise.all(
    Array.from({ length: Math.max(1, n) }, async () => {
      for (;;) {
        const i = next++;
        if (i >= count) return;
        if (interval > 0) {
          const now = performance.now();
          slot = Math.max(slot + interval, now);
          if (slot > now) await sleep(slot - now);
        }
        await task(i);
      }
    }),
  );
}

const put = (conn: Conn, key: Buffer, value: Buffer) => conn.unary(METHODS.put, encodePut(key, value));

/** watch: create streams × watch-per-stream watchers, then put and count the events delivered. */
async function watchBench(global: GlobalOptions, endpoints: string[], f: CommandFlags): Promise<SeriesResult[]> {
  const streamsN = f.streams as number;
  const perStream = f["watch-per-stream"] as number;
  const keySize = f["key-size"] as number;
  const space = f["key-space-size"] as number;
  const watched = Array.from({ length: f["watched-key-total"] as number }, (_, i) =>
    varintKey((f["sequential-keys"] as boolean) ? i % space : randomInt(0, space), keySize),
  );
  const conns = await openConns(global, endpoints, Math.min(global.conns, global.clients));
  const streams = Array.from({ length: streamsN }, (_, i) => new WatchStream(conns[i % conns.length] as Conn));
  const numWatchers = new Map<string, number>();
  const delivery: { phase?: Phase } = {};
  let eventsLeft = 0;
  let allEvents: () => void = () => {};
  const eventsDone = new Promise<void>((r) => (allEvents = r));
  // The put's value carries its send time: latency = event received - put issued.
  const onEvents = (events: WatchEvent[], receivedMs: number) => {
    for (const e of events) {
      delivery.phase?.ok((receivedMs - Number(e.value.toString())) / 1000);
      if (--eventsLeft === 0) allEvents();
    }
  };

  const creation = new Phase("watch-creation", streamsN * perStream, global.progress);
  await Promise.all(
    streams.map(async (s, si) => {
      for (let j = 0; j < perStream; j++) {
        const key = watched[(si * perStream + j) % watched.length] as Buffer;
        numWatchers.set(key.toString("hex"), (numWatchers.get(key.toString("hex")) ?? 0) + 1);
        const t0 = performance.now();
        try {
          await s.create(key, onEvents);
          creation.ok((performance.now() - t0) / 1000);
        } catch (e) {
          creation.err(e);
        }
      }
    }),
  );
  const created = creation.finish();

  const putTotal = f["put-total"] as number;
  for (let i = 0; i < putTotal; i++) eventsLeft += numWatchers.get((watched[i % watched.length] as Buffer).toString("hex")) ?? 0;
  const phase = new Phase("watch-events", eventsLeft, global.progress);
  delivery.phase = phase;
  await pool(putTotal, global.clients, f["put-rate"] as number, async (i) => {
    try {
      await put(conns[i % conns.length] as Conn, watched[i % watched.length] as Buffer, Buffer.from(String(performance.now())));
    } catch (e) {
      phase.err(e);
    }
  });
  if (eventsLeft > 0) await Promise.race([eventsDone, sleep(30_000)]);
  const received = phase.finish();
  for (const s of streams) s.close();
  for (const c of conns) c.close();
  return [created, received];
}

/** watch-latency: many watchers on one key; each put's latency to every watcher. */
async function watchLatencyBench(global: GlobalOptions, endpoints: string[], f: CommandFlags): Promise<SeriesResult[]> {
  const key = randomBytes(f["key-size"] as number);
  const value = randomBytes(f["val-size"] as number);
  const conns = await openConns(global, endpoints, Math.min(global.conns, global.clients));
  const putConn = (await openConns(global, endpoints, 1))[0] as Conn;
  const streams = Array.from({ length: f.streams as number }, (_, i) => new WatchStream(conns[i % conns.length] as Conn));
  const perStream = f["watchers-per-stream"] as number;
  const watchers = streams.length * perStream;
  let t0 = 0;
  let waiting = 0;
  let release: () => void = () => {};
  const putTotal = f["put-total"] as number;
  const phase = new Phase("watch-latency", putTotal * watchers, global.progress);
  const onEvents = (events: WatchEvent[], receivedMs: number) => {
    for (let i = 0; i < events.length; i++) {
      phase.ok((receivedMs - t0) / 1000);
      if (--waiting === 0) release();
    }
  };
  await Promise.all(streams.map(async (s) => { for (let j = 0; j < perStream; j++) await s.create(key, onEvents); }));
  const rate = f["put-rate"] as number;
  await pool(putTotal, 1, rate, async () => {
    const all = new Promise<void>((r) => (release = r));
    waiting = watchers;
    t0 = performance.now();
    try {
      await put(putConn, key, value);
      await Promise.race([all, sleep(10_000)]);
    } catch (e) {
      phase.err(e);
    }
  });
  const out = phase.finish();
  for (const s of streams) s.close();
  for (const c of [...conns, putConn]) c.close();
  return [out];
}

/** watch-get: serializable gets while many unsynced watchers catch up from an old revision. */
async function watchGetBench(global: GlobalOptions, endpoints: string[], f: CommandFlags): Promise<SeriesResult[]> {
  const conns = await openConns(global, endpoints, Math.min(global.conns, global.clients));
  const getConn = (await openConns(global, endpoints, 1))[0] as Conn;
  const eventsPer = f.events as number;
  const watchersN = f.watchers as number;
  let watchRev = 0;
  for (let i = 0; i < eventsPer; i++) {
    const resp = decode("PutResponse", await put(conns[0] as Conn, Buffer.from("watchkey"), Buffer.from(String(i))));
    if (i === 0) watchRev = num(sub(resp, "header"), "revision");
  }
  const streams = Array.from({ length: f.streams as number }, (_, i) => new WatchStream(conns[i % conns.length] as Conn));
  const progress = new Progress(watchersN * eventsPer, global.progress);
  progress.start();
  let received = 0;
  let left = watchersN * eventsPer;
  let release: () => void = () => {};
  const allIn = new Promise<void>((r) => (release = r));
  const onEvents = (events: WatchEvent[]) => {
    received += events.length;
    progress.update(received);
    left -= events.length;
    if (left <= 0) release();
  };
  const gets = new Phase("watch-get", 0, false);
  let stop = false;
  const getReq = encode("RangeRequest", { key: Buffer.from("abc"), serializable: true });
  const getter = (async () => {
    while (!stop) {
      const t0 = performance.now();
      try {
        await getConn.unary(METHODS.range, getReq);
        gets.ok((performance.now() - t0) / 1000);
      } catch (e) {
        gets.err(e);
      }
    }
  })();
  await Promise.all(
    streams.map(async (s, si) => {
      for (let w = si; w < watchersN; w += streams.length) await s.create(Buffer.from("watchkey"), onEvents, { startRevision: watchRev });
    }),
  );
  await Promise.race([allIn, sleep(60_000)]);
  stop = true;
  await getter;
  progress.finish(received);
  for (const s of streams) s.close();
  for (const c of [...conns, getConn]) c.close();
  return [gets.finish()];
}

export async function runWatchCommand(global: GlobalOptions, endpoints: string[], command: string, flags: CommandFlags): Promise<SeriesResult[]> {
  switch (command) {
    case "watch":
      return watchBench(global, endpoints, flags);
    case "watch-latency":
      return watchLatencyBench(global, endpoints, flags);
    case "watch-get":
      return watchGetBench(global, endpoints, flags);
    default:
      throw new Error(`unknown command ${command}`);
  }
}
