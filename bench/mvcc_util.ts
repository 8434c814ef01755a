/** Helpers for the mvcc benchmarks: flags, forced GC, temp dirs, percentiles. */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import v8 from 'node:v8';
import vm from 'node:vm';

export const FULL = process.argv.includes('--full');

/** `--name=value` integer flag, else the default (full or quick). */
export function intFlag(name: string, quick: number, full: number): number {
  const hit = process.argv.find((a) => a.startsWith(`--${name}=`));
  return hit !== undefined ? Number(hit.split('=')[1]) : FULL ? full : quick;
}

v8.setFlagsFromString('--expose-gc');
const gcFn = vm.runInNewContext('gc') as () => void;

/** Heap used after full garbage collections. */
export function heapUsed(): number {
  for (let i = 0; i < 3; i++) gcFn();
  return process.memoryUsage().heapUsed;
}

export function tmpDir(): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), 'mvcc-bench-'));
}

export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

export function fmtUs(ms: number): string {
  return `${(ms * 1000).toFixed(1)} µs`;
}

export function key(i: number): Buffer {
  return Buffer.from(`key${String(i).padStart(10, '0')}`);
}
