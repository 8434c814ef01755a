/**
 * A consistent image of a SQLite database written by a worker thread (Backend.snapshot): the
 * copy and its writes run off the event loop, so a member sending a multi-GiB snapshot keeps
 * serving heartbeats and requests meanwhile.
 *
 * The worker is evaluated from source (a few lines of CommonJS) rather than loaded from a file,
 * so it runs the same from src/ under tsx and vitest as from dist/; it loads the same
 * better-sqlite3 the member uses.
 */
import { createRequire } from "node:module";
import { Worker } from "node:worker_threads";

const WORKER_SOURCE = `
const { parentPort, workerData } = require("node:worker_threads");
const Database = require(workerData.sqlite);
const db = new Database(workerData.source, { readonly: true, fileMustExist: true });
try {
  // One statement, one read transaction: the image is the committed state at its start.
  db.prepare("VACUUM INTO ?").run(workerData.dest);
} finally {
  db.close();
}
parentPort.postMessage("done");
`;

const sqliteModule = createRequire(import.meta.url).resolve("better-sqlite3");

/** Writes `source`'s committed state into the new file `dest` (which must not exist). */
export function writeImageInWorker(source: string, dest: string): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const worker = new Worker(WORKER_SOURCE, { eval: true, workerData: { sqlite: sqliteModule, source, dest } });
    let done = false;
    worker.once("message", () => {
      done = true;
    });
    worker.once("error", reject);
    worker.once("exit", (code) => {
      if (done) resolve();
      else reject(new Error(`database image worker exited with code ${code} before writing ${dest}`));
    });
  });
}
