/**
 * The "follower far behind" chaos fault (issue 19): a follower is stopped, the cluster writes past
 * what the leader's raft log still holds for it, and the follower is restarted: it can only catch
 * up by a snapshot, received while the workload goes on. The run's checks (linearizability, watch
 * guarantees, every acknowledged write read back from every member) then cover the catch-up.
 *
 * Same scenario on both targets: the run gives every member --snapshot-count FAR_BEHIND_SNAPSHOT_COUNT
 * (farBehindArgs). A member keeps CATCH_UP_ENTRIES entries of its raft log behind each snapshot
 * for slow followers: etcd 3.4's SnapshotCatchUpEntries, 5,000 (no flag in 3.4; 3.5's
 * --experimental-snapshot-catchup-entries came later), or etcetera's flag, set to 100 so that a
 * round writes hundreds of puts, not thousands. Filler keys are outside the workload's prefix:
 * the checkers see only the workload's keys.
 *
 * A count of puts alone does not force the snapshot on etcd: for 30 s after it sent a snapshot
 * (etcdserver's releaseDelayAfterSnapshot) etcd keeps taking snapshots but skips the raft log
 * compaction behind them ("skip compaction since there is an inflight snapshot"), so a round that
 * starts soon after another catch-up (this fault's previous round, or the membership fault's
 * learner) finds the whole log still there, and the follower catches up from it. So the fault
 * sizes its filler from what the members retain and then checks it:
 * 1. before the restart, it writes (the planned filler, then top-ups, for a bounded time) until
 *    every live member's own log says its raft log was compacted past the follower's last entry
 *    (etcd logs each compaction; etcetera logs each snapshot, compacted CATCH_UP_ENTRIES behind);
 * 2. after the catch-up, the metrics must show the snapshot: etcd_network_snapshot_receive_success
 *    on the restarted follower (or its "receiving database snapshot" log line) and
 *    etcd_network_snapshot_send_success{To=<the follower>} on the live members. If the follower
 *    still caught up without one, it is stopped again and the fault goes on writing, at most
 *    ATTEMPTS_MAX times; the record says how many it took and the test requires a snapshot.
 */
import { TARGET_ETCD } from "../e2e/harness.js";
import type { ChaosCluster, ChaosMember } from "./chaos_cluster.js";
import { pick, type Rng } from "./gen.js";
import { normalizeId } from "./proxy.js";

export const FAR_BEHIND_SNAPSHOT_COUNT = 200;
/** Entries a member keeps behind its snapshot: etcd 3.4's SnapshotCatchUpEntries, or etcetera's flag. */
const CATCH_UP_ENTRIES = TARGET_ETCD ? 5_000 : 100;
/**
 * The planned filler: what a member retains behind its latest snapshot (the catch-up entries
 * plus up to one snapshot count since that snapshot) and two snapshot counts of margin.
 */
const FILLER_PUTS = CATCH_UP_ENTRIES + 3 * FAR_BEHIND_SNAPSHOT_COUNT;
/** Puts per top-up while a live member's log does not show a compaction past the follower yet. */
const TOP_UP_PUTS = FAR_BEHIND_SNAPSHOT_COUNT;
/** Puts of one attempt at most (planned filler and top-ups). */
const FILLER_PUTS_MAX = 3 * FILLER_PUTS;
/** Top-ups go on this long at most: beyond etcd's 30 s compaction pause after a snapshot it sent. */
const COMPACTION_WAIT_MS = 75_000;
/**
 * Added to the follower's raft index as the others report it: its log may hold entries sent to
 * it but not yet committed when it was stopped.
 */
const FOLLOWER_INDEX_MARGIN = FAR_BEHIND_SNAPSHOT_COUNT;
/** Times a follower is taken down in one fault round, at most, until it catches up by a snapshot. */
const ATTEMPTS_MAX = 3;
const FILLER_CONCURRENCY = 32;
const FILLER_PREFIX = "farbehind/";

