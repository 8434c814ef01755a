/**
 * A real etcd 3.4 (Debian's /usr/bin/etcd) on free loopback ports, for the bbolt/etcd-format
 * tests: it writes the snapshots our reader must read, and serves the data dirs restored from
 * the snapshots our writer makes.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { join } from "node:path";
import { etcdctl, eventually, type CtlResult } from "../e2e/harness.js";
import { ETCD_BIN } from "../binaries.js";
import { reservePort } from "../ports.js";

export class RealEtcd {
  readonly name: string;
  readonly dataDir: string;
  readonly clientPort: number;
  readonly peerPort: number;
  log = "";
  private proc: ChildProcess | undefined;

  private constructor(name: string, dataDir: string, clientPort: number, peerPort: number) {
    this.name = name;
    this.dataDir = dataDir;
    this.clientPort = clientPort;
    this.peerPort = peerPort;
  }

  /** Ports are picked now, so a data dir can be restored for this member before it starts. */
  static async create(dir: string, name = "n1"): Promise<RealEtcd> {
    return new RealEtcd(name, join(dir, `${name}.etcd`), await reservePort(), await reservePort());
  }

  get endpoint(): string {
    return `127.0.0.1:${this.clientPort}`;
  }

  get peerUrl(): string {
    return `http://127.0.0.1:${this.peerPort}`;
  }

  /** The flags `etcdctl snapshot restore` needs to make this member's data dir. */
  restoreFlags(): string[] {
    return [
      `--name=${this.name}`,
      `--data-dir=${this.dataDir}`,
      `--initial-cluster=${this.name}=${this.peerUrl}`,
      `--initial-advertise-peer-urls=${this.peerUrl}`,
    ];
  }

  async start(extraArgs: readonly string[] = []): Promise<void> {
    const proc = spawn(
      ETCD_BIN,
      [
        `--name=${this.name}`,
        `--data-dir=${this.dataDir}`,
        `--listen-client-urls=http://127.0.0.1:${this.clientPort}`,
        `--advertise-client-urls=http://127.0.0.1:${this.clientPort}`,
        `--listen-peer-urls=${this.peerUrl}`,
        `--initial-advertise-peer-urls=${this.peerUrl}`,
        `--initial-cluster=${this.name}=${this.peerUrl}`,
        ...extraArgs,
      ],
      { stdio: ["ignore", "pipe", "pipe"] },
    );
    this.proc = proc;
    const append = (b: Buffer): void => {
      this.log = (this.log + b.toString()).slice(-200_000);
    };
    proc.stdout?.on("data", append);
    proc.stderr?.on("data", append);
    proc.on("exit", () => {
      if (this.proc === proc) this.proc = undefined;
    });
    await eventually(
      async () => {
        if (this.proc === undefined) throw new Error(`etcd exited:\n${this.log.slice(-3000)}`);
        const r = await this.ctl(["endpoint", "health"]);
        return r.code === 0 ? true : undefined;
      },
      30_000,
      `etcd ${this.name} healthy`,
    );
  }

  ctl(args: string[]): Promise<CtlResult> {
    return etcdctl(this.endpoint, args);
  }

  /** etcdctl that must succeed; returns stdout. */
  async ok(args: string[]): Promise<string> {
    const r = await this.ctl(args);
    if (r.code !== 0) throw new Error(`etcdctl ${args.join(" ")} failed (${r.code}): ${r.stderr}`);
    return r.stdout;
  }

  async stop(): Promise<void> {
    const proc = this.proc;
    if (!proc) return;
    await new Promise<void>((resolve) => {
      proc.once("exit", () => resolve());
      proc.kill("SIGTERM");
    });
    this.proc = undefined;
  }
}

/** etcdctl without endpoints (snapshot status / restore work on files). */
export function etcdctlLocal(args: string[]): Promise<CtlResult> {
  return etcdctl("127.0.0.1:1", args);
}
