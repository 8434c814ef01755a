/**
 * A gRPC load driver: many concurrent clients, each issuing one unary request at
 * a time, spread over a number of connections and over worker_threads, all
 * clients on @grpc/grpc-js. It is the seed of etcd's `benchmark` CLI
 * (--clients, --conns): the request is given pre-encoded, so the driver spends
 * its CPU on the transport, not on building messages.
 *
 * Phases are driven from here so every worker measures the same window:
 * warm up → measure (counters reset) → stop (counts and latencies reported).
 */

import { fileURLToPath } from "node:url";
import { Worker } from "node:worker_threads";
import { LatencyHistogram } from "./histogram.js";

export interface LoadOptions {
  /** "host:port" of the server. */
  target: string;
  /** gRPC method path, e.g. "/etcdserverpb.KV/Range". */
  path: string;
  /** The encoded request message (without the gRPC prefix). */
  request: Uint8Array;
  /** Concurrent clients (each has one request in flight). */
  clients: number;
  /** gRPC connections the clients are spread over. */
  connections: number;
  /** worker_threads running the clients. */
  workers: number;
  /** "grpc-js" (default): @grpc/grpc-js clients; "h2": bare node:http2 requests; "raw": raw HTTP/2 frames (raw-grpc-client.ts), the lightest. */
  driver?: LoadDriver;
}

/** Messages between the driver and its workers. */
export type WorkerCommand =
  | { kind: "measure" }
  | { kind: "count"; on: boolean }
  | { kind: "pause" }
  | { kind: "resume" }
  | { kind: "stop" };
export type WorkerReport =
  | { kind: "ready" }
  | { kind: "done"; requests: number; errors: number; firstError: string | undefined; latency: number[]; sumUs: number };

export type LoadDriver = "grpc-js" | "h2" | "raw";

export interface WorkerSetup {
  driver: LoadDriver;
  target: string;
  path: string;
  request: Uint8Array;
  clients: number;
  connections: number;
}

export interface LoadResult {
  requests: number;
  errors: number;
  firstError: string | undefined;
  elapsedMs: number;
  requestsPerSecond: number;
  latency: LatencyHistogram;
}

/**
 * Workers do not inherit tsx's loader from the parent thread (Node 20): the
 * worker registers it, then imports the TypeScript worker module.
 */
const TS_WORKER_BOOTSTRAP = `
require("tsx/cjs/api").register();
require(${JSON.stringify(fileURLToPath(new URL("./load-worker.ts", import.meta.url)))});
`;

function split(total: number, parts: number, index: number): number {
  return Math.floor(total / parts) + (index < total % parts ? 1 : 0);
}

/** A running load: clients connected and issuing requests (warming up) until measure(). */
export class Load {
  private readonly workers: Worker[];
  private readonly ready: Promise<void>;

  private constructor(options: LoadOptions) {
    const workerCount = Math.max(1, Math.min(options.workers, options.connections, options.clients));
    this.workers = [];
    const readies: Promise<void>[] = [];
    for (let i = 0; i < workerCount; i++) {
      const setup: WorkerSetup = {
        driver: options.driver ?? "grpc-js",
        target: options.target,
        path: options.path,
        request: options.request,
        clients: split(options.clients, workerCount, i),
        connections: split(options.connections, workerCount, i),
      };
      const worker = new Worker(TS_WORKER_BOOTSTRAP, { eval: true, workerData: setup });
      this.workers.push(worker);
      readies.push(
        new Promise((resolve, reject) => {
          worker.once("error", reject);
          worker.once("message", (m: WorkerReport) => (m.kind === "ready" ? resolve() : reject(new Error("worker not ready"))));
        }),
      );
    }
    this.ready = Promise.all(readies).then(() => undefined);
  }

  /** Starts the clients; resolves once every connection carried a first request. */
  static async start(options: LoadOptions): Promise<Load> {
    const load = new Load(options);
    await load.ready;
    return load;
  }

  /** Resets the counters: the measured window starts now. */
  measure(): void {
    for (const w of this.workers) w.postMessage({ kind: "measure" } satisfies WorkerCommand);
  }

  /** Counting on/off without resetting: several windows add up (see pause/resume). */
  count(on: boolean): void {
    for (const w of this.workers) w.postMessage({ kind: "count", on } satisfies WorkerCommand);
  }

  /** Clients stop issuing new requests (in-flight ones complete). */
  pause(): void {
    for (const w of this.workers) w.postMessage({ kind: "pause" } satisfies WorkerCommand);
  }

  resume(): void {
    for (const w of this.workers) w.postMessage({ kind: "resume" } satisfies WorkerCommand);
  }

  /** Ends the window, stops the clients and returns what was measured since measure(). */
  async stop(elapsedMs: number): Promise<LoadResult> {
    const reports = await Promise.all(
      this.workers.map(
        (w) =>
          new Promise<Extract<WorkerReport, { kind: "done" }>>((resolve) => {
            w.on("message", (m: WorkerReport) => m.kind === "done" && resolve(m));
            w.postMessage({ kind: "stop" } satisfies WorkerCommand);
          }),
      ),
    );
    await Promise.all(this.workers.map((w) => w.terminate()));
    const latency = new LatencyHistogram();
    let requests = 0;
    let errors = 0;
    let firstError: string | undefined;
    for (const r of reports) {
      requests += r.requests;
      errors += r.errors;
      firstError ??= r.firstError;
      const h = new LatencyHistogram(r.latency);
      h.sumUs = r.sumUs;
      latency.merge(h);
    }
    return { requests, errors, firstError, elapsedMs, requestsPerSecond: (requests * 1000) / elapsedMs, latency };
  }
}

/** Runs a warm-up then a measured window and returns the measured figures. */
export async function runLoad(options: LoadOptions & { warmupMs: number; durationMs: number; onMeasure?: () => void }): Promise<LoadResult> {
  const load = await Load.start(options);
  await new Promise((r) => setTimeout(r, options.warmupMs));
  load.measure();
  options.onMeasure?.();
  const t0 = performance.now();
  await new Promise((r) => setTimeout(r, options.durationMs));
  return load.stop(performance.now() - t0);
}
