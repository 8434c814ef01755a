/**
 * Forced garbage collection in a server under test, so leak checks compare what the process keeps
 * alive. etcetera: members start with gc_preload.mjs (NODE_OPTIONS=--import) and collect on
 * SIGUSR2. etcd (E2E_TARGET=etcd): --enable-pprof, and /debug/pprof/heap?gc=1 runs runtime.GC().
 */
import { join } from "node:path";
import { type Cluster, type Member, TARGET_ETCD, sleep } from "../e2e/harness.js";
import { type MemorySample, rssKiB } from "./rss.js";
import { liveMemoryKiB } from "./server_memory.js";

const PRELOAD = join(import.meta.dirname, "gc_preload.mjs");

/** Extra member flags for Cluster.create (etcd needs pprof for a forced GC). */
export function gcControlArgs(): string[] {
  return TARGET_ETCD ? ["--enable-pprof"] : [];
}

/** Starts the cluster's members with the GC hook (instead of cluster.start()). */
export async function startWithGcControl(cluster: Cluster): Promise<void> {
  for (const m of cluster.members) m.start(TARGET_ETCD ? {} : { NODE_OPTIONS: `--import ${PRELOAD}` });
  await Promise.all(cluster.members.map((m) => m.waitReady()));
}

/** Runs full collections in the member and resolves once they are done. */
export async function forceGc(m: Member): Promise<void> {
  if (TARGET_ETCD) {
    const res = await fetch(`${m.clientUrl}/debug/pprof/heap?gc=1`, { signal: AbortSignal.timeout(30_000) });
    await res.arrayBuffer();
    return;
  }
  const before = (m.log.match(/fuzz-gc-done \d+/g) ?? []).length;
  const pid = m.proc?.pid;
  if (pid === undefined) throw new Error(`${m.spec.name} is not running`);
  process.kill(pid, "SIGUSR2");
  const deadline = Date.now() + 30_000;
  while ((m.log.match(/fuzz-gc-done \d+/g) ?? []).length === before) {
    if (Date.now() > deadline) throw new Error(`${m.spec.name}: no forced GC within 30 s (is gc_preload.mjs loaded?)`);
    await sleep(20);
  }
  // Let freed pages go back to the kernel before RSS is read.
  await sleep(200);
}

/** RSS and live set of a member after forced full collections. */
export async function sampleAfterGc(m: Member): Promise<MemorySample> {
  await forceGc(m);
  const pid = m.proc?.pid;
  if (pid === undefined) throw new Error(`${m.spec.name} is not running`);
  return { rssKiB: rssKiB(pid), liveKiB: await liveMemoryKiB(m.endpoint) };
}
