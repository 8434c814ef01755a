/**
 * The backend's checkpoints, on a worker thread (as image_worker.ts writes images): a checkpoint
 * copies -wal frames into the database file and, under synchronous=NORMAL, fsyncs the -wal before
 * and the database file after. SQLite's automatic checkpoint runs inside the COMMIT that crossed
 * its threshold (1000 pages), on the connection that committed: the member's, on the event loop,
 * with both fsyncs (measured tens of ms under a write load, hundreds when the disk is busy). The
 * main connection turns it off (wal_autocheckpoint=0) and this worker, on a connection of its own
 * to the same file, runs PASSIVE checkpoints instead, at SQLite's own threshold: they never wait for a lock or a reader, so
 * applies on the main connection continue meanwhile (WAL mode allows one checkpointer beside a
 * writer).
 *
 * Durability (backend.ts, issue 20) does not depend on when checkpoints run: Backend.sync fsyncs
 * the -wal and the file itself before the raft WAL releases anything, and SQLite restarts the
 * -wal (overwriting frames) only after a complete checkpoint, which fsynced the file first.
 *
 * Started lazily: a backend whose -wal never reaches `startBytes` (every unit test's) never pays
 * for a thread. If the worker fails, the main connection gets its automatic checkpoint back (the
 * -wal must not grow without bound) and `onError` is told.
 *
 * Only the current worker's failure is one. A worker is detached before it is asked to close
 * (stop, detach): Node delivers a worker's last messages inside its exit event (lib/internal/worker.js
 * kOnExit drains the ports, then emits 'exit' in the same callback, before any promise continuation),
 * so the close reply's continuation could run after the 'exit' of the worker it had asked to close,
 * which then looked like a crash: under load, 9 of 30 installs handed checkpoints back to the main
 * connection ("exited with code 0"; the backend test's flake in CI). No worker starts while one
 * is stopping (an install's stop must not be followed by a worker opening the file being replaced).
 *
 * A worker is never terminated (Worker.terminate): it is asked to close and ends by itself. A
 * terminate that lands while the worker is inside a SQLite call that fails aborts the whole
 * process: better-sqlite3 builds the SqliteError with V8's NewInstance, which returns nothing once
 * termination is pending, and its ToLocalChecked is a fatal error ("v8::ToLocalChecked Empty
 * MaybeLocal"). It happened: the warm-up (then a scratch store) closed its backend and removed the directory while
 * the worker it had just started was opening the file; the member died seconds after its restart
 * (CI of 3706e8a, test/e2e/snapshot.test.ts). The same call failing without a terminate is an
 * ordinary exception, which the worker reports or (detached) nobody hears.
 */
import { createRequire } from "node:module";
import { Worker } from "node:worker_threads";

const WORKER_SOURCE = `
const { parentPort, workerData } = require("node:worker_threads");
const fs = require("node:fs");
const os = require("node:os");
const Database = require(workerData.sqlite);
let db;
// Frames in the -wal not yet copied into the file: mxFrame (offset 16 of the wal-index header at
// the start of the -shm) less nBackfill (offset 96, the checkpoint info after the header's two
// copies), native byte order (sqlite.org/walformat.html). Read without a lock: a stale value
// only moves a checkpoint by one tick.
const header = Buffer.alloc(100);
function pendingFrames() {
  let fd;
  try {
    fd = fs.openSync(workerData.path + "-shm", "r");
  } catch {
    return 0;
  }
  try {
    if (fs.readSync(fd, header, 0, 100, 0) < 100) return 0;
    const le = os.endianness() === "LE";
    const mxFrame = le ? header.readUInt32LE(16) : header.readUInt32BE(16);
    const backfilled = le ? header.readUInt32LE(96) : header.readUInt32BE(96);
    return mxFrame > backfilled ? mxFrame - backfilled : mxFrame < backfilled ? mxFrame : 0;
  } finally {
    fs.closeSync(fd);
  }
}
function open() {
  db = new Database(workerData.path, { fileMustExist: true });
  db.pragma("synchronous = NORMAL");
  db.pragma("wal_autocheckpoint = 0");
}
function checkpoint() {
  const [r] = db.pragma("wal_checkpoint(PASSIVE)");
  return r;
}
open();
const timer = setInterval(() => {
  try {
    if (pendingFrames() >= workerData.thresholdFrames) checkpoint();
  } catch (e) {
    // Busy (another connection holds a lock a checkpoint needs, e.g. around an install): the
    // next tick tries again, as SQLite's own automatic checkpoint would. Anything else is a failure.
    if (e && e.code === "SQLITE_BUSY") return;
    parentPort.postMessage({ error: String(e) });
  }
}, workerData.intervalMs);
parentPort.on("message", (m) => {
  try {
    if (m.type === "checkpoint") parentPort.postMessage({ id: m.id, result: checkpoint() });
    else if (m.type === "reopen") {
      db.close();
      open();
      parentPort.postMessage({ id: m.id, result: null });
    } else if (m.type === "close") {
      // The worker ends by itself, never by terminate() (see the file comment).
      clearInterval(timer);
      try {
        db.close();
        parentPort.postMessage({ id: m.id, result: null });
      } finally {
        parentPort.close();
      }
    }
  } catch (e) {
    parentPort.postMessage({ id: m.id, error: String(e) });
  }
});
`;

const sqliteModule = createRequire(import.meta.url).resolve("better-sqlite3");

