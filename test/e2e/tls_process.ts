/**
 * Helpers of the TLS suites: run the target (etcetera or, with E2E_TARGET=etcd, real etcd) to its
 * exit, and a single member's flags on free loopback ports.
 */
import { spawn } from "node:child_process";
import { ETCD_BIN } from "../binaries.js";
import { reservePort } from "../ports.js";
import { SERVER_JS, TARGET_ETCD } from "./harness.js";

export interface Exited {
  code: number | null;
  log: string;
}

/** Starts the target with `args` and `env` and waits for it to exit (killed after `timeoutMs`: a refusal must be quick). */
export function runToExit(args: string[], env: Record<string, string> = {}, opts: { timeoutMs?: number; etceteraOnly?: boolean } = {}): Promise<Exited> {
  const timeoutMs = opts.timeoutMs ?? 15_000;
  const [cmd, argv] = TARGET_ETCD && opts.etceteraOnly !== true ? [ETCD_BIN, args] : [process.execPath, [SERVER_JS, ...args]];
  return new Promise((resolve) => {
    const proc = spawn(cmd, argv, { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
    let log = "";
    proc.stdout.on("data", (b: Buffer) => (log += b.toString()));
    proc.stderr.on("data", (b: Buffer) => (log += b.toString()));
    const timer = setTimeout(() => proc.kill("SIGKILL"), timeoutMs);
    proc.on("exit", (code) => {
      clearTimeout(timer);
      resolve({ code, log });
    });
  });
}

/** Flags of a single member on free ports, with the given schemes for its client and peer URLs. */
export async function singleMemberArgs(dataDir: string, clientScheme = "http", peerScheme = "http"): Promise<{ args: string[]; clientPort: number; peerPort: number }> {
  const clientPort = await reservePort();
  const peerPort = await reservePort();
  const client = `${clientScheme}://127.0.0.1:${clientPort}`;
  const peer = `${peerScheme}://127.0.0.1:${peerPort}`;
  return {
    clientPort,
    peerPort,
    args: [
      "--name=s1",
      `--data-dir=${dataDir}`,
      `--listen-client-urls=${client}`,
      `--advertise-client-urls=${client}`,
      `--listen-peer-urls=${peer}`,
      `--initial-advertise-peer-urls=${peer}`,
      `--initial-cluster=s1=${peer}`,
      "--logger=zap",
    ],
  };
}

export interface TlsClusterMember {
  readonly name: string;
  readonly clientPort: number;
  readonly peerPort: number;
  readonly dataDir: string;
  /** The member's flags, without its TLS flags (the test adds those per member). */
  readonly args: string[];
}

/** Flags of an `n`-member cluster on free ports: https:// peer URLs, http:// client URLs. */
export async function peerTlsCluster(dir: string, n: number, token: string, clientScheme = "http"): Promise<TlsClusterMember[]> {
  const specs: { name: string; clientPort: number; peerPort: number }[] = [];
  for (let i = 1; i <= n; i++) specs.push({ name: `n${i}`, clientPort: await reservePort(), peerPort: await reservePort() });
  const initialCluster = specs.map((s) => `${s.name}=https://127.0.0.1:${s.peerPort}`).join(",");
  return specs.map((s) => ({
    ...s,
    dataDir: `${dir}/${s.name}.etcd`,
    args: [
      `--name=${s.name}`,
      `--data-dir=${dir}/${s.name}.etcd`,
      `--listen-client-urls=${clientScheme}://127.0.0.1:${s.clientPort}`,
      `--advertise-client-urls=${clientScheme}://127.0.0.1:${s.clientPort}`,
      `--listen-peer-urls=https://127.0.0.1:${s.peerPort}`,
      `--initial-advertise-peer-urls=https://127.0.0.1:${s.peerPort}`,
      `--initial-cluster=${initialCluster}`,
      `--initial-cluster-token=${token}`,
      "--initial-cluster-state=new",
      "--logger=zap",
    ],
  }));
}
