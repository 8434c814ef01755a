/**
 * What a server process keeps alive, read from its own /metrics: for etcetera (Node) the V8 heap in
 * use plus external memory (Buffers), for etcd (Go) the heap bytes allocated. Sampled often, the
 * minimum over a window approximates the live set after a collection: garbage cannot raise a
 * minimum, a leak does. Much less noisy than RSS, which moves with V8's heap sizing by tens of MiB.
 */

const NODE_METRICS = ["nodejs_heap_size_used_bytes", "nodejs_external_memory_bytes"];
const GO_METRICS = ["go_memstats_heap_alloc_bytes"];

function metricValue(text: string, name: string): number | undefined {
  const m = new RegExp(`^${name} (\\S+)$`, "m").exec(text);
  return m === null ? undefined : Number(m[1]);
}

/** The live-memory figure of the server at `endpoint` in KiB (heap used + external, or Go heap alloc). */
export async function liveMemoryKiB(endpoint: string): Promise<number> {
  const res = await fetch(`http://${endpoint}/metrics`, { signal: AbortSignal.timeout(10_000) });
  const text = await res.text();
  const node = NODE_METRICS.map((n) => metricValue(text, n));
  if (node.every((v) => v !== undefined)) return Math.round((node[0]! + node[1]!) / 1024);
  const go = metricValue(text, GO_METRICS[0]!);
  if (go !== undefined) return Math.round(go / 1024);
  throw new Error(`no heap metrics at http://${endpoint}/metrics`);
}

/** A gauge from /metrics (e.g. etcd_debugging_mvcc_watcher_total), or undefined when not exported. */
export async function metricGauge(endpoint: string, name: string): Promise<number | undefined> {
  const res = await fetch(`http://${endpoint}/metrics`, { signal: AbortSignal.timeout(10_000) });
  return metricValue(await res.text(), name);
}
