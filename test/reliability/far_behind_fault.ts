/**
 * The "follower far behind" chaos fault (issue 19): a follower is stopped, the cluster writes past
 * what the leader's raft log still holds for it, and the follower is restarted: it can only catch
 * up by a snapshot, received while the workload goes on. The run's checks (linearizability, watch
 * guarantees, every acknowledged write read back from every member) then cover the catch-up.
 *
 * Same scenario on both targets: the run gives every member --snapshot-count FAR_BEHIND_SNAPSHOT_COUNT
 * (farBehindArgs), and the fault writes the catch-up entries the leader keeps behind a snapshot
 * plus 3 snapshot counts of filler puts while the follower is down. etcd 3.4 keeps 5,000 (no flag);
 * etcetera is given 100 (--experimental-snapshot-catchup-entries), so a round writes 700 puts, not
 * 5,600 (minutes on a loaded CI machine). Filler keys are outside the workload's prefix: the
 * checkers see only the workload's keys.
 */
import { TARGET_ETCD } from "../e2e/harness.js";
import type { ChaosCluster, ChaosMember } from "./chaos_cluster.js";
import { pick, type Rng } from "./gen.js";

export const FAR_BEHIND_SNAPSHOT_COUNT = 200;
/** Entries a leader keeps behind its snapshot: etcd 3.4's SnapshotCatchUpEntries, or etcetera's flag. */
const CATCH_UP_ENTRIES = TARGET_ETCD ? 5_000 : 100;
const FILLER_PUTS = CATCH_UP_ENTRIES + 3 * FAR_BEHIND_SNAPSHOT_COUNT;
const FILLER_CONCURRENCY = 32;
const FILLER_PREFIX = "farbehind/";

/** The flags every member needs for the fault to force a snapshot (appended when the run has it). */
export function farBehindArgs(): string[] {
  return [`--snapshot-count=${FAR_BEHIND_SNAPSHOT_COUNT}`, ...(TARGET_ETCD ? [] : [`--experimental-snapshot-catchup-entries=${CATCH_UP_ENTRIES}`])];
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** A counter's sum over its labels on a member's /metrics (0 when absent). */
async function metricSum(cluster: ChaosCluster, m: ChaosMember, name: string): Promise<number> {
  const text = await cluster.fetchText(m.member, "/metrics", 5_000);
  let sum = 0;
  for (const x of text.matchAll(new RegExp(`^${name}(?:\\{[^}]*\\})? ([0-9.e+]+)$`, "gm"))) sum += Number(x[1]);
  return sum;
}

/** Puts `count` filler keys through the live members, `FILLER_CONCURRENCY` at a time, until acknowledged. */
async function writeFiller(live: readonly ChaosMember[], round: number, count: number, deadlineMs: number): Promise<number> {
  let next = 0;
  let acked = 0;
  const worker = async (w: number) => {
    while (next < count && Date.now() < deadlineMs) {
      const n = next++;
      const m = live[(n + w) % live.length]!;
      for (;;) {
        try {
          await m.conn.execute({ kind: "put", key: `${FILLER_PREFIX}${round}/${n}`, value: `filler-${round}-${n}` }, 5_000);
          acked++;
          break;
        } catch {
          if (Date.now() >= deadlineMs) return;
          await sleep(50); // a leader change: the put is retried (filler, not checked)
        }
      }
    }
  };
  await Promise.all(Array.from({ length: FILLER_CONCURRENCY }, (_, w) => worker(w)));
  return acked;
}

/**
 * Applies the fault: stops a follower (the chosen member if it is one), writes the filler, restarts
 * it and waits until it has received a snapshot and reached the revision the others had. Returns
 * the record's detail and target.
 */
export async function applyFarBehind(cluster: ChaosCluster, r: Rng, round: number): Promise<{ target: string; detail: string }> {
  const leader = await cluster.leader(5_000);
  const followers = cluster.members.filter((o) => o !== leader && o.member.running);
  if (leader === undefined || followers.length === 0) return { target: "-", detail: "no leader with a running follower" };
  const f = pick(r, followers);
  const live = cluster.members.filter((o) => o !== f);
  cluster.sampleRss();
  await f.member.kill("SIGKILL");
  const started = Date.now();
  const acked = await writeFiller(live, round, FILLER_PUTS, started + 120_000);
  const fillerMs = Date.now() - started;
  const target = Math.max(...(await Promise.all(live.map(async (o) => (await o.conn.status(5_000).catch(() => undefined))?.revision ?? 0))));
  f.member.log = "";
  const restartedAt = Date.now();
  f.member.start();
  await f.member.waitReady(60_000);
  // Caught up: at the revision the others had when it came back (the workload writes on meanwhile).
  const deadline = Date.now() + 120_000;
  let revision = 0;
  while (Date.now() < deadline) {
    revision = (await f.conn.status(5_000).catch(() => undefined))?.revision ?? 0;
    if (revision >= target) break;
    await sleep(100);
  }
  // Counted by the restarted process only (its metrics and its log start at the restart). Both
  // targets log "receiving database snapshot" (etcd's rafthttp, etcetera's snapshots.ts).
  const receivedMetric = await metricSum(cluster, f, "etcd_network_snapshot_receive_success").catch(() => 0);
  const receivedLogged = f.member.log.split("receiving database snapshot").length - 1;
  const received = Math.max(receivedMetric, receivedLogged);
  const caughtUp = revision >= target;
  const detail =
    `${f.name} SIGKILLed; ${acked} of ${FILLER_PUTS} filler puts acknowledged while down; restarted and ` +
    `${caughtUp ? `caught up to revision ${target}` : `NOT caught up (revision ${revision} of ${target})`} ` +
    `${Date.now() - restartedAt} ms after its restart (filler took ${fillerMs} ms), snapshots received: ${received} (metric ${receivedMetric}, logged ${receivedLogged})`;
  if (!caughtUp) throw new Error(detail);
  return { target: f.name, detail };
}
