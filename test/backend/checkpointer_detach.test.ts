/**
 * A checkpointer worker detached while inside a SQLite call that fails ends by itself and leaves
 * the process alive (checkpointer.ts: a terminate there aborted the member, CI of 3706e8a). Run in
 * a child process (checkpointer_detach_child.ts), since the failure being guarded against is an
 * abort of the whole process.
 */
import { spawnSync } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const CHILD = path.join(path.dirname(fileURLToPath(import.meta.url)), "checkpointer_detach_child.ts");

describe("checkpointer detach", () => {
  it("a worker detached while its open waits on a lock and then fails exits by itself; the process lives", { timeout: 60_000 }, () => {
    const r = spawnSync(process.execPath, ["--import", "tsx", CHILD, "1"], { encoding: "utf8", timeout: 50_000 });
    expect(r.stderr, "the child's stderr").not.toMatch(/FATAL ERROR/);
    expect(r.status, `child exit (signal ${r.signal}); stderr: ${r.stderr.slice(-2000)}`).toBe(0);
    const out = JSON.parse(r.stdout.trim().split("\n").pop() ?? "{}") as { rounds?: number; errors?: number; exitedMs?: number };
    expect(out.rounds).toBe(1);
    // Detached: its failure is nobody's (the backend already moved on, e.g. closed).
    expect(out.errors, "onError calls for a detached worker").toBe(0);
    // It finished the call it was in (the busy handler's wait) rather than being cut off.
    expect(out.exitedMs, "ms from detach to the worker's exit").toBeGreaterThan(0);
  });
});
