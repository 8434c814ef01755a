/**
 * Benchmark of the gRPC transport (issue 5): the same trivial Range handler
 * served, each in its own child process, by
 *   - http2                our node:http2 server (src/grpc/server.ts),
 *   - grpc-js-protoloader  a plain @grpc/grpc-js server with @grpc/proto-loader
 *                          (protobufjs) serialization, as grpc-js servers are written,
 *   - grpc-js              @grpc/grpc-js through our adapter with OUR compiled codecs
 *                          (the strongest grpc-js baseline: only the transport differs),
 * driven by the bench/lib load driver (worker_threads) at 1, 100 and 1,000
 * clients. Reports requests/s, server CPU per request (process.cpuUsage of the
 * child) and how busy each side was (CPU cores used during the windows).
 *
 * CPU pinning (default when taskset exists and ≥2 CPUs are available): the
 * server child runs on one CPU, the driver (this process and its worker
 * threads) on the others, so a server's throughput is bounded by its own CPU
 * cost rather than by how much of a shared core the generator leaves it.
 *
 * The machine is small and shared, so its load drifts by the second. All
 * servers and loads therefore run for the whole level, and the measured time
 * is cut into short windows that rotate between them (the other loads paused,
 * their in-flight requests drained during a settle time): drift hits all
 * alike, and the totals over all windows are compared.
 *
 * At the largest level, a driver-headroom check serves http2 to two loads that
 * differ only by one more worker thread: if the driver were the bottleneck,
 * the extra worker would raise throughput (when it has a CPU to run on).
 *
 *   npx tsx bench/grpc.ts [--windows 6] [--window-ms 2000] [--settle-ms 500] [--warmup-ms 1500]
 *                         [--workers 2] [--levels 1:1,100:10,1000:100] [--driver grpc-js|h2|raw]
 *                         [--pin auto|off|0/1] [--headroom on|off]
 *
 * --driver h2 swaps the grpc-js clients for bare node:http2 requests, --driver raw
 * for raw HTTP/2 frames (bench/lib/raw-grpc-client.ts): lighter drivers, so the
 * same driver CPU pushes a server harder. The driver-cores column says whether
 * the driver had CPU to spare (pinned: 1.00 = its CPU was full).
 */

import { type ChildProcess, fork } from "node:child_process";
import os from "node:os";
import { fileURLToPath } from "node:url";
import { loadEtcdCodecs } from "../src/pb/protos.js";
import { SERVER_KINDS, type ServerKind, type ServerMessage } from "./grpc-server.js";
import { type CpuPlan, allowedCpus, pinSelf, planCpus } from "./lib/cpu-pinning.js";
import { Load, type LoadDriver } from "./lib/load.js";

interface Level {
  clients: number;
  connections: number;
}

interface Args {
  windows: number;
  windowMs: number;
  settleMs: number;
  warmupMs: number;
  workers: number;
  driver: LoadDriver;
  levels: Level[];
  pin: string;
  headroom: boolean;
}

function parseDriver(name: string): LoadDriver {
  if (name === "grpc-js" || name === "h2" || name === "raw") return name;
  throw new Error(`--driver ${name}: expected grpc-js, h2 or raw`);
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
    driver: parseDriver(get("driver", "grpc-js")),
    levels: get("levels", "1:1,100:10,1000:100")
      .split(",")
      .map((pair) => {
        const [clients, connections] = pair.split(":").map(Number);
        return { clients: clients!, connections: connections! };
      }),
    pin: get("pin", "auto"),
    headroom: get("headroom", "on") !== "off",
  };
}

interface Sample {
  rps: number;
  cpuUsPerRequest: number;
  /** CPU cores the server used during its windows (1.0 = one core busy all the time). */
  serverCores: number;
  /** CPU cores the driver used during the same windows. */
  driverCores: number;
  p50Us: number;
  p99Us: number;
  errors: number;
  firstError: string | undefined;
}

class ServerProcess {
  private constructor(
    private readonly child: ChildProcess,
    readonly port: number,
  ) {}

  static start(kind: ServerKind, plan: CpuPlan | undefined): Promise<ServerProcess> {
    const module = fileURLToPath(new URL("./grpc-server.ts", import.meta.url));
    // Pinned from birth: taskset execs node, so every thread the server creates inherits the CPU list.
    const child = plan
      ? fork(module, [kind], { stdio: "inherit", execPath: plan.taskset, execArgv: ["-c", plan.server, process.execPath, ...process.execArgv] })
      : fork(module, [kind], { stdio: "inherit" });
    return new Promise((resolve, reject) => {
      child.once("error", reject);
      child.once("exit", (code) => reject(new Error(`${kind} server exited with ${code}`)));
      child.once("message", (m: ServerMessage) => {
        if (m.kind === "listening") resolve(new ServerProcess(child, m.port));
      });
    });
  }

