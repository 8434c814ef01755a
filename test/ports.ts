/**
 * Loopback ports for the child processes of the test, chaos, fuzz and bench harnesses.
 *
 * Why not "listen on port 0, close, return the number": the kernel may hand the same number to
 * the next caller (another harness in this process, a vitest worker beside it, a helper's run on
 * the same machine), and two members then race for one port (this made a bench:compare round
 * fail with "initial cluster has duplicate url"). We cannot hold the listener until the child
 * binds (etcd and node both bind without SO_REUSEPORT), so instead:
 *
 * - ports come from a range below the kernel's ephemeral range (`ip_local_port_range`), so no
 *   `listen(0)` and no outgoing connection is ever given one of them by the kernel;
 * - each port is claimed across processes by a lock file holding the claimant's pid, created
 *   atomically (hard link: exactly one creator wins); a claim whose process is gone is taken over under a second exclusive lock
 *   (a directory), so two processes cannot both take over the same stale claim;
 * - a claimed port is probed with a bind before it is handed out (a program that does not use
 *   this allocator and holds the port makes us skip it);
 * - a process never hands out a port twice; its claims are released when it exits.
 *
 * What is left: a program that binds a fixed port in the range after our probe. Nothing in this
 * repository does (its fixed ports, 2379/2380 and npm run cluster's 22379.., are outside it).
 */
import { linkSync, mkdirSync, readFileSync, rmdirSync, unlinkSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** The range: below Linux's default ephemeral range (32768-60999) and clear of etcd's ports. */
export const PORT_RANGE = { first: 15_000, last: 22_299 } as const;

const LOCK_DIR = process.env.ETCETERA_PORT_LOCK_DIR ?? join(tmpdir(), "etcetera-ports");

/** Ports this process has handed out (never again) and the lock files it must remove at exit. */
const handedOut = new Set<number>();
const ownLocks = new Set<string>();
let cursor: number | undefined;
let exitHookInstalled = false;

function ephemeralFirst(): number {
  try {
    const [lo] = readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/);
    return Number(lo);
  } catch {
    return 32_768;
  }
}

function alive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    // EPERM: it exists but belongs to someone else: alive.
    return (e as NodeJS.ErrnoException).code === "EPERM";
  }
}

/**
 * Creates the lock file with our pid already in it: written to a private file, then hard-linked
 * into place (link fails if the name exists). An `open(O_EXCL)` then `write` would leave an empty
 * file for a moment, which a second process would read as a dead claim and take over.
 */
function createLock(path: string): boolean {
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, String(process.pid));
  try {
    linkSync(tmp, path);
    ownLocks.add(path);
    return true;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "EEXIST") return false;
    throw e;
  } finally {
    unlinkSync(tmp);
  }
}

function ownerOf(path: string): number | undefined {
  try {
    return Number(readFileSync(path, "utf8"));
  } catch {
    return undefined;
  }
}

/** Claims `port` for this process across processes; false when another live process holds it. */
function claim(port: number): boolean {
  const path = join(LOCK_DIR, String(port));
  if (createLock(path)) return true;
  const owner = ownerOf(path);
  if (owner === undefined || alive(owner)) return false;
  // A stale claim (its process died without cleaning up). Only one process may take it over.
  const takeover = `${path}.takeover`;
  try {
    mkdirSync(takeover);
  } catch {
    return false;
  }
  try {
    if (ownerOf(path) !== owner) return false; // someone else already took it over
    try {
      unlinkSync(path);
    } catch {
      return false;
    }
    return createLock(path);
  } finally {
    rmdirSync(takeover);
  }
}

function release(port: number): void {
  const path = join(LOCK_DIR, String(port));
  if (!ownLocks.delete(path)) return;
  try {
    unlinkSync(path);
  } catch {
    // already gone
  }
}

function bindable(port: number): Promise<boolean> {
  return new Promise((res) => {
    const srv = createServer();
    srv.unref();
    srv.once("error", () => res(false));
    srv.listen({ port, host: "127.0.0.1", exclusive: true }, () => srv.close(() => res(true)));
  });
}

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on("exit", () => {
    for (const path of ownLocks) {
      try {
        unlinkSync(path);
      } catch {
        // best effort: a stale claim is taken over by the next process
      }
    }
  });
}

/**
 * A loopback port no other caller of this allocator (in this or any other process) holds, that
 * was bindable a moment ago, and that this process has not handed out before.
 */
export async function reservePort(): Promise<number> {
  if (PORT_RANGE.last >= ephemeralFirst()) throw new Error(`port range ${PORT_RANGE.first}-${PORT_RANGE.last} overlaps the kernel's ephemeral range`);
  mkdirSync(LOCK_DIR, { recursive: true });
  installExitHook();
  const size = PORT_RANGE.last - PORT_RANGE.first + 1;
  // Processes start at different places in the range so that they rarely contend for a port
  // (ETCETERA_PORT_START makes them contend, for the allocator's own tests).
  const start = process.env.ETCETERA_PORT_START;
  cursor ??= start !== undefined ? (Number(start) - PORT_RANGE.first + size) % size : (process.pid * 7919) % size;
  for (let tried = 0; tried < size; tried++) {
    const port = PORT_RANGE.first + (cursor % size);
    cursor = (cursor + 1) % size;
    if (handedOut.has(port) || !claim(port)) continue;
    if (!(await bindable(port))) {
      release(port);
      continue;
    }
    handedOut.add(port);
    return port;
  }
  throw new Error(`no free port left in ${PORT_RANGE.first}-${PORT_RANGE.last} (lock files in ${LOCK_DIR})`);
}

/** `n` distinct ports (see reservePort). */
export async function reservePorts(n: number): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) out.push(await reservePort());
  return out;
}
