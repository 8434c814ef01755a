/**
 * The port allocator (test/ports.ts): distinct ports across concurrent processes that contend
 * for the same ports, claims released at exit, stale claims taken over, live claims and ports a
 * foreign program listens on skipped. Each case uses its own lock directory.
 */
import { execFile, spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { PORT_RANGE } from "./ports.js";

const TSX = resolve(import.meta.dirname, "../node_modules/.bin/tsx");
const PORTS_TS = resolve(import.meta.dirname, "ports.ts");
const dirs: string[] = [];
/** Where the children start scanning: the middle of the range, the same for all of them. */
const START = PORT_RANGE.first + 3_000;

function lockDir(): string {
  const d = mkdtempSync(join(tmpdir(), "etcetera-ports-test-"));
  dirs.push(d);
  return d;
}

afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** Runs `n` reservations in a fresh process; resolves to the ports it got. */
function reserveInChild(dir: string, n: number, holdMs = 0): Promise<number[]> {
  const script =
    `(async () => { const { reservePorts } = await import(${JSON.stringify(PORTS_TS)});` +
    `const got = await reservePorts(${n}); console.log(JSON.stringify(got));` +
    `await new Promise((r) => setTimeout(r, ${holdMs})); })();`;
  return new Promise((res, rej) => {
    execFile(TSX, ["--eval", script], { env: { ...process.env, ETCETERA_PORT_LOCK_DIR: dir, ETCETERA_PORT_START: String(START) } }, (err, stdout, stderr) => {
      if (err !== null) return rej(new Error(`${err.message}\n${stderr}`));
      res(JSON.parse(stdout.trim().split("\n").pop() as string) as number[]);
    });
  });
}

/** True when something listens on `port` (127.0.0.1) now. */
function listening(port: number): Promise<boolean> {
  const probe = createServer();
  return new Promise((r) => {
    probe.once("error", () => r(true));
    probe.listen(port, "127.0.0.1", () => probe.close(() => r(false)));
  });
}

function window(n: number): number[] {
  return Array.from({ length: n }, (_, i) => START + i);
}

describe("port allocator", () => {
  it("hands out distinct ports to processes that reserve the same ports at the same time", async () => {
    const dir = lockDir();
    // Same start for all four, claims held until all are done: every port is contended.
    const got = await Promise.all([0, 1, 2, 3].map(() => reserveInChild(dir, 40, 3_000)));
    const all = got.flat();
    expect(all).toHaveLength(160);
    expect(new Set(all).size).toBe(160);
    for (const p of all) {
      expect(p).toBeGreaterThanOrEqual(PORT_RANGE.first);
      expect(p).toBeLessThanOrEqual(PORT_RANGE.last);
    }
  }, 60_000);

  it("releases a process's claims at exit", async () => {
    const dir = lockDir();
    const first = await reserveInChild(dir, 3);
    expect(first).toEqual(window(3));
    for (const p of first) expect(existsSync(join(dir, String(p)))).toBe(false);
    expect(await reserveInChild(dir, 3)).toEqual(first);
  }, 30_000);

  it("skips a live process's claim and takes over a dead process's claim", async () => {
    const dir = lockDir();
    const dead = spawn(process.execPath, ["-e", ""]);
    const deadPid = await new Promise<number>((r) => dead.on("exit", () => r(dead.pid as number)));
    const w = window(6);
    w.forEach((p, i) => writeFileSync(join(dir, String(p)), String(i % 2 === 0 ? process.pid : deadPid)));
    const got = await reserveInChild(dir, 3);
    expect(got).toEqual([w[1], w[3], w[5]]);
    expect(readFileSync(join(dir, String(w[0])), "utf8")).toBe(String(process.pid));
    expect(existsSync(join(dir, `${w[1]}.takeover`))).toBe(false);
  }, 30_000);

  it("skips a port another program listens on", async () => {
    const dir = lockDir();
    const servers: Server[] = [];
    // Other test files run beside this one and take ports of the real allocator, which may fall in
    // this window: a port already in use is held by another program too, just not by us.
    const busyElsewhere = new Set<number>();
    try {
      for (const p of window(10).filter((_, i) => i % 3 === 0)) {
        const srv = createServer();
        const ok = await new Promise<boolean>((r, j) => {
          srv.once("error", (err: NodeJS.ErrnoException) => (err.code === "EADDRINUSE" ? r(false) : j(err)));
          srv.listen(p, "127.0.0.1", () => r(true));
        });
        if (ok) servers.push(srv);
        else busyElsewhere.add(p);
      }
      const held = new Set([...servers.map((s) => (s.address() as { port: number }).port), ...busyElsewhere]);
      const got = await reserveInChild(dir, 6);
      for (const p of held) expect(got).not.toContain(p);
      expect(got).toEqual([...got].sort((a, b) => a - b));
      // Every port it passed over was one listened on: ours, or (another test's) busy when checked.
      const passed = window(got[got.length - 1]! - START + 1).filter((p) => !got.includes(p) && !held.has(p));
      for (const p of passed) expect(await listening(p), `port ${p} skipped while free`).toBe(true);
      expect(got[0]).toBe(window(10).find((p) => !held.has(p) && !passed.includes(p)));
    } finally {
      await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
    }
  }, 30_000);
});
