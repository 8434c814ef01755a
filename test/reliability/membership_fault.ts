/**
 * The "membership" chaos fault: a runtime membership change with a disruption in the middle, the
 * way an operator replaces capacity on a cluster that is misbehaving. A new member is added as a
 * learner (`etcdctl member add --learner`) and started exactly as etcdctl printed; while it
 * catches up, one original member is SIGKILLed or partitioned (the injector's own faults); the
 * learner is promoted once in sync, then removed again, so the cluster ends as the three voters
 * the workload and the checks know. Every step is retried within a bound: a refusal of etcd's
 * (unhealthy cluster, learner not in sync, a timeout during the disruption) is the system
 * working, not a failed fault; the fault only fails when the cluster cannot be returned to its
 * three voters.
 *
 * The added member gets a proxy of its own (its advertised peer URL), and its connections into the
 * original members' proxies count as an unknown source: a partition cuts unknown sources on every
 * proxy and the added member's proxy whole, so nothing leaks through it in either direction.
 */
import { rmSync } from "node:fs";
import { join } from "node:path";
import { reservePort } from "../ports.js";
import { etcdctl, Member, type MemberSpec } from "../e2e/harness.js";
import { addedMemberId, parseMemberAddEnv } from "../e2e/membership_harness.js";
import type { ChaosCluster } from "./chaos_cluster.js";

export interface MembershipFaultOptions {
  heartbeatMs: number;
  electionMs: number;
  /** Runs one disruption of an original member (kill or partition) and says what it did. */
  disrupt(): Promise<string>;
  log?: (line: string) => void;
}

/** How long each step may be refused before the fault gives up on it. */
const STEP_DEADLINE_MS = 60_000;

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

let added = 0;

/** `etcdctl args` through the original members until `accept` takes its output (or the deadline passes). */
async function retry(cluster: ChaosCluster, args: string[], what: string, deadlineMs = STEP_DEADLINE_MS): Promise<string> {
  const until = Date.now() + deadlineMs;
  let last = "";
  for (;;) {
    const live = cluster.members.filter((m) => m.member.running && !m.paused).map((m) => cluster.clientUrl(m.member));
    if (live.length > 0) {
      const r = await etcdctl(live.join(","), [...(cluster.tls?.ctlFlags() ?? []), ...args], undefined, 10_000);
      if (r.code === 0) return r.stdout;
      last = r.stderr.trim();
    }
    if (Date.now() > until) throw new Error(`${what}: still refused after ${deadlineMs} ms: ${last}`);
    await sleep(250);
  }
}

/** Adds a learner, disrupts an original member meanwhile, promotes the learner, removes it. */
export async function membershipChange(cluster: ChaosCluster, o: MembershipFaultOptions): Promise<string> {
  const name = `x${++added}`;
  const spec: MemberSpec = { name, clientPort: await reservePort(), peerPort: await reservePort(), dataDir: join(cluster.dir, `${name}.etcd`) };
  const scheme = cluster.scheme;
  const proxy = await cluster.startExtraProxy(name, spec.peerPort);
  // Advertised: the proxy (etcdctl prints it as ETCD_INITIAL_ADVERTISE_PEER_URLS); listened on: the member's port.
  const peerUrl = `${scheme}://127.0.0.1:${proxy.port}`;
  const steps: string[] = [];
  const t0 = Date.now();
  const at = () => `${Date.now() - t0} ms`;
  let out: string;
  try {
    out = await retry(cluster, ["member", "add", name, `--peer-urls=${peerUrl}`, "--learner"], `member add ${name}`);
  } catch (e) {
    await cluster.closeExtraProxy(proxy);
    throw e;
  }
  const id = addedMemberId(out);
  cluster.markUnknown(id);
  steps.push(`learner ${name} (${id}) added`);
  const member = new Member(
    spec,
    [
      `--data-dir=${spec.dataDir}`,
      `--listen-client-urls=${scheme}://127.0.0.1:${spec.clientPort}`,
      `--advertise-client-urls=${scheme}://127.0.0.1:${spec.clientPort}`,
      `--listen-peer-urls=${scheme}://127.0.0.1:${spec.peerPort}`,
      "--initial-cluster-token=chaos-token",
      `--heartbeat-interval=${o.heartbeatMs}`,
      `--election-timeout=${o.electionMs}`,
      "--log-level=info",
      ...(cluster.tls?.memberFlags(name) ?? []),
    ],
    parseMemberAddEnv(out),
  );
  try {
    member.start();
    // The disruption runs while the learner catches up and is promoted.
    const disruption = o.disrupt().then(
      (d) => `${d} (done at ${at()})`,
      (e: unknown) => `disruption failed: ${String(e)}`,
    );
    let promoted = false;
    try {
      await retry(cluster, ["member", "promote", id], `member promote ${name}`);
      promoted = true;
      steps.push(`promoted at ${at()}`);
    } catch (e) {
      // Not in sync within the deadline (a disruption can hold it back): it leaves as a learner.
      steps.push(`not promoted (${String(e).slice(0, 200)})`);
    }
    steps.push(await disruption);
    await retry(cluster, ["member", "remove", id], `member remove ${name}`);
    steps.push(`removed at ${at()}${promoted ? " (a voter)" : " (a learner)"}`);
    // A removed member stops by itself once it learns of its removal; it may not (cut off meanwhile).
    const until = Date.now() + 10_000;
    while (member.running && Date.now() < until) await sleep(100);
    steps.push(member.running ? "killed (had not exited)" : "exited");
    steps.push(`its proxy: ${proxy.stats.accepted} connections, ${proxy.stats.bytesDropped} bytes dropped`);
  } finally {
    await member.kill("SIGKILL");
    await cluster.closeExtraProxy(proxy);
    rmSync(spec.dataDir, { recursive: true, force: true });
  }
  o.log?.(`membership ${name}: ${member.log.split("\n").filter((l) => /permanently removed|fatal/.test(l)).length} removal/fatal lines in its log`);
  return steps.join("; ");
}
