/**
 * A local cluster for benchmarks: real etcd (Debian's /usr/bin/etcd) or etcetera
 * (`node dist/server.js`) started with the same etcd flags as test/e2e/harness.ts, on free
 * loopback ports, each member in its own temporary data dir. Exposes the member PIDs so that
 * RSS can be read from /proc.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { ETCD_BIN } from "../../test/binaries.js";
import { reservePort } from "../../test/ports.js";

export const ROOT = resolve(import.meta.dirname, "../..");
export { ETCD_BIN, ETCDCTL_BIN } from "../../test/binaries.js";
export const SERVER_JS = join(ROOT, "dist/server.js");

export type Target = "etcd" | "etcetera";
export const TARGETS: readonly Target[] = ["etcd", "etcetera"];

/** Reads a "VmXxx:   1234 kB" line of /proc/PID/status, in bytes; undefined when gone. */
export function procStatusBytes(pid: number, field: "VmHWM" | "VmRSS"): number | undefined {
  try {
    const m = new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return m ? Number(m[1]) * 1024 : undefined;
  } catch {
    return undefined;
  }
}

export interface MemberProc {
  name: string;
  clientUrl: string;
  endpoint: string;
  proc: ChildProcess | undefined;
  log: string;
}

export interface ClusterOptions {
  target: Target;
  size: number;
  /** Extra flags for every member (same for both targets). */
  extraArgs?: string[];
  /** Node flags for etcetera members (e.g. --cpu-prof). */
  nodeArgs?: string[];
  /** Another build's dist/server.js (an A/B comparison of two builds: cpu_per_put.ts). */
  serverJs?: string;
  /** Extra environment for every member (e.g. an ETCETERA_* knob to compare). */
  env?: Record<string, string>;
}

const LOG_KEEP_CHARS = 200_000;

export class BenchCluster {
  private constructor(
    readonly target: Target,
    readonly dir: string,
    readonly members: MemberProc[],
    private readonly argv: string[][],
    private readonly nodeArgs: string[],
    private readonly serverJs: string,
    private readonly env: Record<string, string>,
  ) {}

  static async create(opts: ClusterOptions): Promise<BenchCluster> {
    const serverJs = opts.serverJs ?? SERVER_JS;
    if (opts.target === "etcetera" && !existsSync(serverJs)) throw new Error(`${serverJs} missing: run 'npm run build' first`);
    if (opts.target === "etcd" && !existsSync(ETCD_BIN)) throw new Error(`${ETCD_BIN} missing: apt-get install etcd-server`);
    const dir = mkdtempSync(join(tmpdir(), `etcetera-bench-${opts.target}-`));
    const specs: Array<{ name: string; client: number; peer: number }> = [];
    for (let i = 1; i <= opts.size; i++) specs.push({ name: `n${i}`, client: await reservePort(), peer: await reservePort() });
    const initialCluster = specs.map((s) => `${s.name}=http://127.0.0.1:${s.peer}`).join(",");
    const argv = specs.map((s) => [
      `--name=${s.name}`,
      `--data-dir=${join(dir, `${s.name}.etcd`)}`,
      `--listen-client-urls=http://127.0.0.1:${s.client}`,
      `--advertise-client-urls=http://127.0.0.1:${s.client}`,
      `--listen-peer-urls=http://127.0.0.1:${s.peer}`,
      `--initial-advertise-peer-urls=http://127.0.0.1:${s.peer}`,
      `--initial-cluster=${initialCluster}`,
      "--initial-cluster-token=bench-token",
      "--initial-cluster-state=new",
      "--log-level=warn",
      ...(opts.extraArgs ?? []),
    ]);
    const members = specs.map((s) => ({
      name: s.name,
      clientUrl: `http://127.0.0.1:${s.client}`,
      endpoint: `127.0.0.1:${s.client}`,
      proc: undefined,
      log: "",
    }));
    return new BenchCluster(opts.target, dir, members, argv, opts.nodeArgs ?? [], serverJs, opts.env ?? {});
  }

  get endpoints(): string[] {
    return this.members.map((m) => m.endpoint);
  }

  pids(): number[] {
    return this.members.map((m) => m.proc?.pid ?? 0);
  }

  /** Starts every member and waits until each answers gRPC health (a put-free Status). */
  async start(readyTimeoutMs = 30_000, isReady: (endpoint: string) => Promise<boolean>): Promise<void> {
    this.members.forEach((_, i) => this.startMember(i));
    const deadline = Date.now() + readyTimeoutMs;
    for (const m of this.members) {
      for (;;) {
        if (m.proc === undefined) throw new Error(`${this.target} ${m.name} exited during start:\n${m.log.slice(-3000)}`);
        if (await isReady(m.endpoint).catch(() => false)) break;
        if (Date.now() > deadline) throw new Error(`${this.target} ${m.name} not ready after ${readyTimeoutMs} ms:\n${m.log.slice(-3000)}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  }

  /** Starts member `i` (again, after killMember: the same flags and data dir). */
  startMember(i: number): void {
    const m = this.members[i] as MemberProc;
    if (m.proc !== undefined) throw new Error(`${this.target} ${m.name} is running`);
    const args = this.argv[i] as string[];
    const [cmd, full] = this.target === "etcd" ? [ETCD_BIN, args] : [process.execPath, [...this.nodeArgs, this.serverJs, ...args]];
    const proc = spawn(cmd, full, { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, ...this.env } });
    m.proc = proc;
    const append = (b: Buffer) => {
      m.log += b.toString();
      if (m.log.length > LOG_KEEP_CHARS * 2) m.log = m.log.slice(-LOG_KEEP_CHARS);
    };
    proc.stdout?.on("data", append);
    proc.stderr?.on("data", append);
    proc.on("exit", () => (m.proc = undefined));
  }

  /** SIGKILLs member `i` and waits for it to be gone. */
  async killMember(i: number): Promise<void> {
    const p = this.members[i]?.proc;
    if (p === undefined) return;
    const gone = new Promise<void>((r) => p.once("exit", () => r()));
    p.kill("SIGKILL");
    await gone;
  }

  /** Member `i`'s standard output from now on (e.g. V8's --trace-gc-nvp lines), while it runs. */
  onStdout(i: number, listener: (chunk: Buffer) => void): void {
    this.members[i]?.proc?.stdout?.on("data", listener);
  }

  /** Peak RSS (VmHWM) per member, bytes; 0 for a member that is gone. */
  peakRss(): number[] {
    return this.pids().map((pid) => (pid > 0 ? (procStatusBytes(pid, "VmHWM") ?? 0) : 0));
  }

  /** Current RSS (VmRSS) per member, bytes. */
  rss(): number[] {
    return this.pids().map((pid) => (pid > 0 ? (procStatusBytes(pid, "VmRSS") ?? 0) : 0));
  }

  async stop(): Promise<void> {
    await Promise.all(this.members.map((_, i) => this.killMember(i)));
  }

  async destroy(): Promise<void> {
    await this.stop();
    rmSync(this.dir, { recursive: true, force: true });
  }

  logs(): string {
    return this.members.map((m) => `==== ${m.name}\n${m.log.slice(-3000)}`).join("\n");
  }
}
