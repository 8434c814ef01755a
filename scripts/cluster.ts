/**
 * A local three-member cluster in the foreground, like etcd's Procfile under goreman:
 *
 *   npx tsx scripts/cluster.ts [--data-root DIR] [--fresh] [--server dist/server.js] [-- extra member flags]
 *
 * Members infra1..infra3 listen for clients on 127.0.0.1:2379, :22379, :32379 and for peers on
 * 127.0.0.1:2380, :22380, :32380; their data lives in DIR/infraN.etcd (default ./cluster.etcd).
 * Every output line is prefixed with the member's name. Ctrl-C or SIGTERM stops all members
 * (SIGTERM, then SIGKILL after a grace period). A member that exits on its own is reported and the
 * others keep running, so failures can be explored; the script ends when all have exited.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { rmSync } from "node:fs";
import * as path from "node:path";
import * as readline from "node:readline";
import { pathToFileURL } from "node:url";

export interface ClusterMember {
  name: string;
  clientUrl: string;
  peerUrl: string;
  dataDir: string;
  /** Arguments after `node <server>`. */
  args: string[];
}

export interface ClusterOptions {
  /** Folder holding the members' data dirs. */
  dataRoot: string;
  /** Flags appended to every member's command line. */
  extraArgs: readonly string[];
  token: string;
}

export const CLUSTER_PORTS: ReadonlyArray<{ client: number; peer: number }> = [
  { client: 2379, peer: 2380 },
  { client: 22379, peer: 22380 },
  { client: 32379, peer: 32380 },
];

/** The members' command lines. Pure: the unit tests check it parses as a valid etcd config. */
export function buildClusterMembers(options: ClusterOptions): ClusterMember[] {
  const members = CLUSTER_PORTS.map((p, i) => ({
    name: `infra${i + 1}`,
    clientUrl: `http://127.0.0.1:${p.client}`,
    peerUrl: `http://127.0.0.1:${p.peer}`,
    dataDir: path.join(options.dataRoot, `infra${i + 1}.etcd`),
  }));
  const initialCluster = members.map((m) => `${m.name}=${m.peerUrl}`).join(",");
  return members.map((m) => ({
    ...m,
    args: [
      "--name", m.name,
      "--data-dir", m.dataDir,
      "--listen-client-urls", m.clientUrl,
      "--advertise-client-urls", m.clientUrl,
      "--listen-peer-urls", m.peerUrl,
      "--initial-advertise-peer-urls", m.peerUrl,
      "--initial-cluster-token", options.token,
      "--initial-cluster", initialCluster,
      "--initial-cluster-state", "new",
      ...options.extraArgs,
    ],
  }));
}

export interface ScriptArgs {
  dataRoot: string;
  fresh: boolean;
  server: string;
  extraArgs: string[];
}

/** Parses this script's own arguments; everything after `--` goes to every member. */
export function parseScriptArgs(argv: readonly string[]): ScriptArgs {
  const out: ScriptArgs = { dataRoot: "cluster.etcd", fresh: false, server: "dist/server.js", extraArgs: [] };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    const value = (): string => {
      const v = argv[++i];
      if (v === undefined) throw new Error(`${a} needs a value`);
      return v;
    };
    if (a === "--") {
      out.extraArgs = argv.slice(i + 1);
      break;
    } else if (a === "--data-root") out.dataRoot = value();
    else if (a === "--server") out.server = value();
    else if (a === "--fresh") out.fresh = true;
    else throw new Error(`unknown argument ${a} (usage: cluster.ts [--data-root DIR] [--fresh] [--server FILE] [-- member flags])`);
  }
  return out;
}

const COLORS = ["\x1b[36m", "\x1b[33m", "\x1b[35m"];
const RESET = "\x1b[0m";
const STOP_GRACE_MS = 10_000;

function prefixLines(child: ChildProcess, label: string): void {
  for (const stream of [child.stdout, child.stderr]) {
    if (stream === null) continue;
    readline.createInterface({ input: stream }).on("line", (line) => process.stdout.write(`${label} | ${line}\n`));
  }
}

function main(): void {
  const opts = parseScriptArgs(process.argv.slice(2));
  if (opts.fresh) rmSync(opts.dataRoot, { recursive: true, force: true });
  const members = buildClusterMembers({ dataRoot: opts.dataRoot, extraArgs: opts.extraArgs, token: "etcd-cluster-1" });
  const running = new Map<string, ChildProcess>();
  let stopping = false;
  const width = Math.max(...members.map((m) => m.name.length));
  members.forEach((m, i) => {
    const color = process.stdout.isTTY ? COLORS[i % COLORS.length]! : "";
    const label = `${color}${m.name.padEnd(width)}${color === "" ? "" : RESET}`;
    const child = spawn(process.execPath, [opts.server, ...m.args], { stdio: ["ignore", "pipe", "pipe"] });
    running.set(m.name, child);
    prefixLines(child, label);
    process.stdout.write(`${label} | started pid ${child.pid}: node ${opts.server} ${m.args.join(" ")}\n`);
    // "close", not "exit": "exit" can come before the member's last output lines are read from
    // its pipes, and ending the script then loses them (seen as a missing "bye" line under load).
    child.on("close", (code, signal) => {
      running.delete(m.name);
      process.stdout.write(`${label} | exited (${signal ?? `code ${code}`})\n`);
      if (running.size === 0) process.exit(stopping ? 0 : 1);
    });
  });
  const stopAll = (): void => {
    if (stopping) return;
    stopping = true;
    process.stdout.write("stopping all members\n");
    for (const child of running.values()) child.kill("SIGTERM");
    setTimeout(() => {
      for (const child of running.values()) child.kill("SIGKILL");
    }, STOP_GRACE_MS).unref();
  };
  process.on("SIGINT", stopAll);
  process.on("SIGTERM", stopAll);
  process.stdout.write(
    `cluster up: etcdctl --endpoints=${members.map((m) => m.clientUrl.replace("http://", "")).join(",")} endpoint status -w table\n`,
  );
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  try {
    main();
  } catch (e) {
    process.stderr.write(`${(e as Error).message}\n`);
    process.exit(2);
  }
}
