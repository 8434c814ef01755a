/**
 * Is the load generator the bottleneck? Runs one benchmark command against one 3-member cluster
 * with 1..N worker threads (interleaved over rounds) and prints requests/s per worker count,
 * plus the generator's own CPU seconds per 1,000 requests. When adding workers no longer
 * raises requests/s, the figure is the server's, not the generator's.
 *
 *   npx tsx bench/compare/workers.ts [--target=etcd|etcetera] [--max-workers=4] [--rounds=2] -- \
 *       --conns=100 --clients=1000 range foo --consistency=s --total=50000
 */
import { spawn } from "node:child_process";
import { join } from "node:path";
import { Conn } from "../benchmark/conn.js";
import type { BenchmarkJson } from "../benchmark/main.js";
import { METHODS, encodePut } from "../benchmark/proto.js";
import { BenchCluster, ROOT, type Target } from "./cluster.js";
import { hasLeader } from "./ready.js";
import { median } from "./summary.js";

interface Sample {
  workers: number;
  rps: number;
  p99Ms: number;
  cpuSecPer1k: number;
}

/** One run of the generator; its JSON carries its own CPU time (process.cpuUsage, all threads). */
function runOnce(endpoints: string[], workers: number, args: string[]): Promise<Sample> {
  return new Promise((res, rej) => {
    const argv = ["--import", "tsx", join(ROOT, "bench/benchmark/main.ts"), `--endpoints=${endpoints.join(",")}`, "--json", "--progress=false", `--workers=${workers}`, ...args];
    const child = spawn(process.execPath, argv, { cwd: ROOT, stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    let err = "";
    child.stdout.on("data", (b: Buffer) => (out += b.toString()));
    child.stderr.on("data", (b: Buffer) => (err += b.toString()));
    child.on("exit", (code) => {
      const line = out.split("\n").find((l) => l.startsWith("{"));
      if (code !== 0 || line === undefined) return rej(new Error(`benchmark exited ${code}: ${err.slice(-500)}`));
      const j = JSON.parse(line) as BenchmarkJson;
      const s = j.series[0];
      if (s === undefined) return rej(new Error("no series"));
      res({ workers, rps: s.rps, p99Ms: s.p99Sec * 1000, cpuSecPer1k: (j.generatorCpuSec / Math.max(1, s.count)) * 1000 });
    });
  });
}

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  const sep = argv.indexOf("--");
  const own = sep < 0 ? argv : argv.slice(0, sep);
  const benchArgs = sep < 0 ? ["--conns=100", "--clients=1000", "range", "foo", "--consistency=s", "--total=50000"] : argv.slice(sep + 1);
  let target: Target = "etcd";
  let maxWorkers = 4;
  let rounds = 2;
  for (const a of own) {
    const [k, v = ""] = a.split("=", 2) as [string, string?];
    if (k === "--target" && (v === "etcd" || v === "etcetera")) target = v;
    else if (k === "--max-workers") maxWorkers = Number(v);
    else if (k === "--rounds") rounds = Number(v);
    else throw new Error(`unknown option ${a}`);
  }
  const cluster = await BenchCluster.create({ target, size: 3 });
  try {
    await cluster.start(30_000, hasLeader);
    const c = new Conn(cluster.endpoints);
    await c.waitReady(10_000);
    await c.unary(METHODS.put, encodePut(Buffer.from("foo"), Buffer.alloc(256, 0x61)));
    c.close();
    const samples: Sample[] = [];
    for (let r = 0; r < rounds; r++) {
      const order = Array.from({ length: maxWorkers }, (_, i) => (r % 2 === 0 ? i + 1 : maxWorkers - i));
      for (const w of order) {
        const s = await runOnce(cluster.endpoints, w, benchArgs);
        samples.push(s);
        process.stderr.write(`[workers] round ${r + 1} workers=${w}: ${Math.round(s.rps)} req/s p99 ${s.p99Ms.toFixed(1)} ms, generator ${s.cpuSecPer1k.toFixed(3)} CPU s per 1k requests\n`);
      }
    }
    process.stdout.write(`${target}: benchmark ${benchArgs.join(" ")}\n| workers | median req/s | median p99 ms | generator CPU s / 1k req |\n|---:|---:|---:|---:|\n`);
    for (let w = 1; w <= maxWorkers; w++) {
      const mine = samples.filter((s) => s.workers === w);
      process.stdout.write(`| ${w} | ${Math.round(median(mine.map((s) => s.rps))).toLocaleString("en-US")} | ${median(mine.map((s) => s.p99Ms)).toFixed(1)} | ${median(mine.map((s) => s.cpuSecPer1k)).toFixed(3)} |\n`);
    }
  } finally {
    await cluster.destroy();
  }
}

main().then(
  () => process.exit(0),
  (e: unknown) => {
    process.stderr.write(`workers: ${e instanceof Error ? e.message : String(e)}\n`);
    process.exit(1);
  },
);
