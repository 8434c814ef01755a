/**
 * Child of checkpointer_detach.test.ts (run as its own process, since what it guards against
 * aborts the process): a checkpointer's worker is detached while it is inside a SQLite call that
 * then fails, and the process must live on. The call: the worker's open, whose first read waits
 * in SQLite's busy handler (better-sqlite3's 5 s timeout) for an EXCLUSIVE lock this process
 * holds, then fails with SQLITE_BUSY. Ended by Worker.terminate there, the worker aborted the
 * process ("v8::ToLocalChecked Empty MaybeLocal", checkpointer.ts).
 * argv: rounds
 * Prints one JSON line: {"rounds","errors","exitedMs"}.
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import Database from "better-sqlite3";
import { Checkpointer } from "../../src/backend/checkpointer.js";

const rounds = Number(process.argv[2] ?? 1);
const errors: string[] = [];
let exitedMs = 0;
for (let i = 0; i < rounds; i++) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "checkpointer-detach-"));
  const file = path.join(dir, "db");
  const holder = new Database(file);
  holder.exec("CREATE TABLE t (v TEXT)");
  holder.exec("BEGIN EXCLUSIVE"); // every other connection's read waits, then fails
  const cp = new Checkpointer({ path: file, startBytes: 0, onError: (m) => errors.push(m) });
  cp.maybeStart(0);
  await new Promise((r) => setTimeout(r, 1_000)); // the worker is in its open by now, waiting
  const startMs = performance.now();
  cp.detach();
  await cp.drained();
  exitedMs = Math.max(exitedMs, performance.now() - startMs);
  holder.exec("ROLLBACK");
  holder.close();
  fs.rmSync(dir, { recursive: true, force: true });
}
console.log(JSON.stringify({ rounds, errors: errors.length, exitedMs: Math.round(exitedMs) }));
