/**
 * Worker thread: owns a share of the connections and the clients on them, claims request
 * numbers from a shared counter (so fast clients take more, like etcd's request channel),
 * records latencies locally and hands them back at the end.
 */
import { parentPort, workerData } from "node:worker_threads";
import { Conn, errorText } from "./conn.js";
import { LatencyRecorder } from "./latencies.js";
import { type ClientOp, makeClientOp, seriesOf } from "./ops.js";
import { METHODS, decode, encode, num, sub } from "./proto.js";
import { SLOT_DONE, SLOT_GO, SLOT_NEXT, type WorkerInput, type WorkerMessage } from "./worker-protocol.js";

const nowEpochMs = () => performance.timeOrigin + performance.now();
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

class RateLimiter {
  private nextSlotMs = 0;
  constructor(private readonly intervalMs: number) {}
  async wait(): Promise<void> {
    if (this.intervalMs <= 0) return;
    const now = performance.now();
    const slot = Math.max(now, this.nextSlotMs);
    this.nextSlotMs = slot + this.intervalMs;
    if (slot > now) await sleep(slot - now);
  }
}

async function compactLoop(conn: Conn, intervalMs: number, delta: number, stop: () => boolean): Promise<void> {
  while (!stop()) {
    await sleep(intervalMs);
    if (stop()) return;
    const rev = num(sub(decode("RangeResponse", await conn.unaryAt(0, METHODS.range, encode("RangeRequest", { key: Buffer.from("foo") }))), "header"), "revision");
    await conn.unaryAt(0, METHODS.compact, encode("CompactionRequest", { revision: Math.max(0, rev - delta) }));
  }
}

async function main(input: WorkerInput): Promise<void> {
  const port = parentPort;
  if (port === null) throw new Error("worker.ts must run in a worker thread");
  const shared = new Int32Array(input.shared);
  const conns = input.conns.map((eps) => new Conn(eps, input.transport));
  try {
    await Promise.all(conns.map((c) => c.waitReady(input.dialTimeoutMs)));
    const ops: ClientOp[] = await Promise.all(input.clientConn.map((ci) => makeClientOp(input.plan, conns[ci] as Conn)));
    port.postMessage({ type: "ready" } satisfies WorkerMessage);
    // Block until the main thread says go: every worker starts at the same moment.
    Atomics.wait(shared, SLOT_GO, 0);

    const recorder = new LatencyRecorder(seriesOf(input.plan.command).length, input.total);
    const errors: Record<string, number> = {};
    const limiter = new RateLimiter(input.ratePerSec > 0 ? 1000 / input.ratePerSec : 0);
    let finished = false;
    const compactMs = input.plan.flags["compact-interval"];
    const compaction =
      input.compactor && typeof compactMs === "number" && compactMs > 0
        ? compactLoop(conns[0] as Conn, compactMs, input.plan.flags["compact-index-delta"] as number, () => finished)
        : Promise.resolve();
    const startMs = nowEpochMs();
    await Promise.all(
      ops.map(async (op) => {
        for (;;) {
          const i = Atomics.add(shared, SLOT_NEXT, 1);
          if (i >= input.total) return;
          await limiter.wait();
          const t0 = performance.now();
          try {
            const series = await op(i);
            recorder.push(series, (performance.now() - t0) / 1000);
          } catch (e) {
            const msg = errorText(e);
            errors[msg] = (errors[msg] ?? 0) + 1;
          }
          Atomics.add(shared, SLOT_DONE, 1);
        }
      }),
    );
    const endMs = nowEpochMs();
    finished = true;
    await compaction.catch((e: unknown) => {
      const msg = `compaction: ${errorText(e)}`;
      errors[msg] = (errors[msg] ?? 0) + 1;
    });
    const latencies = recorder.take();
    port.postMessage({ type: "done", latencies, errors, startMs, endMs } satisfies WorkerMessage, latencies.map((l) => l.buffer as ArrayBuffer));
  } catch (e) {
    port.postMessage({ type: "failed", message: errorText(e) } satisfies WorkerMessage);
  } finally {
    for (const c of conns) c.close();
  }
}

void main(workerData as WorkerInput);