/** Resolves when `w` exits, however it ends. */
function exitOf(w: Worker): Promise<void> {
  return new Promise<void>((resolve) => w.once("exit", () => resolve()));
}

export interface CheckpointResult {
  busy: number;
  log: number;
  checkpointed: number;
}

export interface CheckpointerOptions {
  /** The database file (in WAL mode, already created). */
  path: string;
  /** Start the worker once the -wal holds this many bytes. Default 1 MiB. */
  startBytes?: number;
  /** How often the worker looks at the -wal. Default 100 ms. */
  intervalMs?: number;
  /**
   * Checkpoint once this many frames (pages) are in the -wal and not in the file: SQLite's own
   * automatic threshold (wal_autocheckpoint, default 1000), so there are as many checkpoints
   * and fsyncs as before, only on the worker. Default 1000.
   */
  thresholdFrames?: number;
  /** The worker failed: the caller turns the main connection's automatic checkpoint back on. */
  onError(message: string): void;
}

type Reply = { id?: number; result?: CheckpointResult | null; error?: string };

export class Checkpointer {
  private worker: Worker | undefined;
  /** A stop in progress (its worker detached, closing): no worker starts meanwhile. */
  private stopping: Promise<void> | undefined;
  private failed = false;
  private nextId = 0;
  /** Exits of workers detached and asked to close (detach), not yet seen. */
  private readonly detached = new Set<Promise<void>>();
  private readonly waiting = new Map<number, { resolve(r: CheckpointResult | null): void; reject(e: Error): void }>();
  readonly startBytes: number;

  constructor(private readonly o: CheckpointerOptions) {
    this.startBytes = o.startBytes ?? 1024 * 1024;
  }

  /** True once the worker runs (the main connection's automatic checkpoint is off either way). */
  get running(): boolean {
    return this.worker !== undefined;
  }

  /** Starts the worker if the -wal reached startBytes (called after commits). */
  maybeStart(walBytes: number): void {
    if (this.worker !== undefined || this.stopping !== undefined || this.failed || walBytes < this.startBytes) return;
    const w = new Worker(WORKER_SOURCE, { eval: true, workerData: { sqlite: sqliteModule, path: this.o.path, intervalMs: this.o.intervalMs ?? 100, thresholdFrames: this.o.thresholdFrames ?? 1000 } });
    w.unref();
    w.on("message", (m: Reply) => {
      if (m.id === undefined) {
        if (this.worker === w) this.fail(`checkpoint of ${this.o.path} failed: ${m.error}`);
        return;
      }
      const p = this.waiting.get(m.id);
      this.waiting.delete(m.id);
      if (m.error !== undefined) p?.reject(new Error(m.error));
      else p?.resolve(m.result ?? null);
    });
    w.on("error", (e) => {
      if (this.worker === w) this.fail(`checkpointer of ${this.o.path} failed: ${e.message}`);
    });
    w.on("exit", (code) => {
      if (this.worker === w) this.fail(`checkpointer of ${this.o.path} exited with code ${code}`);
    });
    this.worker = w;
  }

  /** One PASSIVE checkpoint now, off the event loop (undefined when the worker is not running). */
  async checkpoint(): Promise<CheckpointResult | undefined> {
    return (await this.request(this.worker, "checkpoint")) ?? undefined;
  }

  /** The file was replaced (a snapshot install): the worker's connection moves to the new one. */
  async reopen(): Promise<void> {
    await this.request(this.worker, "reopen");
  }

  /**
   * Stops the worker (its connection closed first); the Checkpointer may start again once this
   * resolves. The worker is detached first (see the file comment): the exit that follows is the
   * one asked for, never a failure.
   */
  async stop(): Promise<void> {
    if (this.stopping !== undefined) return this.stopping;
    const w = this.worker;
    if (w === undefined) return;
    this.worker = undefined;
    const stopping = (async () => {
      // Stopped once it has exited: after its close reply (it closes its port then) or instead of
      // one (a worker that dies has stopped too).
      const exited = exitOf(w);
      await Promise.race([this.request(w, "close").catch(() => undefined), exited]);
      await exited;
    })();
    this.stopping = stopping;
    try {
      await stopping;
    } finally {
      this.stopping = undefined;
    }
  }

  /**
   * Detaches the worker and asks it to close, without waiting (Backend.close is synchronous): it
   * closes its connection after the call it is in, if any, and exits. `drained` resolves then.
   */
  detach(): void {
    const w = this.worker;
    this.worker = undefined;
    if (w !== undefined) {
      const exited = exitOf(w);
      this.detached.add(exited);
      void exited.then(() => this.detached.delete(exited));
      w.postMessage({ type: "close", id: this.nextId++ });
      w.ref(); // until it has closed its connection: a process whose loop empties meanwhile waits for it
    }
    for (const p of this.waiting.values()) p.reject(new Error("checkpointer detached"));
    this.waiting.clear();
  }

  /** Resolves once every detached worker has exited (a member's shutdown waits for it). */
  async drained(): Promise<void> {
    await Promise.all([...this.detached]);
  }

  private request(w: Worker | undefined, type: "checkpoint" | "reopen" | "close"): Promise<CheckpointResult | null> {
    if (w === undefined) return Promise.resolve(null);
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.waiting.set(id, { resolve, reject });
      w.postMessage({ type, id });
    });
  }

  private fail(message: string): void {
    if (this.failed) return;
    this.failed = true;
    this.detach();
    this.o.onError(message);
  }
}
