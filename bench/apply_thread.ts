/**
 * The apply thread of docs/multicore.md ("The design": mvcc and the backend on a worker thread of
 * their own), measured before it is built: what applying committed put entries costs the main
 * thread in place, against handing them to a worker thread that applies them into its own store.
 *
 * - in place: per entry, the raft request decoded, the put applied to the MVCC store (key index,
 *   row cache, the backend's INSERT and its batch commits every 100 ms), the waiting handler's
 *   promise resolved with the revision. What the member's main thread does today.
 * - worker: per batch of entries (a Ready's committed entries), their bytes copied into one
 *   buffer posted (transferred) to a worker thread that decodes and applies them into a store of
 *   its own and answers with each entry's revision (one message per batch); the main thread
 *   resolves the handlers' promises from it. The main thread's part is the hand-off's cost.
 *
 * Each thread's CPU time is read from /proc/thread-self/stat (utime + stime) around the puts:
 * the main thread's in both modes, the worker's in the second. Same entries, same store
 * settings, fresh store per round, rounds alternate. Puts carry --value bytes under 8-byte keys,
 * as the benchmark tool's put rows do. Run `npm run build` first: the worker loads dist/.
 *
 *   npm run build && npx tsx bench/apply_thread.ts [--puts=200000] [--batch=200] [--value=256] [--rounds=3] [--out=FILE]
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import { KvStore } from '../src/mvcc/kvstore.js';
import { decodeRaftRequest, encodeRaftRequest } from '../src/server/raft_request.js';

const ROOT = path.resolve(import.meta.dirname, '..');

function flag(name: string, dflt: number): number {
  const hit = process.argv.find((a) => a.startsWith(`--${name}=`));
  return hit === undefined ? dflt : Number(hit.split('=')[1]);
}
const PUTS = flag('puts', 200_000);
const BATCH = flag('batch', 200);
const VALUE_BYTES = flag('value', 256);
const ROUNDS = flag('rounds', 3);
/** Batches the main thread may have handed over and not yet seen answered (raft keeps committing meanwhile). */
const IN_FLIGHT_MAX = 4;
const OUT = process.argv.find((a) => a.startsWith('--out='))?.slice(6);

const TICK_US = 1e6 / 100; // USER_HZ: /proc counts CPU time in 1/100 s

/** This thread's CPU time so far, µs (utime + stime of /proc/thread-self/stat). */
function threadCpuUs(): number {
  const stat = fs.readFileSync('/proc/thread-self/stat', 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) * TICK_US;
}

/** The raft entries a run applies: puts to sequential 8-byte keys, request ids 1..PUTS. */
function makeEntries(): Buffer[] {
  const value = Buffer.alloc(VALUE_BYTES, 'v');
  const out: Buffer[] = [];
  for (let i = 0; i < PUTS; i++) {
    const key = Buffer.alloc(8);
    key.writeUInt32BE(Math.floor(i / 2 ** 32), 0);
    key.writeUInt32BE(i >>> 0, 4);
    out.push(encodeRaftRequest({ ID: i + 1, put: { key, value, lease: 0, prevKv: false, ignoreValue: false, ignoreLease: false } }));
  }
  return out;
}

/** The handlers waiting on their request ids (the member's wait registry, reduced to what resolving costs). */
class Waiters {
  private readonly pending = new Map<number, (rev: number) => void>();
  resolved = 0;
  register(id: number): void {
    void new Promise<number>((resolve) => this.pending.set(id, resolve)).then(() => this.resolved++);
  }
  trigger(id: number, rev: number): void {
    const w = this.pending.get(id)!;
    this.pending.delete(id);
    w(rev);
  }
}

const yieldToLoop = (): Promise<void> => new Promise((res) => setImmediate(res));

interface RoundResult {
  mainUs: number;
  workerUs: number;
  wallMs: number;
}

async function inPlace(entries: Buffer[], dir: string): Promise<RoundResult> {
  const store = KvStore.open({ path: path.join(dir, 'inplace.sqlite') });
  const waiters = new Waiters();
  for (let i = 0; i < entries.length; i++) waiters.register(i + 1);
  const t0 = performance.now();
  const cpu0 = threadCpuUs();
  for (let first = 0; first < entries.length; first += BATCH) {
    const end = Math.min(first + BATCH, entries.length);
    for (let i = first; i < end; i++) {
      const req = decodeRaftRequest(entries[i]!);
      const r = store.apply(i + 1, 1, { put: req.put });
      if (r === null) throw new Error(`entry ${i + 1} not applied`);
      waiters.trigger(req.ID, r.revision);
    }
    await yieldToLoop(); // the next Ready: timers (the backend's batch commit) run between
  }
  store.backend.forceCommit();
  await yieldToLoop();
  const mainUs = threadCpuUs() - cpu0;
  const wallMs = performance.now() - t0;
  if (waiters.resolved !== entries.length) throw new Error(`in place: ${waiters.resolved} of ${entries.length} resolved`);
  store.close();
  return { mainUs, workerUs: 0, wallMs };
}

