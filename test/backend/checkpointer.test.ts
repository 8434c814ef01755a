/**
 * The checkpointer's worker life cycle (checkpointer.ts), against its one outside dependency made
 * deterministic: Node delivers a worker's last messages inside its exit event (lib/internal/worker.js
 * kOnExit drains the ports, then emits 'exit' in the same callback, before any promise continuation
 * runs). Whether a reply comes in its own callback or is drained at exit depends on the order the
 * main thread's event loop sees the two (under load, 9 installs of 30 saw the exit first); the
 * worker here always delivers its replies the second way, as Node does when the exit comes first.
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import Database from "better-sqlite3";
import { afterEach, describe, expect, it, vi } from "vitest";
import { Checkpointer } from "../../src/backend/checkpointer.js";

const control = vi.hoisted(() => ({ holdReplies: false, started: 0 }));

vi.mock("node:worker_threads", async (importOriginal) => {
  const real = await importOriginal<typeof import("node:worker_threads")>();
  /** A Worker whose replies (messages with an id), while held, reach listeners only at its exit. */
  class ExitDrainingWorker extends real.Worker {
    private readonly held: unknown[] = [];
    constructor(...args: ConstructorParameters<typeof real.Worker>) {
      super(...args);
      control.started++;
    }
    override emit(event: string | symbol, ...args: unknown[]): boolean {
      const m = args[0] as { id?: number } | undefined;
      if (event === "message" && control.holdReplies && m?.id !== undefined) {
        this.held.push(m);
        return true;
      }
      if (event === "exit") for (const h of this.held.splice(0)) super.emit("message", h);
      return super.emit(event, ...args);
    }
  }
  return { ...real, Worker: ExitDrainingWorker };
});

const dirs: string[] = [];
afterEach(() => {
  control.holdReplies = false;
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

/** A database in WAL mode, as the backend leaves it. */
function walDatabase(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "checkpointer-test-"));
  dirs.push(dir);
  const file = path.join(dir, "db");
  const db = new Database(file);
  db.pragma("journal_mode = WAL");
  db.exec("CREATE TABLE t (v TEXT)");
  db.close();
  return file;
}

function checkpointer(file: string, errors: string[]): Checkpointer {
  return new Checkpointer({ path: file, startBytes: 0, intervalMs: 5, onError: (m) => errors.push(m) });
}

describe("checkpointer worker life cycle", () => {
  it("a stop whose close reply is delivered at the worker's exit is not a failure", async () => {
    const file = walDatabase();
    const errors: string[] = [];
    const cp = checkpointer(file, errors);
    cp.maybeStart(0);
    expect(await cp.checkpoint(), "the worker answers").toMatchObject({ busy: 0 });
    control.holdReplies = true;
    await cp.stop();
    await new Promise((r) => setTimeout(r, 50));
    expect(errors, "the exit of a worker asked to close").toEqual([]);
    expect(cp.running).toBe(false);
    // It may start again (the backend does, on the installed file) and fail for real then.
    control.holdReplies = false;
    cp.maybeStart(0);
    expect(cp.running).toBe(true);
    expect(await cp.checkpoint()).toMatchObject({ busy: 0 });
    await cp.stop();
    expect(errors).toEqual([]);
  });

  it("no worker starts while one is stopping (an install replaces the file right after the stop)", async () => {
    const file = walDatabase();
    const errors: string[] = [];
    const cp = checkpointer(file, errors);
    cp.maybeStart(0);
    expect(await cp.checkpoint()).toMatchObject({ busy: 0 });
    const startedBefore = control.started;
    let stopped = false;
    const stop = cp.stop().then(() => {
      stopped = true;
    });
    // The backend's batch timer asks at every tick; here at every turn of the loop until the stop is over.
    while (!stopped) {
      cp.maybeStart(0);
      await new Promise((r) => setImmediate(r));
    }
    await stop;
    expect(control.started - startedBefore, "workers started during the stop").toBe(0);
    expect(cp.running).toBe(false);
    expect(errors).toEqual([]);
  });

  it("a worker that fails on its own is a failure, told once, and no worker starts after it", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "checkpointer-test-"));
    dirs.push(dir);
    const errors: string[] = [];
    const cp = checkpointer(path.join(dir, "missing.db"), errors); // the worker's open throws
    cp.maybeStart(0);
    const deadline = Date.now() + 30_000;
    while (errors.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    await new Promise((r) => setTimeout(r, 50));
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatch(/^checkpointer of .*missing\.db failed: /);
    expect(cp.running).toBe(false);
    cp.maybeStart(0);
    expect(cp.running).toBe(false);
  });
});