  /** The CPUs the server process may run on, as the kernel reports it. */
  cpus(): string {
    return allowedCpus(this.child.pid!);
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
      this.child.removeAllListeners("exit");
      this.child.once("exit", () => resolve());
      this.child.send({ kind: "exit" });
    });
  }
}

const DRIVER_NAMES: Record<LoadDriver, string> = { "grpc-js": "grpc-js", h2: "bare node:http2", raw: "raw HTTP/2 frame" };
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const driverCpuUs = (): number => {
  const u = process.cpuUsage();
  return u.user + u.system;
};

/** One server and the load aimed at it, measured in rotation with the others. */
interface Contender {
  label: string;
  kind: ServerKind;
  workers: number;
}

/** Measures the contenders at one client level, in rotating windows. */
async function measureLevel(level: Level, contenders: Contender[], args: Args, plan: CpuPlan | undefined, request: Uint8Array): Promise<Sample[]> {
  const servers: ServerProcess[] = [];
  const loads: Load[] = [];
  try {
    for (const c of contenders) servers.push(await ServerProcess.start(c.kind, plan));
    if (plan) {
      for (const s of servers) if (s.cpus() !== plan.server) throw new Error(`server pinned to ${s.cpus()}, expected ${plan.server}`);
    }
    for (let i = 0; i < contenders.length; i++) {
      const load = await Load.start({
        target: `127.0.0.1:${servers[i]!.port}`,
        path: "/etcdserverpb.KV/Range",
        request,
        clients: level.clients,
        connections: level.connections,
        workers: contenders[i]!.workers,
        driver: args.driver,
      });
      load.pause();
      loads.push(load);
    }
    for (const load of loads) {
      load.resume();
      await sleep(args.warmupMs);
      load.pause();
      load.measure();
      load.count(false);
    }
    const n = contenders.length;
    const serverUs = new Array<number>(n).fill(0);
    const driverUs = new Array<number>(n).fill(0);
    const ms = new Array<number>(n).fill(0);
    for (let w = 0; w < args.windows; w++) {
      for (let k = 0; k < n; k++) {
        const i = (w + k) % n;
        loads[i]!.resume();
        await sleep(args.settleMs);
        const server0 = await servers[i]!.cpuUs();
        const driver0 = driverCpuUs();
        const t0 = performance.now();
        loads[i]!.count(true);
        await sleep(args.windowMs);
        loads[i]!.count(false);
        ms[i]! += performance.now() - t0;
        driverUs[i]! += driverCpuUs() - driver0;
        serverUs[i]! += (await servers[i]!.cpuUs()) - server0;
        loads[i]!.pause();
      }
    }
    const out: Sample[] = [];
    for (let i = 0; i < n; i++) {
      const result = await loads[i]!.stop(ms[i]!);
      out.push({
        rps: result.requestsPerSecond,
        cpuUsPerRequest: result.requests > 0 ? serverUs[i]! / result.requests : NaN,
        serverCores: serverUs[i]! / (ms[i]! * 1000),
        driverCores: driverUs[i]! / (ms[i]! * 1000),
        p50Us: result.latency.quantileUs(0.5),
        p99Us: result.latency.quantileUs(0.99),
        errors: result.errors,
        firstError: result.firstError,
      });
    }
    return out;
  } finally {
    for (const s of servers) await s.stop();
  }
}

const fmt = (n: number, digits = 0): string => n.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits });
const ratio = (a: number, b: number): string => `${fmt(a / b, 2)}×`;

