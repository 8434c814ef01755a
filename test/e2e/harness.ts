/**
 * End-to-end harness: real server processes on loopback, driven by real clients.
 * Each member is `node dist/server.js` with etcd's flags; etcdctl is Debian's etcd-client.
 */
import { spawn, execFile, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { ETCD_BIN, ETCDCTL_BIN as ETCDCTL } from "../binaries.js";
import { reservePort } from "../ports.js";

export const ROOT = resolve(import.meta.dirname, "../..");
export const SERVER_JS = join(ROOT, "dist/server.js");
/**
 * E2E_TARGET=etcd runs the same suites against Debian's real etcd: the reference that keeps the
 * tests' expectations honest.
 */
export const TARGET_ETCD = process.env.E2E_TARGET === "etcd";
export { ETCDCTL_BIN as ETCDCTL } from "../binaries.js";

export interface MemberSpec {
  name: string;
  clientPort: number;
  peerPort: number;
  dataDir: string;
  /** --listen-metrics-urls' port, when the cluster was created with `metrics`. */
  metricsPort?: number;
}

/** Which server a member runs: the default is E2E_TARGET's; a test comparing both picks each. */
export type Target = "etcd" | "etcetera";

export class Member {
  proc: ChildProcess | undefined;
  log = "";
  /**
   * Where the current process's output starts in `log` (which keeps every start's). waitReady looks
   * only from here: a restarted member's log holds the previous process's "ready" line, and a wait
   * that matched it returned before the new process listened (found as etcdctl's "context deadline
   * exceeded" right after a restart, when node took 2.7 s to start under load).
   */
  private startOffset = 0;
  private exitWaiters: Array<() => void> = [];

  constructor(
    readonly spec: MemberSpec,
    /** The server's flags (a test starting the same member on another process or data dir reuses them). */
    readonly args: readonly string[],
    /** Environment of every start of this member (a restart too), under `start`'s extraEnv. */
    private readonly env: Record<string, string> = {},
    readonly target: Target = TARGET_ETCD ? "etcd" : "etcetera",
  ) {}

  /** http://127.0.0.1:<metrics port> (undefined unless the cluster was created with `metrics`). */
  get metricsUrl(): string | undefined {
    return this.spec.metricsPort === undefined ? undefined : `http://127.0.0.1:${this.spec.metricsPort}`;
  }

  get clientUrl(): string {
    return `http://127.0.0.1:${this.spec.clientPort}`;
  }
  get endpoint(): string {
    return `127.0.0.1:${this.spec.clientPort}`;
  }

  start(extraEnv: Record<string, string> = {}): void {
    if (this.proc !== undefined) throw new Error(`${this.spec.name} already running`);
    const [cmd, argv] = this.target === "etcd" ? [ETCD_BIN, this.args] : [process.execPath, [SERVER_JS, ...this.args]];
    const proc = spawn(cmd, argv, {
      env: { ...process.env, ...this.env, ...extraEnv },
      stdio: ["ignore", "pipe", "pipe"],
    });
    this.proc = proc;
    this.startOffset = this.log.length;
    const append = (b: Buffer) => {
      this.log += b.toString();
      if (this.log.length > 4_000_000) {
        const dropped = this.log.length - 2_000_000;
        this.log = this.log.slice(dropped);
        this.startOffset = Math.max(0, this.startOffset - dropped);
      }
    };
    proc.stdout?.on("data", append);
    proc.stderr?.on("data", append);
    proc.on("exit", () => {
      this.proc = undefined;
      for (const w of this.exitWaiters.splice(0)) w();
    });
  }

  get running(): boolean {
    return this.proc !== undefined;
  }

  /** Sends a signal and waits for the process to be gone. */
  async kill(signal: NodeJS.Signals = "SIGKILL"): Promise<void> {
    const proc = this.proc;
    if (proc === undefined) return;
    const gone = new Promise<void>((r) => this.exitWaiters.push(r));
    proc.kill(signal);
    await gone;
  }

  async waitReady(timeoutMs = 30_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      // etcd 3.4 with --logger=zap says only "serving client traffic insecurely" (or "securely" with TLS) when it is ready.
      const current = this.log.slice(this.startOffset);
      if (current.includes("ready to serve client requests") || /serving client traffic (in)?securely/.test(current)) return;
      if (this.proc === undefined) throw new Error(`${this.spec.name} exited:\n${this.log.slice(-4000)}`);
      await sleep(50);
    }
    throw new Error(`${this.spec.name} not ready after ${timeoutMs} ms:\n${this.log.slice(-4000)}`);
  }
}

/**
 * etcd's flags for member `s` of a new cluster of `specs` bootstrapped together on loopback
 * (--initial-cluster lists every spec, under `token`): the flags every e2e member starts with,
 * the same for etcd and etcetera.
 */
export function newClusterArgs(s: MemberSpec, specs: readonly MemberSpec[], token: string): string[] {
  const initialCluster = specs.map((x) => `${x.name}=http://127.0.0.1:${x.peerPort}`).join(",");
  return [
    `--name=${s.name}`,
    `--data-dir=${s.dataDir}`,
    `--listen-client-urls=http://127.0.0.1:${s.clientPort}`,
    `--advertise-client-urls=http://127.0.0.1:${s.clientPort}`,
    `--listen-peer-urls=http://127.0.0.1:${s.peerPort}`,
    `--initial-advertise-peer-urls=http://127.0.0.1:${s.peerPort}`,
    `--initial-cluster=${initialCluster}`,
    `--initial-cluster-token=${token}`,
    "--initial-cluster-state=new",
  ];
}

