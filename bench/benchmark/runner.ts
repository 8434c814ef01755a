/**
 * Main-thread side of the request-per-iteration commands: splits connections and clients over
 * worker threads, starts them together, draws the progress bar from a shared counter and merges
 * the latencies into one report per series.
 */
import { Worker } from "node:worker_threads";
import type { GlobalOptions } from "./flags.js";
import { concatLatencies } from "./latencies.js";
import { type UnaryPlan, rateOf, seriesOf, totalOf } from "./ops.js";
import { Progress } from "./progress.js";
import { type Stats, computeStats } from "./report.js";
import { SHARED_SLOTS, SLOT_DONE, SLOT_GO, type WorkerInput, type WorkerMessage } from "./worker-protocol.js";

export interface SeriesResult {
  name: string;
  stats: Stats;
}

export interface Assignment {
  /** Endpoint lists of the worker's connections. */
  conns: string[][];
  /** Local connection index of each of the worker's clients. */
  clientConn: number[];
}

/**
 * etcd's layout — client c uses connection c mod conns — cut by connection: connection j goes
 * to worker j mod workers, with its clients. A connection never spans threads, so at most
 * `conns` workers get work; empty workers are dropped.
 */
export function assignWork(conns: number, clients: number, workers: number, endpoints: string[]): Assignment[] {
  const out: Assignment[] = Array.from({ length: Math.max(1, Math.min(workers, conns)) }, () => ({ conns: [], clientConn: [] }));
  const local: number[] = [];
  for (let j = 0; j < conns; j++) {
    const w = out[j % out.length] as Assignment;
    local.push(w.conns.length);
    w.conns.push([...endpoints]);
  }
  for (let c = 0; c < clients; c++) {
    const j = c % conns;
    (out[j % out.length] as Assignment).clientConn.push(local[j] as number);
  }
  return out.filter((a) => a.clientConn.length > 0);
}

/** The worker module: compiled .js beside us, or the .ts source loaded through tsx. */
function spawnWorker(input: WorkerInput): Worker {
  const url = new URL("./worker" + (import.meta.url.endsWith(".ts") ? ".ts" : ".js"), import.meta.url);
  if (!url.pathname.endsWith(".ts")) return new Worker(url, { workerData: input });
  const tsxApi = import.meta.resolve("tsx/esm/api");
  const boot = `import(${JSON.stringify(tsxApi)}).then(({ register }) => { register(); return import(${JSON.stringify(url.href)}); })`;
  return new Worker(boot, { eval: true, workerData: input });
}

export async function runUnary(global: GlobalOptions, endpoints: string[], plan: UnaryPlan): Promise<SeriesResult[]> {
  const total = totalOf(plan);
  const shared = new SharedArrayBuffer(SHARED_SLOTS * Int32Array.BYTES_PER_ELEMENT);
  const counters = new Int32Array(shared);
  const assignments = assignWork(global.conns, global.clients, global.workers, endpoints);
  const rate = rateOf(plan);
  const workers = assignments.map((a, w) =>
    spawnWorker({
      plan,
      total,
      conns: a.conns,
      clientConn: a.clientConn,
      ratePerSec: rate / assignments.length,
      dialTimeoutMs: global.dialTimeoutMs,
      transport: global.transport,
      shared,
      compactor: w === 0,
    }),
  );
  const messages = workers.map((w) => messageQueue(w));
  const progress = new Progress(total, global.progress);
  try {
    for (const next of messages) {
      const m = await next();
      if (m.type === "failed") throw new Error(m.message);
      if (m.type !== "ready") throw new Error(`worker: unexpected ${m.type}`);
    }
    progress.start();
    Atomics.store(counters, SLOT_GO, 1);
    Atomics.notify(counters, SLOT_GO);
    const timer = setInterval(() => progress.update(Atomics.load(counters, SLOT_DONE)), 100);
    const done = await Promise.all(messages.map((next) => next()));
    clearInterval(timer);
    progress.finish(Atomics.load(counters, SLOT_DONE));

    const names = seriesOf(plan.command);
    let startMs = Infinity;
    let endMs = -Infinity;
    const errors: Record<string, number> = {};
    const parts: Float64Array[][] = names.map(() => []);
    for (const m of done) {
      if (m.type === "failed") throw new Error(m.message);
      if (m.type !== "done") throw new Error(`worker: unexpected ${m.type}`);
      startMs = Math.min(startMs, m.startMs);
      endMs = Math.max(endMs, m.endMs);
      m.latencies.forEach((l, s) => parts[s]?.push(l));
      for (const [k, v] of Object.entries(m.errors)) errors[k] = (errors[k] ?? 0) + v;
    }
    const totalSec = (endMs - startMs) / 1000;
    // Errors are reported once, with the first series (txn-mixed's errors are not split by kind).
    return names.map((name, s) => ({ name, stats: computeStats(concatLatencies(parts[s] ?? []), totalSec, s === 0 ? errors : {}) }));
  } finally {
    progress.stop();
    await Promise.all(workers.map((w) => w.terminate()));
  }
}

/** Turns a worker's message events into an awaitable queue; a crash becomes a "failed" message. */
function messageQueue(w: Worker): () => Promise<WorkerMessage> {
  const queued: WorkerMessage[] = [];
  const waiting: Array<(m: WorkerMessage) => void> = [];
  const deliver = (m: WorkerMessage) => {
    const r = waiting.shift();
    if (r) r(m);
    else queued.push(m);
  };
  w.on("message", (m: WorkerMessage) => deliver(m));
  w.on("error", (e) => deliver({ type: "failed", message: e instanceof Error ? (e.stack ?? e.message) : String(e) }));
  w.on("exit", (code) => deliver({ type: "failed", message: `worker exited with code ${code}` }));
  return () => {
    const m = queued.shift();
    return m !== undefined ? Promise.resolve(m) : new Promise((r) => waiting.push(r));
  };
}