function describeSample(label: string, s: Sample): string {
  return (
    `${label.padEnd(20)}: ${fmt(s.rps).padStart(7)} req/s, ${fmt(s.cpuUsPerRequest, 1).padStart(6)} µs CPU/req, ` +
    `server ${fmt(s.serverCores, 2)} cores, driver ${fmt(s.driverCores, 2)} cores, ` +
    `p50 ${fmt(s.p50Us / 1000, 2)} ms, p99 ${fmt(s.p99Us / 1000, 2)} ms` +
    (s.errors ? `, ${s.errors} errors (first: ${s.firstError})` : "")
  );
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  const plan = planCpus(args.pin);
  if (plan) pinSelf(plan);
  const request = loadEtcdCodecs()
    .message("etcdserverpb.RangeRequest")
    .encode({ key: Buffer.from("foo"), serializable: true });
  console.log(`command: npx tsx bench/grpc.ts ${process.argv.slice(2).join(" ")}`.trimEnd());
  console.log(
    `gRPC transport benchmark: serializable Range from a constant; per level ${args.windows} rotating ` +
      `${args.windowMs} ms windows per server (${args.settleMs} ms settle, ${args.warmupMs} ms warm-up); ` +
      `driver: ${DRIVER_NAMES[args.driver]} clients on ${args.workers} worker threads`,
  );
  console.log(
    plan
      ? `CPU pinning (${plan.taskset}): servers on CPU ${plan.server}, driver (main + worker threads) on CPU ${allowedCpus("self")}`
      : `CPU pinning: off (servers and driver share CPUs ${allowedCpus("self")})`,
  );
  const contenders: Contender[] = SERVER_KINDS.map((kind) => ({ label: kind, kind, workers: args.workers }));
  const samples: Sample[][] = [];
  for (const level of args.levels) {
    const load0 = os.loadavg()[0]!;
    const got = await measureLevel(level, contenders, args, plan, request);
    samples.push(got);
    // Other work on the machine takes CPU from both sides; the 1-minute load average says how much was going on.
    console.log(`clients=${level.clients} conns=${level.connections} (load average ${fmt(load0, 2)} before, ${fmt(os.loadavg()[0]!, 2)} after)`);
    for (let i = 0; i < contenders.length; i++) console.log(`  ${describeSample(contenders[i]!.label, got[i]!)}`);
  }

  const kindIndex = (k: ServerKind): number => SERVER_KINDS.indexOf(k);
  console.log("\nper server (totals over the rotating windows; cores = CPU time / wall time)");
  console.log("| clients | conns | server | req/s | µs CPU/req | req per server CPU-s | server cores | driver cores | p50 ms | p99 ms |");
  console.log("|---|---|---|---|---|---|---|---|---|---|");
  args.levels.forEach((level, li) => {
    contenders.forEach((c, i) => {
      const s = samples[li]![i]!;
      console.log(
        `| ${fmt(level.clients)} | ${level.connections} | ${c.label} | ${fmt(s.rps)} | ${fmt(s.cpuUsPerRequest, 1)} | ${fmt(1e6 / s.cpuUsPerRequest)} | ` +
          `${fmt(s.serverCores, 2)} | ${fmt(s.driverCores, 2)} | ${fmt(s.p50Us / 1000, 2)} | ${fmt(s.p99Us / 1000, 2)} |`,
      );
    });
  });
  console.log("\nratios = http2 / baseline over the same rotating windows (CPU/req: lower is better)");
  console.log("| clients | conns | req/s vs grpc-js-protoloader | CPU/req vs grpc-js-protoloader | req/s vs grpc-js (our codecs) | CPU/req vs grpc-js (our codecs) |");
  console.log("|---|---|---|---|---|---|");
  args.levels.forEach((level, li) => {
    const h = samples[li]![kindIndex("http2")]!;
    const p = samples[li]![kindIndex("grpc-js-protoloader")]!;
    const g = samples[li]![kindIndex("grpc-js")]!;
    console.log(
      `| ${fmt(level.clients)} | ${level.connections} | ${ratio(h.rps, p.rps)} | ${ratio(h.cpuUsPerRequest, p.cpuUsPerRequest)} | ` +
        `${ratio(h.rps, g.rps)} | ${ratio(h.cpuUsPerRequest, g.cpuUsPerRequest)} |`,
    );
  });

  if (args.headroom) {
    const top = args.levels[args.levels.length - 1]!;
    const pair: Contender[] = [
      { label: `http2, ${args.workers} workers`, kind: "http2", workers: args.workers },
      { label: `http2, ${args.workers + 1} workers`, kind: "http2", workers: args.workers + 1 },
    ];
    const [a, b] = await measureLevel(top, pair, args, plan, request);
    console.log(`\ndriver headroom at clients=${top.clients} conns=${top.connections} (same server kind, one more driver worker):`);
    console.log(`  ${describeSample(pair[0]!.label, a!)}`);
    console.log(`  ${describeSample(pair[1]!.label, b!)}`);
    console.log(`  req/s with one more worker: ${ratio(b!.rps, a!.rps)}`);
  }
}

void main();
