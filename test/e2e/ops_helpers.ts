/**
 * Helpers of the operations suites (auto-compaction, lease checkpoints, corruption checks,
 * force-new-cluster, defrag): etcdctl that must succeed, and the leader as every running member
 * reports it.
 */
import { etcdctl, eventually, type Cluster, type Member } from "./harness.js";

/** etcdctl that must exit 0; the failure message carries the members' logs. */
export async function ctlOk(cluster: Cluster, endpoints: string, ...args: string[]): Promise<string> {
  const r = await etcdctl(endpoints, args);
  if (r.code !== 0) throw new Error(`etcdctl ${args.join(" ")} failed (${r.code}): ${r.stderr}\n${cluster.logs()}`);
  return r.stdout;
}

export interface EndpointStatus {
  endpoint: string;
  /** Hex member id (the simple format keeps it exact). */
  id: string;
  isLeader: boolean;
  raftTerm: number;
  dbSize: string;
}

/** `etcdctl endpoint status` of the given members (simple format). */
export async function endpointStatus(cluster: Cluster, members: readonly Member[]): Promise<EndpointStatus[]> {
  const out = await ctlOk(cluster, members.map((m) => m.endpoint).join(","), "endpoint", "status");
  return out
    .trim()
    .split("\n")
    .map((line) => {
      const f = line.split(", ");
      return { endpoint: f[0]!, id: f[1]!, dbSize: f[3]!, isLeader: f[4] === "true", raftTerm: Number(f[6]) };
    });
}

/** The running member every running member agrees is the leader, with its hex id. */
export async function agreedLeader(cluster: Cluster): Promise<{ member: Member; id: string }> {
  return eventually(
    async () => {
      const running = cluster.members.filter((m) => m.running);
      const st = await endpointStatus(cluster, running);
      const leaders = st.filter((s) => s.isLeader);
      if (leaders.length !== 1 || new Set(st.map((s) => s.raftTerm)).size !== 1) return undefined;
      const i = st.indexOf(leaders[0]!);
      return { member: running[i]!, id: leaders[0]!.id };
    },
    30_000,
    "one agreed leader",
  );
}

/** A member's hex id (from its own endpoint status). */
export async function memberId(cluster: Cluster, m: Member): Promise<string> {
  return (await endpointStatus(cluster, [m]))[0]!.id;
}
