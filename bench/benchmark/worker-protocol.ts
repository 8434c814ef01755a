/** What the main thread and the load workers say to each other (worker.ts stays an entry point only). */
import type { UnaryPlan } from "./ops.js";

/** Slots of the shared Int32Array. */
export const SLOT_NEXT = 0;
export const SLOT_DONE = 1;
export const SLOT_GO = 2;
export const SHARED_SLOTS = 3;

export interface WorkerInput {
  plan: UnaryPlan;
  total: number;
  /** Endpoint list of each of this worker's connections. */
  conns: string[][];
  /** Connection index (into `conns`) of each of this worker's clients. */
  clientConn: number[];
  /** This worker's share of --rate (0 = unlimited). */
  ratePerSec: number;
  dialTimeoutMs: number;
  transport: "h2" | "grpc-js";
  shared: SharedArrayBuffer;
  /** Runs put's periodic compaction (only one worker does). */
  compactor: boolean;
}

export type WorkerMessage =
  | { type: "ready" }
  | { type: "failed"; message: string }
  | { type: "done"; latencies: Float64Array[]; errors: Record<string, number>; startMs: number; endMs: number };

