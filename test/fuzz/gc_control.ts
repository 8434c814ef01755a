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

/**
 * Runs full collections in the member and resolves once they are done, with the bytes of V8's new
 * space the member then holds committed (0 for etcd, whose Go heap has no such reserve).
 */
export async function forceGc(m: Member): Promise<number> {
  if (TARGET_ETCD) {
    const res = await fetch(`${m.clientUrl}/debug/pprof/heap?gc=1`, { signal: AbortSignal.timeout(30_000) });
    await res.arrayBuffer();
    return 0;
  }
  const markers = () => [...m.log.matchAll(/fuzz-gc-done \d+ new-space (\d+)/g)];
  const before = markers().length;
  const pid = m.proc?.pid;
  if (pid === undefined) throw new Error(`${m.spec.name} is not running`);
  process.kill(pid, "SIGUSR2");
  const deadline = Date.now() + 30_000;
  let seen = markers();
  while (seen.length === before) {
    if (Date.now() > deadline) throw new Error(`${m.spec.name}: no forced GC within 30 s (is gc_preload.mjs loaded?)`);
    await sleep(20);
    seen = markers();
  }
  // Let freed pages go back to the kernel before RSS is read.
  await sleep(200);
  return Number(seen[seen.length - 1]![1]);
}

/**
 * RSS and live set of a member after forced full collections. The RSS leaves out V8's new space:
 * its size is V8's sizing of the young generation under load (it doubles to 32 MB and stays), not
 * something the member keeps alive, while a leak survives the collections into the old generation
 * or external memory and still counts.
 */
export async function sampleAfterGc(m: Member): Promise<MemorySample> {
  const newSpaceBytes = await forceGc(m);
  const pid = m.proc?.pid;
  if (pid === undefined) throw new Error(`${m.spec.name} is not running`);
  return { rssKiB: rssKiB(pid) - Math.round(newSpaceBytes / 1024), liveKiB: await liveMemoryKiB(m.endpoint) };
}
