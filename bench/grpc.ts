/**
 * Benchmark of the gRPC transport (issue 5): the same trivial Range handler
 * served by the node:http2 server and by @grpc/grpc-js (through the adapter,
 * same codecs), each in its own child process, driven by the bench/lib load
 * driver (grpc-js clients over worker_threads) at 1, 100 and 1,000 clients.
 * Reports requests/s and server CPU per request (process.cpuUsage of the
 * child).
 *
 * The machine is small and shared, so its load drifts by the second. Both
 * servers and both loads therefore run for the whole level, and the measured
 * time is cut into short windows that alternate between them (the other
 * load paused, its in-flight requests drained during a settle time): drift
 * hits both alike, and the totals over all windows are compared.
 *
 *   npx tsx bench/grpc.ts [--windows 6] [--window-ms 2000] [--settle-ms 500] [--warmup-ms 1500]
 *                         [--workers 2] [--levels 1:1,100:10,1000:100] [--driver grpc-js|h2]
 *
 * --driver h2 swaps the grpc-js clients for bare node:http2 requests: a lighter
 * driver that leaves more of the two cores to the server under test.
 */

import { type ChildProcess, fork } from "node:child_process";
import { fileURLToPath } from "node:url";
import { loadEtcdCodecs } from "../src/grpc/protos.js";
import type { ServerKind, ServerMessage } from "./grpc-server.js";
import { Load } from "./lib/load.js";

interface Args {
  windows: number;
  windowMs: number;
  settleMs: number;
  warmupMs: number;
  workers: number;
  driver: "grpc-js" | "h2";
  levels: { clients: number; connections: number }[];
}

function parseArgs(argv: string[]): Args {
  const get = (name: string, fallback: string): string => {
    const i = argv.indexOf(`--${name}`);
    return i >= 0 && argv[i + 1] ? argv[i + 1]! : fallback;
  };
  return {
    windows: Number(get("windows", "6")),
    windowMs: Number(get("window-ms", "2000")),
    settleMs: Number(get("settle-ms", "500")),
    warmupMs: Number(get("warmup-ms", "1500")),
    workers: Number(get("workers", "2")),
    driver: get("driver", "grpc-js") === "h2" ? "h2" : "grpc-js",
    levels: get("levels", "1:1,100:10,1000:100")
      .split(",")
      .map((pair) => {
        const [clients, connections] = pair.split(":").map(Number);
        return { clients: clients!, connections: connections! };
      }),
  };
}

interface Sample {
  rps: number;
  cpuUsPerRequest: number;
  p50Us: number;
  p99Us: number;
  errors: number;
}

class ServerProcess {
  private constructor(
    private readonly child: ChildProcess,
    readonly port: number,
  ) {}

  static start(kind: ServerKind): Promise<ServerProcess> {
    const child = fork(fileURLToPath(new URL("./grpc-server.ts", import.meta.url)), [kind], { stdio: "inherit" });
    return new Promise((resolve, reject) => {
      child.once("error", reject);
      child.once("message", (m: ServerMessage) => {
        if (m.kind === "listening") resolve(new ServerProcess(child, m.port));
      });
    });
  }

  cpuUs(): Promise<number> {
    return new Promise((resolve) => {
      const onMessage = (m: ServerMessage): void => {
        if (m.kind !== "cpu") return;
        this.child.off("message", onMessage);
        resolve(m.userUs + m.systemUs);
      };
      this.child.on("message", onMessage);
      this.child.send({ kind: "cpu" });
    });
  }

