/**
 * The backend's VACUUM (Maintenance.Defragment) on a worker thread, on a connection of its own to
 * the same file (as checkpointer.ts runs checkpoints and image_worker.ts writes images): the copy
 * of the whole database takes seconds on a large backend, and on the member's event loop it held
 * raft's heartbeats too. etcd's defrag holds the backend (its batch tx and read locks) but not
 * its raft goroutines; off the event loop, so do we.
 *
 * The caller holds the backend meanwhile (Backend.defragmentOffThread): no write and no open
 * transaction on the main connection, no checkpointer, so the worker's VACUUM and its TRUNCATE
 * checkpoint (which returns the freed pages to the file system) take the locks they need at once.
 * SQLite's VACUUM is atomic through the -wal: a process killed mid-VACUUM reopens the database as
 * it was before it (every committed write in it).
 */
import { createRequire } from "node:module";
import { Worker } from "node:worker_threads";

const WORKER_SOURCE = `
const { parentPort, workerData } = require("node:worker_threads");
const Database = require(workerData.sqlite);
const db = new Database(workerData.path, { fileMustExist: true });
try {
  db.pragma("synchronous = NORMAL");
  db.pragma("wal_autocheckpoint = 0");
  db.exec("VACUUM");
  const [ckpt] = db.pragma("wal_checkpoint(TRUNCATE)");
  parentPort.postMessage({ ckpt });
} finally {
  db.close();
}
`;

const sqliteModule = createRequire(import.meta.url).resolve("better-sqlite3");

export interface VacuumCheckpoint {
  busy: number;
  log: number;
  checkpointed: number;
}

/** VACUUMs the database at `path` and checkpoints its -wal back into the file (TRUNCATE). */
export function vacuumInWorker(path: string): Promise<VacuumCheckpoint> {
  return new Promise<VacuumCheckpoint>((resolve, reject) => {
    const worker = new Worker(WORKER_SOURCE, { eval: true, workerData: { sqlite: sqliteModule, path } });
    let result: VacuumCheckpoint | undefined;
    worker.once("message", (m: { ckpt: VacuumCheckpoint }) => {
      result = m.ckpt;
    });
    worker.once("error", reject);
    worker.once("exit", (code) => {
      if (result !== undefined) resolve(result);
      else reject(new Error(`vacuum worker exited with code ${code} before vacuuming ${path}`));
    });
  });
}