const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const fs = require('node:fs');
function cpuUs() {
  const stat = fs.readFileSync('/proc/thread-self/stat', 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(f[11]) + Number(f[12])) * ${TICK_US};
}
(async () => {
  const { KvStore } = await import(workerData.kvstore);
  const { decodeRaftRequest } = await import(workerData.raftRequest);
  const store = KvStore.open({ path: workerData.path });
  let cpu0 = 0;
  parentPort.on('message', (m) => {
    if (m.kind === 'start') { cpu0 = cpuUs(); return; }
    if (m.kind === 'stop') {
      store.backend.forceCommit();
      const us = cpuUs() - cpu0;
      store.close();
      parentPort.postMessage({ kind: 'stopped', us });
      return;
    }
    const buf = Buffer.from(m.buf);
    const offsets = new Uint32Array(m.offsets);
    const n = offsets.length - 1;
    const answer = new Float64Array(2 * n);
    for (let i = 0; i < n; i++) {
      const req = decodeRaftRequest(buf.subarray(offsets[i], offsets[i + 1]));
      const r = store.apply(m.firstIndex + i, 1, { put: req.put });
      answer[2 * i] = req.ID;
      answer[2 * i + 1] = r.revision;
    }
    parentPort.postMessage({ kind: 'applied', answer: answer.buffer }, [answer.buffer]);
  });
  parentPort.postMessage({ kind: 'ready' });
})();
`;

async function onWorker(entries: Buffer[], dir: string): Promise<RoundResult> {
  const worker = new Worker(WORKER_SOURCE, {
    eval: true,
    workerData: {
      path: path.join(dir, 'worker.sqlite'),
      kvstore: pathToFileURL(path.join(ROOT, 'dist/mvcc/kvstore.js')).href,
      raftRequest: pathToFileURL(path.join(ROOT, 'dist/server/raft_request.js')).href,
    },
  });
  const waiters = new Waiters();
  for (let i = 0; i < entries.length; i++) waiters.register(i + 1);
  let inFlight = 0;
  let wake: (() => void) | undefined;
  let stopped: ((us: number) => void) | undefined;
  const ready = new Promise<void>((resolve) => {
    worker.on('message', (m: { kind: string; answer?: ArrayBuffer; us?: number }) => {
      if (m.kind === 'ready') resolve();
      else if (m.kind === 'applied') {
        const a = new Float64Array(m.answer!);
        for (let i = 0; i < a.length; i += 2) waiters.trigger(a[i]!, a[i + 1]!);
        inFlight--;
        wake?.();
      } else if (m.kind === 'stopped') stopped?.(m.us!);
    });
  });
  worker.on('error', (err) => {
    throw err;
  });
  await ready;
  worker.postMessage({ kind: 'start' });
  const t0 = performance.now();
  const cpu0 = threadCpuUs();
  for (let first = 0; first < entries.length; first += BATCH) {
    const end = Math.min(first + BATCH, entries.length);
    let bytes = 0;
    for (let i = first; i < end; i++) bytes += entries[i]!.length;
    const buf = new ArrayBuffer(bytes);
    const view = Buffer.from(buf);
    const offsets = new Uint32Array(end - first + 1);
    let at = 0;
    for (let i = first; i < end; i++) {
      offsets[i - first] = at;
      at += entries[i]!.copy(view, at);
    }
    offsets[end - first] = at;
    worker.postMessage({ kind: 'apply', firstIndex: first + 1, buf, offsets: offsets.buffer }, [buf, offsets.buffer]);
    inFlight++;
    while (inFlight >= IN_FLIGHT_MAX) await new Promise<void>((res) => (wake = res));
    await yieldToLoop();
  }
  while (inFlight > 0) await new Promise<void>((res) => (wake = res));
  await yieldToLoop();
  const mainUs = threadCpuUs() - cpu0;
  const wallMs = performance.now() - t0;
  const workerUs = await new Promise<number>((resolve) => {
    stopped = resolve;
    worker.postMessage({ kind: 'stop' });
  });
  await worker.terminate();
  if (waiters.resolved !== entries.length) throw new Error(`worker: ${waiters.resolved} of ${entries.length} resolved`);
  return { mainUs, workerUs, wallMs };
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

async function main(): Promise<void> {
  if (!fs.existsSync(path.join(ROOT, 'dist/mvcc/kvstore.js'))) throw new Error('dist/ is missing: run npm run build first');
  const entries = makeEntries();
  const lines: string[] = [];
  const say = (s: string): void => {
    console.log(s);
    lines.push(s);
  };
  say(`apply thread hand-off: ${PUTS} puts (8-byte keys, ${VALUE_BYTES}-byte values), batches of ${BATCH}, ${ROUNDS} rounds, node ${process.version}, ${os.cpus().length} cpus`);
  const results: Record<'inPlace' | 'worker', RoundResult[]> = { inPlace: [], worker: [] };
  for (let round = 0; round < ROUNDS; round++) {
    const order = round % 2 === 0 ? (['inPlace', 'worker'] as const) : (['worker', 'inPlace'] as const);
    for (const mode of order) {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'apply-thread-'));
      try {
        const r = mode === 'inPlace' ? await inPlace(entries, dir) : await onWorker(entries, dir);
        results[mode].push(r);
        say(`round ${round + 1} ${mode}: main ${(r.mainUs / PUTS).toFixed(2)} µs/put, worker ${(r.workerUs / PUTS).toFixed(2)} µs/put, ${Math.round(PUTS / (r.wallMs / 1000))} puts/s`);
      } finally {
        fs.rmSync(dir, { recursive: true, force: true });
      }
    }
  }
  const main = (mode: 'inPlace' | 'worker') => median(results[mode].map((r) => r.mainUs / PUTS));
  const worker = median(results.worker.map((r) => r.workerUs / PUTS));
  say(`median main thread: in place ${main('inPlace').toFixed(2)} µs/put, with the apply worker ${main('worker').toFixed(2)} µs/put (the hand-off); the worker ${worker.toFixed(2)} µs/put`);
  if (OUT !== undefined) fs.writeFileSync(OUT, `${lines.join('\n')}\n`);
}

await main();
