/**
 * WAL benchmark: appends/s and fdatasyncs/s with 1, 10, 100 and 1,000 concurrent proposers of
 * 256-byte entries (each proposer: save one entry, await durability, repeat), beside the raw
 * fdatasync latency of this machine (one 256-byte write + fdatasync, sequentially), which bounds
 * what a single proposer can reach. With group commit, fsyncs/s stays near the raw limit while
 * appends/s grows with concurrency.
 *
 *   npx tsx bench/wal.ts [--seconds 3] [--segment-mb 64] [--dir /tmp] [--concurrency 1,10,100,1000]
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { EntryType } from "../src/raft/types.js";
import { WAL } from "../src/wal/wal.js";

function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && process.argv[i + 1] !== undefined ? process.argv[i + 1]! : fallback;
}

const seconds = Number(arg("seconds", "3"));
const segmentSizeBytes = Number(arg("segment-mb", "64")) * 1024 * 1024;
const baseDir = arg("dir", os.tmpdir());
const levels = arg("concurrency", "1,10,100,1000").split(",").map(Number);
const ENTRY_BYTES = 256;

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))]!;
}

async function rawFdatasync(dir: string): Promise<{ count: number; avgMs: number; p50Ms: number; p99Ms: number }> {
  const file = path.join(dir, "raw-fdatasync.bin");
  const fh = await fs.promises.open(file, "w+");
  const size = 16 * 1024 * 1024;
  await fh.write(Buffer.alloc(size), 0, size, 0); // preallocated, as WAL segments are
  await fh.datasync();
  const buf = Buffer.alloc(ENTRY_BYTES, 7);
  const lat: number[] = [];
  const end = performance.now() + seconds * 1000;
  let off = 0;
  while (performance.now() < end) {
    const t0 = performance.now();
    await fh.write(buf, 0, buf.length, off);
    await fh.datasync();
    lat.push(performance.now() - t0);
    off = (off + ENTRY_BYTES) % size;
  }
  await fh.close();
  fs.rmSync(file);
  lat.sort((a, b) => a - b);
  return { count: lat.length, avgMs: lat.reduce((s, x) => s + x, 0) / lat.length, p50Ms: percentile(lat, 0.5), p99Ms: percentile(lat, 0.99) };
}

interface Row {
  proposers: number;
  appends: number;
  syncs: number;
  elapsedS: number;
  p50Ms: number;
  p99Ms: number;
}

async function runLevel(dir: string, proposers: number): Promise<Row> {
  const walDir = path.join(dir, `wal-${proposers}`);
  const wal = await WAL.create(walDir, { memberId: 1n, clusterId: 1n }, { segmentSizeBytes });
  const data = new Uint8Array(ENTRY_BYTES).fill(42);
  let next = 1;
  const lat: number[] = [];
  const start = performance.now();
  const end = start + seconds * 1000;
  const statsBefore = { ...wal.stats };
  const proposer = async (): Promise<void> => {
    while (performance.now() < end) {
      const t0 = performance.now();
      await wal.save(undefined, [{ index: next++, term: 1, type: EntryType.Normal, data }]);
      lat.push(performance.now() - t0);
    }
  };
  await Promise.all(Array.from({ length: proposers }, proposer));
  const elapsedS = (performance.now() - start) / 1000;
  const row: Row = {
    proposers,
    appends: wal.stats.entries - statsBefore.entries,
    syncs: wal.stats.syncs - statsBefore.syncs,
    elapsedS,
    p50Ms: 0,
    p99Ms: 0,
  };
  await wal.close();
  lat.sort((a, b) => a - b);
  row.p50Ms = percentile(lat, 0.5);
  row.p99Ms = percentile(lat, 0.99);
  // Sanity: everything acknowledged is there.
  const r = await WAL.open(walDir, { index: 0, term: 0 }, { segmentSizeBytes });
  if (r.entries.length !== row.appends) throw new Error(`replayed ${r.entries.length} entries, acknowledged ${row.appends}`);
  await r.wal.close();
  fs.rmSync(walDir, { recursive: true, force: true });
  return row;
}

async function main(): Promise<void> {
  const dir = fs.mkdtempSync(path.join(baseDir, "etcetera-walbench-"));
  try {
    console.log(`WAL benchmark: ${ENTRY_BYTES}-byte entries, ${seconds} s per level, segments ${segmentSizeBytes / 1024 / 1024} MiB, dir ${dir}`);
    console.log(`node ${process.version}, ${os.cpus().length} CPUs, load average ${os.loadavg().map((l) => l.toFixed(2)).join(" ")}`);
    const raw = await rawFdatasync(dir);
    console.log(
      `raw fdatasync (256-byte write + fdatasync): ${(raw.count / seconds).toFixed(0)}/s, avg ${raw.avgMs.toFixed(3)} ms, p50 ${raw.p50Ms.toFixed(3)} ms, p99 ${raw.p99Ms.toFixed(3)} ms`,
    );
    console.log("");
    const header = ["proposers", "appends/s", "fsyncs/s", "entries/fsync", "save p50 ms", "save p99 ms"];
    console.log(header.map((h) => h.padStart(15)).join(""));
    for (const p of levels) {
      const r = await runLevel(dir, p);
      const cells = [
        String(r.proposers),
        (r.appends / r.elapsedS).toFixed(0),
        (r.syncs / r.elapsedS).toFixed(0),
        (r.appends / Math.max(1, r.syncs)).toFixed(1),
        r.p50Ms.toFixed(3),
        r.p99Ms.toFixed(3),
      ];
      console.log(cells.map((c) => c.padStart(15)).join(""));
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
