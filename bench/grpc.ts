/**
 * Benchmark of the gRPC transport (issue 5): the same trivial Range handler
 * served by the node:http2 server and by @grpc/grpc-js (through the adapter,
 * same codecs), each in its own child process, driven by the bench/lib load
 * driver (grpc-js clients over worker_threads) at 1, 100 and 1,000 clients.
 * Reports requests/s and server CPU per request (process.cpuUsage of the
 * child), alternating the two servers round by round and taking the median
 * of the per-round ratios.
 *
 *   npx tsx bench/grpc.ts [--rounds 3] [--duration-ms 4000] [--warmup-ms 1500] [--workers 2] [--levels 1:1,100:10,1000:100]
 */

import { type ChildProcess, fork } from "node:child_process";
import { fileURLToPath } from "node:url";
import { loadEtcdCodecs } from "../src/grpc/protos.js";
import type { ServerKind, ServerMessage } from "./grpc-server.js";
import { runLoad } from "./lib/load.js";

interface Args {
  rounds: number;
  durationMs: number;
  warmupMs: number;
  workers: number;
  levels: { clients: number; connections: number }[];
}

function parseArgs(argv: string[]): Args {
  const get = (name: string, fallback: string): string => {
    const i = argv.indexOf(`--${name}`);
    return i >= 0 && argv[i + 1] ? argv[i + 1]! : fallback;
  };
  return {
    rounds: Number(get("rounds", "3")),
    durationMs: Number(get("duration-ms", "4000")),
    warmupMs: Number(get("warmup-ms", "1500")),
    workers: Number(get("workers", "2")),
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

async function measure(kind: ServerKind, level: Args["levels"][number], args: Args, request: Uint8Array): Promise<Sample> {
  const server = await ServerProcess.start(kind);
  try {
    let cpuStart: Promise<number> | undefined;
    const result = await runLoad({
      target: `127.0.0.1:${server.port}`,
      path: "/etcdserverpb.KV/Range",
      request,
      clients: level.clients,
      connections: level.connections,
      workers: args.workers,
      warmupMs: args.warmupMs,
      durationMs: args.durationMs,
      onMeasure: () => (cpuStart = server.cpuUs()),
    });
    const cpuEnd = await server.cpuUs();
    const cpuUs = cpuEnd - (await cpuStart!);
    return {
      rps: result.requestsPerSecond,
      cpuUsPerRequest: result.requests > 0 ? cpuUs / result.requests : NaN,
      p50Us: result.latency.quantileUs(0.5),
      p99Us: result.latency.quantileUs(0.99),
      errors: result.errors,
    };
  } finally {
    await server.stop();
  }
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

const fmt = (n: number, digits = 0): string => n.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits });

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  const request = loadEtcdCodecs()
    .message("etcdserverpb.RangeRequest")
    .encode({ key: Buffer.from("foo"), serializable: true });
  console.log(
    `gRPC transport benchmark: serializable Range from a constant; ${args.rounds} alternating rounds, ` +
      `${args.warmupMs} ms warm-up + ${args.durationMs} ms measured each; driver: grpc-js clients on ${args.workers} worker threads`,
  );
  const rows: string[] = [];
  for (const level of args.levels) {
    const samples: Record<ServerKind, Sample[]> = { http2: [], "grpc-js": [] };
    const rpsRatios: number[] = [];
    const cpuRatios: number[] = [];
    for (let round = 0; round < args.rounds; round++) {
      // Alternate which server goes first, so drift in the machine's load hits both alike.
      const order: ServerKind[] = round % 2 === 0 ? ["http2", "grpc-js"] : ["grpc-js", "http2"];
      const got: Partial<Record<ServerKind, Sample>> = {};
      for (const kind of order) {
        got[kind] = await measure(kind, level, args, request);
        samples[kind].push(got[kind]!);
        const s = got[kind]!;
        console.log(
          `  clients=${level.clients} conns=${level.connections} round ${round + 1} ${kind.padEnd(7)}: ` +
            `${fmt(s.rps)} req/s, ${fmt(s.cpuUsPerRequest, 1)} µs CPU/req, p50 ${fmt(s.p50Us / 1000, 2)} ms, p99 ${fmt(s.p99Us / 1000, 2)} ms` +
            (s.errors ? `, ${s.errors} errors` : ""),
        );
      }
      rpsRatios.push(got.http2!.rps / got["grpc-js"]!.rps);
      cpuRatios.push(got.http2!.cpuUsPerRequest / got["grpc-js"]!.cpuUsPerRequest);
    }
    const h = samples.http2;
    const g = samples["grpc-js"];
    rows.push(
      `| ${fmt(level.clients).padStart(5)} | ${String(level.connections).padStart(5)} | ` +
        `${fmt(median(h.map((s) => s.rps))).padStart(8)} | ${fmt(median(h.map((s) => s.cpuUsPerRequest)), 1).padStart(6)} | ` +
        `${fmt(median(g.map((s) => s.rps))).padStart(8)} | ${fmt(median(g.map((s) => s.cpuUsPerRequest)), 1).padStart(6)} | ` +
        `${fmt(median(rpsRatios), 2).padStart(5)}× | ${fmt(median(cpuRatios), 2).padStart(5)}× |`,
    );
  }
  console.log("\nmedians (ratio = node:http2 / grpc-js, median of same-round ratios)");
  console.log("| clients | conns | http2 req/s | http2 µs CPU/req | grpc-js req/s | grpc-js µs CPU/req | req/s ratio | CPU/req ratio |");
  console.log("|---|---|---|---|---|---|---|---|");
  for (const r of rows) console.log(r);
}

void main();