/** The flags every member needs for the fault to force a snapshot (appended when the run has it). */
export function farBehindArgs(): string[] {
  return [`--snapshot-count=${FAR_BEHIND_SNAPSHOT_COUNT}`, ...(TARGET_ETCD ? [] : [`--experimental-snapshot-catchup-entries=${CATCH_UP_ENTRIES}`])];
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

interface MetricSample {
  labels: Record<string, string>;
  value: number;
}

/** A metric's samples on a member's /metrics (Prometheus text format). */
async function metricSamples(cluster: ChaosCluster, m: ChaosMember, name: string): Promise<MetricSample[]> {
  const text = await cluster.fetchText(m.member, "/metrics", 5_000);
  const out: MetricSample[] = [];
  for (const x of text.matchAll(new RegExp(`^${name}(?:\\{([^}]*)\\})? ([0-9.e+]+)$`, "gm"))) {
    const labels: Record<string, string> = {};
    for (const l of (x[1] ?? "").matchAll(/(\w+)="([^"]*)"/g)) labels[l[1]!] = l[2]!;
    out.push({ labels, value: Number(x[2]) });
  }
  return out;
}

/** The sum of a counter's samples on a member (0 when absent or unreachable). */
async function metricSum(cluster: ChaosCluster, m: ChaosMember, name: string, keep: (labels: Record<string, string>) => boolean = () => true): Promise<number> {
  const samples = await metricSamples(cluster, m, name).catch((): MetricSample[] => []);
  return samples.filter((s) => keep(s.labels)).reduce((sum, s) => sum + s.value, 0);
}

/** Snapshots the live members sent to `f` (etcd_network_snapshot_send_success{To=<f's id>}), summed. */
async function snapshotsSentTo(cluster: ChaosCluster, live: readonly ChaosMember[], f: ChaosMember): Promise<number> {
  const toF = (labels: Record<string, string>) => labels.To !== undefined && /^[0-9a-f]+$/i.test(labels.To) && normalizeId(labels.To) === f.id;
  const counts = await Promise.all(live.map((o) => metricSum(cluster, o, "etcd_network_snapshot_send_success", toF)));
  return counts.reduce((a, b) => a + b, 0);
}

/** etcd 3.4's line for each raft log compaction: capnslog (its default) or zap. */
const ETCD_COMPACTED = /compacted raft log at (\d+)|"msg":"compacted Raft logs"[^\n]*"compact-index":(\d+)/g;
/** etcetera's line for each snapshot (snapshots.ts: zap JSON, pino writes msg last; or capnslog). */
const ETCETERA_SNAPSHOT_SAVED = /"index":(\d+)[^\n]*"msg":"saved snapshot"|: saved snapshot index=(\d+)/g;

/**
 * The highest index a member's raft log was compacted to, as its own log lines since its start
 * say (0 when none): etcd logs each compaction; etcetera logs each snapshot, behind which its
 * raft log keeps CATCH_UP_ENTRIES (RaftStorage.snapshotAt). The first entry it can still send a
 * follower is one past it.
 */
function compactedThrough(m: ChaosMember): number {
  let through = 0;
  for (const x of m.member.log.matchAll(TARGET_ETCD ? ETCD_COMPACTED : ETCETERA_SNAPSHOT_SAVED)) {
    const index = Number(x[1] ?? x[2]);
    through = Math.max(through, TARGET_ETCD ? index : index - CATCH_UP_ENTRIES);
  }
  return through;
}

/** Puts keys `from`..`from + count - 1` through the live members, `FILLER_CONCURRENCY` at a time, until acknowledged. */
async function writeFiller(live: readonly ChaosMember[], keyBase: string, from: number, count: number, deadlineMs: number): Promise<number> {
  let next = from;
  const end = from + count;
  let acked = 0;
  const worker = async (w: number) => {
    while (next < end && Date.now() < deadlineMs) {
      const n = next++;
      const m = live[(n + w) % live.length]!;
      for (;;) {
        try {
          await m.conn.execute({ kind: "put", key: `${keyBase}${n}`, value: `filler-${n}` }, 5_000);
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

interface Attempt {
  /** The follower's last raft index, bounded from above (raft indexes as the members report them plus a margin). */
  followerIndex: number;
  acked: number;
  written: number;
  fillerMs: number;
  /** The lowest compaction index over the live members when the follower was restarted. */
  compacted: number;
  caughtUp: boolean;
  revision: number;
  target: number;
  catchUpMs: number;
  receivedMetric: number;
  receivedLogged: number;
  sent: number;
}

const received = (a: Attempt) => Math.max(a.receivedMetric, a.receivedLogged);

/** Stops `f`, writes until the live members compacted their raft logs past it, restarts it and waits until it caught up. */
async function attempt(cluster: ChaosCluster, f: ChaosMember, live: readonly ChaosMember[], keyBase: string): Promise<Attempt> {
  const before = (await f.conn.status(5_000).catch(() => undefined))?.raftIndex ?? 0;
  cluster.sampleRss();
  await f.member.kill("SIGKILL");
  const after = await Promise.all(live.map(async (o) => (await o.conn.status(5_000).catch(() => undefined))?.raftIndex ?? 0));
  const followerIndex = Math.max(before, ...after) + FOLLOWER_INDEX_MARGIN;
  const started = Date.now();
  let acked = await writeFiller(live, keyBase, 0, FILLER_PUTS, started + 120_000);
  let written = FILLER_PUTS;
  const compactedNow = () => Math.min(...live.map(compactedThrough));
  // The follower's next entry must be gone from every member that may lead when it is back.
  const waitUntil = Date.now() + COMPACTION_WAIT_MS;
  while (compactedNow() <= followerIndex && written < FILLER_PUTS_MAX && Date.now() < waitUntil) {
    acked += await writeFiller(live, keyBase, written, TOP_UP_PUTS, waitUntil);
    written += TOP_UP_PUTS;
    // Paced: during etcd's pause every snapshot skips its compaction, and more puts only make the
    // catch-up longer; one snapshot count a second keeps snapshots coming until one compacts.
    await sleep(1_000);
  }
  const compacted = compactedNow();
  const fillerMs = Date.now() - started;
  const target = Math.max(...(await Promise.all(live.map(async (o) => (await o.conn.status(5_000).catch(() => undefined))?.revision ?? 0))));
  const sentBefore = await snapshotsSentTo(cluster, live, f);
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
  const catchUpMs = Date.now() - restartedAt;
  // Counted by the restarted process only (its metrics and its log start at the restart). Both
  // targets log "receiving database snapshot" (etcd's rafthttp, etcetera's snapshots.ts). The
  // sender counts a send once the follower answered it: a moment after the follower counted it.
  const receivedMetric = await metricSum(cluster, f, "etcd_network_snapshot_receive_success");
  const receivedLogged = f.member.log.split("receiving database snapshot").length - 1;
  let sent = (await snapshotsSentTo(cluster, live, f)) - sentBefore;
  for (const sentBy = Date.now() + 10_000; sent < 1 && Math.max(receivedMetric, receivedLogged) > 0 && Date.now() < sentBy; ) {
    await sleep(200);
    sent = (await snapshotsSentTo(cluster, live, f)) - sentBefore;
  }
  return { followerIndex, acked, written, fillerMs, compacted, caughtUp: revision >= target, revision, target, catchUpMs, receivedMetric, receivedLogged, sent };
}

function describeAttempt(f: ChaosMember, a: Attempt): string {
  return (
    `${f.name} SIGKILLed at raft index ≤ ${a.followerIndex}; ${a.acked} of ${a.written} filler puts acknowledged while down ` +
    `(planned ${FILLER_PUTS}: ${CATCH_UP_ENTRIES} catch-up entries + 3 × snapshot count ${FAR_BEHIND_SNAPSHOT_COUNT}; took ${a.fillerMs} ms), ` +
    `live members' raft logs compacted through ${a.compacted}; restarted and ` +
    `${a.caughtUp ? `caught up to revision ${a.target}` : `NOT caught up (revision ${a.revision} of ${a.target})`} ${a.catchUpMs} ms after its restart, ` +
    `snapshots received: ${received(a)} (metric ${a.receivedMetric}, logged ${a.receivedLogged}), snapshots sent to it: ${a.sent}`
  );
}

/**
 * Applies the fault: stops a follower (the chosen member if it is one), writes the filler, restarts
 * it and waits until it has reached the revision the others had, by a snapshot (up to
 * ATTEMPTS_MAX times, see the module comment). Returns the record's detail and target.
 */
export async function applyFarBehind(cluster: ChaosCluster, r: Rng, round: number): Promise<{ target: string; detail: string }> {
  const leader = await cluster.leader(5_000);
  const followers = cluster.members.filter((o) => o !== leader && o.member.running);
  if (leader === undefined || followers.length === 0) return { target: "-", detail: "no leader with a running follower" };
  const f = pick(r, followers);
  const live = cluster.members.filter((o) => o !== f);
  const earlier: string[] = [];
  for (let n = 1; ; n++) {
    const a = await attempt(cluster, f, live, `${FILLER_PREFIX}${round}/${n}/`);
    const detail = describeAttempt(f, a);
    if (!a.caughtUp) throw new Error(detail);
    if ((received(a) > 0 && a.sent > 0) || n === ATTEMPTS_MAX) {
      // This attempt's account first: the test reads its counts from the first match.
      const tries = earlier.length === 0 ? "" : ` (attempt ${n} of ${ATTEMPTS_MAX}; earlier attempts, without a snapshot: [${earlier.join("] [")}])`;
      return { target: f.name, detail: `${detail}${tries}` };
    }
    earlier.push(detail);
  }
}
