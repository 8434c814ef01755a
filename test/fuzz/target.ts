/**
 * The server processes the fuzzers hit: members of a harness Cluster (etcetera, or etcd with
 * E2E_TARGET=etcd), plus, for side-by-side comparisons in one run, a reference etcd spawned here
 * (Debian's /usr/bin/etcd, same flags as the harness gives its members).
 */
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { clients, unary } from "../e2e/grpc_client.js";
import { type Member, TARGET_ETCD, etcdctl, sleep } from "../e2e/harness.js";
import { ETCD_BIN } from "../binaries.js";
import { reservePort } from "../ports.js";


/** One server process the fuzzers talk to. */
export interface FuzzTarget {
  readonly label: string;
  readonly endpoint: string;
  readonly clientPort: number;
  readonly peerPort: number;
  /** The process id (throws when the process is gone). */
  pid(): number;
  alive(): boolean;
  /** The tail of its log, for failure messages. */
  logTail(): string;
}

export function memberTarget(m: Member): FuzzTarget {
  return {
    label: `${TARGET_ETCD ? "etcd" : "etcetera"}:${m.spec.name}`,
    endpoint: m.endpoint,
    clientPort: m.spec.clientPort,
    peerPort: m.spec.peerPort,
    pid: () => {
      const pid = m.proc?.pid;
      if (pid === undefined) throw new Error(`${m.spec.name} is not running:\n${m.log.slice(-3000)}`);
      return pid;
    },
    alive: () => m.running,
    logTail: () => m.log.slice(-3000),
  };
}

/**
 * Whether a reference etcd can run beside the target in the same test run: only when the target is
 * etcetera (comparing etcd to itself proves nothing) and Debian's etcd is installed.
 */
export function referenceAvailable(): boolean {
  return !TARGET_ETCD && existsSync(ETCD_BIN);
}

/** A single-member etcd for comparisons (the harness's member flags, its own ports and data dir). */
export class ReferenceEtcd implements FuzzTarget {
  readonly label = "reference-etcd";
  private proc: ChildProcess | undefined;
  private log = "";

  private constructor(
    readonly clientPort: number,
    readonly peerPort: number,
    private readonly dir: string,
  ) {}

  get endpoint(): string {
    return `127.0.0.1:${this.clientPort}`;
  }

  static async start(extraArgs: string[] = []): Promise<ReferenceEtcd> {
    const dir = mkdtempSync(join(tmpdir(), "etcetera-fuzz-ref-"));
    const ref = new ReferenceEtcd(await reservePort(), await reservePort(), dir);
    const peer = `http://127.0.0.1:${ref.peerPort}`;
    const client = `http://127.0.0.1:${ref.clientPort}`;
    const proc = spawn(
      ETCD_BIN,
      [
        "--name=ref",
        `--data-dir=${join(dir, "ref.etcd")}`,
        `--listen-client-urls=${client}`,
        `--advertise-client-urls=${client}`,
        `--listen-peer-urls=${peer}`,
        `--initial-advertise-peer-urls=${peer}`,
        `--initial-cluster=ref=${peer}`,
        "--initial-cluster-token=fuzz-ref",
        "--initial-cluster-state=new",
        ...extraArgs,
      ],
      { stdio: ["ignore", "pipe", "pipe"] },
    );
    ref.proc = proc;
    const append = (b: Buffer): void => {
      ref.log += b.toString();
      if (ref.log.length > 1_000_000) ref.log = ref.log.slice(-500_000);
    };
    proc.stdout?.on("data", append);
    proc.stderr?.on("data", append);
    proc.on("exit", () => (ref.proc = undefined));
    const deadline = Date.now() + 30_000;
    while (!ref.log.includes("ready to serve client requests")) {
      if (ref.proc === undefined || Date.now() > deadline) throw new Error(`reference etcd did not start:\n${ref.log.slice(-3000)}`);
      await sleep(50);
    }
    return ref;
  }

  pid(): number {
    const pid = this.proc?.pid;
    if (pid === undefined) throw new Error(`reference etcd is not running:\n${this.log.slice(-3000)}`);
    return pid;
  }

  alive(): boolean {
    return this.proc !== undefined;
  }

  logTail(): string {
    return this.log.slice(-3000);
  }

  /** The first lines of a Go panic in the log (what crashed the reference), if any. */
  panicSummary(): string | undefined {
    const at = this.log.indexOf("panic: ");
    if (at < 0) return undefined;
    return this.log.slice(at).split("\n").slice(0, 8).join("\n");
  }

  async destroy(): Promise<void> {
    const proc = this.proc;
    if (proc !== undefined) {
      const gone = new Promise((r) => proc.once("exit", r));
      proc.kill("SIGKILL");
      await gone;
    }
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** True if a process with this id exists (signal 0 probes without delivering anything). */
function processExists(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * Alarms a fuzzed Alarm(ACTIVATE) may have raised are cleared first: a NOSPACE alarm raised by a
 * client is correct behaviour, not damage, but it would make the write check below fail.
 */
async function disarmAlarms(endpoint: string): Promise<void> {
  const c = clients(endpoint);
  try {
    const res = await unary<{ alarms: { memberID: string; alarm: string }[] }>(c.maintenance, "Alarm", { action: "GET", memberID: "0", alarm: "NONE" });
    for (const a of res.alarms ?? []) {
      await unary(c.maintenance, "Alarm", { action: "DEACTIVATE", memberID: a.memberID, alarm: a.alarm });
    }
  } finally {
    c.close();
  }
}

/**
 * (a) and (c) of the fuzz contract: the process is alive, `etcdctl endpoint health` passes, a
 * Range answers, and a fresh key written is read back with its value.
 */
export async function assertServing(t: FuzzTarget, checkLabel: string): Promise<void> {
  const pid = t.pid();
  if (!t.alive() || !processExists(pid)) throw new Error(`${t.label} died during ${checkLabel}:\n${t.logTail()}`);
  await disarmAlarms(t.endpoint);
  const health = await etcdctl(t.endpoint, ["endpoint", "health"]);
  if (health.code !== 0) throw new Error(`${t.label} unhealthy after ${checkLabel}: ${health.stdout}${health.stderr}\n${t.logTail()}`);
  const c = clients(t.endpoint);
  try {
    const key = `fuzz-check/${checkLabel}/${Date.now()}-${Math.floor(Math.random() * 1e9)}`;
    const value = `value of ${key}`;
    const put = await unary<{ header: { revision: string } }>(c.kv, "Put", { key: Buffer.from(key), value: Buffer.from(value) });
    const got = await unary<{ kvs: { value: Buffer; mod_revision: string }[]; count: string }>(c.kv, "Range", { key: Buffer.from(key) });
    if (got.kvs.length !== 1 || got.kvs[0]!.value.toString() !== value || got.kvs[0]!.mod_revision !== put.header.revision) {
      throw new Error(`${t.label} read back the wrong value after ${checkLabel}: ${JSON.stringify(got)}`);
    }
    // A Range over everything still answers (count only: the fuzzers may have written many keys).
    await unary(c.kv, "Range", { key: Buffer.from([0]), range_end: Buffer.from([0]), count_only: true });
  } finally {
    c.close();
  }
}