  stop(): Promise<void> {
    return new Promise((resolve) => {
      this.child.once("exit", () => resolve());
      this.child.send({ kind: "exit" });
    });
  }
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const KINDS: ServerKind[] = ["http2", "grpc-js"];

/** Measures both servers at one client level, in alternating windows. */
async function measureLevel(level: Args["levels"][number], args: Args, request: Uint8Array): Promise<Record<ServerKind, Sample>> {
  const servers = {} as Record<ServerKind, ServerProcess>;
  const loads = {} as Record<ServerKind, Load>;
  try {
    for (const kind of KINDS) servers[kind] = await ServerProcess.start(kind);
    for (const kind of KINDS) {
      loads[kind] = await Load.start({
        target: `127.0.0.1:${servers[kind].port}`,
        path: "/etcdserverpb.KV/Range",
        request,
        clients: level.clients,
        connections: level.connections,
        workers: args.workers,
        driver: args.driver,
      });
      loads[kind].pause();
    }
    for (const kind of KINDS) {
      loads[kind].resume();
      await sleep(args.warmupMs);
      loads[kind].pause();
      loads[kind].measure();
      loads[kind].count(false);
    }
    const cpuUs = { http2: 0, "grpc-js": 0 };
    const ms = { http2: 0, "grpc-js": 0 };
    for (let w = 0; w < args.windows; w++) {
      const order = w % 2 === 0 ? KINDS : [...KINDS].reverse();
      for (const kind of order) {
        loads[kind].resume();
        await sleep(args.settleMs);
        const cpu0 = await servers[kind].cpuUs();
        const t0 = performance.now();
        loads[kind].count(true);
        await sleep(args.windowMs);
        loads[kind].count(false);
        ms[kind] += performance.now() - t0;
        cpuUs[kind] += (await servers[kind].cpuUs()) - cpu0;
        loads[kind].pause();
      }
    }
    const out = {} as Record<ServerKind, Sample>;
    for (const kind of KINDS) {
      const result = await loads[kind].stop(ms[kind]);
      out[kind] = {
        rps: result.requestsPerSecond,
        cpuUsPerRequest: result.requests > 0 ? cpuUs[kind] / result.requests : NaN,
        p50Us: result.latency.quantileUs(0.5),
        p99Us: result.latency.quantileUs(0.99),
        errors: result.errors,
      };
    }
    return out;
  } finally {
    for (const kind of KINDS) await servers[kind]?.stop();
  }
}

const fmt = (n: number, digits = 0): string => n.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits });

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  const request = loadEtcdCodecs()
    .message("etcdserverpb.RangeRequest")
    .encode({ key: Buffer.from("foo"), serializable: true });
  console.log(
    `gRPC transport benchmark: serializable Range from a constant; per level ${args.windows} alternating ` +
      `${args.windowMs} ms windows per server (${args.settleMs} ms settle, ${args.warmupMs} ms warm-up); ` +
      `driver: ${args.driver === "h2" ? "bare node:http2" : "grpc-js"} clients on ${args.workers} worker threads`,
  );
  const rows: string[] = [];
  for (const level of args.levels) {
    const got = await measureLevel(level, args, request);
    for (const kind of KINDS) {
      const s = got[kind];
      console.log(
        `  clients=${level.clients} conns=${level.connections} ${kind.padEnd(7)}: ` +
          `${fmt(s.rps)} req/s, ${fmt(s.cpuUsPerRequest, 1)} µs CPU/req, p50 ${fmt(s.p50Us / 1000, 2)} ms, p99 ${fmt(s.p99Us / 1000, 2)} ms` +
          (s.errors ? `, ${s.errors} errors` : ""),
      );
    }
    const h = got.http2;
    const g = got["grpc-js"];
    rows.push(
      `| ${fmt(level.clients).padStart(5)} | ${String(level.connections).padStart(5)} | ` +
        `${fmt(h.rps).padStart(8)} | ${fmt(h.cpuUsPerRequest, 1).padStart(6)} | ` +
        `${fmt(g.rps).padStart(8)} | ${fmt(g.cpuUsPerRequest, 1).padStart(6)} | ` +
        `${fmt(h.rps / g.rps, 2).padStart(5)}× | ${fmt(h.cpuUsPerRequest / g.cpuUsPerRequest, 2).padStart(5)}× |`,
    );
  }
  console.log("\nratio = node:http2 / grpc-js over the same alternating windows");
  console.log("| clients | conns | http2 req/s | http2 µs CPU/req | grpc-js req/s | grpc-js µs CPU/req | req/s ratio | CPU/req ratio |");
  console.log("|---|---|---|---|---|---|---|---|");
  for (const r of rows) console.log(r);
}

void main();
