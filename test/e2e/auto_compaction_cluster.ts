/**
 * The cluster of the auto-compaction suites (periodic and revision mode): three members with fast
 * elections and zap's JSON log (the suites read the compactor's log lines), and the compaction
 * state each member reports through HashKV.
 */
import { Cluster, eventually } from "./harness.js";
import { ctlOk } from "./ops_helpers.js";

/** A started three-member cluster with `--auto-compaction-mode=<mode>` and the given retention. */
export async function autoCompactingCluster(mode: "periodic" | "revision", retention: string): Promise<Cluster> {
  const cluster = await Cluster.create({
    size: 3,
    extraArgs: ["--heartbeat-interval=50", "--election-timeout=500", "--logger=zap", `--auto-compaction-mode=${mode}`, `--auto-compaction-retention=${retention}`],
  });
  await cluster.start();
  return cluster;
}

/** The compact revision and current revision one member reports (HashKV's header and compact_revision). */
export async function compactState(cluster: Cluster, endpoint: string): Promise<{ compactRevision: number; revision: number }> {
  const out = JSON.parse(await ctlOk(cluster, endpoint, "endpoint", "hashkv", "-w", "json")) as Array<{
    HashKV: { header: { revision: number }; compact_revision?: number };
  }>;
  const h = out[0]!.HashKV;
  return { compactRevision: h.compact_revision ?? 0, revision: h.header.revision };
}

/** Waits until every member reports `revision` as its compact revision. */
export async function compactedOnEveryMember(cluster: Cluster, revision: number, timeoutMs: number, what: string): Promise<void> {
  await eventually(
    async () => {
      for (const m of cluster.members) if ((await compactState(cluster, m.endpoint)).compactRevision !== revision) return undefined;
      return true;
    },
    timeoutMs,
    what,
  );
}