/** The lines of an etcd config file (--config-file) for member `s` of a one-member cluster on loopback. */
export function oneMemberYamlLines(s: MemberSpec): string[] {
  return [
    `name: ${s.name}`,
    `data-dir: ${s.dataDir}`,
    `listen-client-urls: http://127.0.0.1:${s.clientPort}`,
    `advertise-client-urls: http://127.0.0.1:${s.clientPort}`,
    `listen-peer-urls: http://127.0.0.1:${s.peerPort}`,
    `initial-advertise-peer-urls: http://127.0.0.1:${s.peerPort}`,
    `initial-cluster: ${s.name}=http://127.0.0.1:${s.peerPort}`,
  ];
}

/**
 * E2E_ETCETERA_ARGS: flags added to every etcetera member a Cluster creates (space-separated), to
 * run a whole suite in another mode, e.g. `E2E_ETCETERA_ARGS=--experimental-front-ends=2`. etcd
 * members never get them (the flags are etcetera's).
 */
const ETCETERA_EXTRA_ARGS: readonly string[] = (process.env.E2E_ETCETERA_ARGS ?? "").split(" ").filter((a) => a !== "");

export interface ClusterOptions {
  size: number;
  extraArgs?: string[];
  /** Run this server whatever E2E_TARGET says (a test comparing etcetera with etcd starts both). */
  target?: Target;
  /** Give each member a --listen-metrics-urls port too. */
  metrics?: boolean;
}

export class Cluster {
  readonly dir: string;
  readonly members: Member[];

  private constructor(dir: string, members: Member[]) {
    this.dir = dir;
    this.members = members;
  }

  static async create(opts: ClusterOptions): Promise<Cluster> {
    const target = opts.target ?? (TARGET_ETCD ? "etcd" : "etcetera");
    if (target === "etcetera" && !existsSync(SERVER_JS)) throw new Error(`${SERVER_JS} missing: run 'npm run build' first`);
    const dir = mkdtempSync(join(tmpdir(), "etcetera-e2e-"));
    const specs: MemberSpec[] = [];
    for (let i = 1; i <= opts.size; i++) {
      specs.push({
        name: `n${i}`,
        clientPort: await reservePort(),
        peerPort: await reservePort(),
        dataDir: join(dir, `n${i}.etcd`),
        metricsPort: opts.metrics === true ? await reservePort() : undefined,
      });
    }
    const members = specs.map(
      (s) =>
        new Member(s, [
          ...newClusterArgs(s, specs, "e2e-token"),
          "--log-level=info",
          ...(s.metricsPort === undefined ? [] : [`--listen-metrics-urls=http://127.0.0.1:${s.metricsPort}`]),
          ...(opts.extraArgs ?? []),
          ...(target === "etcetera" ? ETCETERA_EXTRA_ARGS : []),
        ], {}, target),
    );
    return new Cluster(dir, members);
  }

  get endpoints(): string {
    return this.members.map((m) => m.endpoint).join(",");
  }

  async start(): Promise<void> {
    for (const m of this.members) m.start();
    await Promise.all(this.members.map((m) => m.waitReady()));
  }

  async stop(signal: NodeJS.Signals = "SIGTERM"): Promise<void> {
    await Promise.all(this.members.map((m) => m.kill(signal)));
  }

  async destroy(): Promise<void> {
    await this.stop("SIGKILL");
    rmSync(this.dir, { recursive: true, force: true });
  }

  /** Dumps member logs (for a failing test's message). */
  logs(): string {
    return this.members.map((m) => `==== ${m.spec.name}\n${m.log.slice(-3000)}`).join("\n");
  }
}

export interface CtlResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs Debian's etcdctl (API v3) against `endpoints`. */
export function etcdctl(endpoints: string, args: string[], input?: string, timeoutMs = 20_000): Promise<CtlResult> {
  return new Promise((res) => {
    const child = execFile(
      ETCDCTL,
      [`--endpoints=${endpoints}`, "--dial-timeout=5s", "--command-timeout=10s", ...args],
      { env: { ...process.env, ETCDCTL_API: "3" }, timeout: timeoutMs, maxBuffer: 64 * 1024 * 1024 },
      (err, stdout, stderr) => {
        const code = err === null ? 0 : typeof err.code === "number" ? err.code : 1;
        res({ code, stdout: stdout.toString(), stderr: stderr.toString() });
      },
    );
    if (input !== undefined) {
      child.stdin?.end(input);
    }
  });
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** Polls `fn` until it returns a value or the deadline passes (for convergence, never for speed). */
export async function eventually<T>(fn: () => Promise<T | undefined>, timeoutMs = 20_000, what = "condition"): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastErr: unknown;
  while (Date.now() < deadline) {
    try {
      const v = await fn();
      if (v !== undefined) return v;
    } catch (e) {
      lastErr = e;
    }
    await sleep(100);
  }
  throw new Error(`timed out waiting for ${what}${lastErr ? `: ${String(lastErr)}` : ""}`);
}
