/**
 * The two power-cut moments of a three-member cluster that need a scenario, not just a delay
 * (issue 20), for cluster_crash.ts:
 *
 *   - snapshot-install: a follower is stopped, the others write past the leader's retained log
 *     (--snapshot-count and --experimental-snapshot-catchup-entries small), the follower restarts
 *     and catches up by a streamed snapshot; the power goes at a seeded step of the follower's
 *     receive → fsync → rename (stage) → install sequence, plus a seeded few milliseconds;
 *   - wal-cut: the raft WAL's segments are made tiny (ETCETERA_WAL_SEGMENT_SIZE_BYTES), so a
 *     segment is cut every few dozen puts; the power goes a seeded few milliseconds after a
 *     seeded segment cut was logged (often inside the next one: trim, header, rename, dir fsync).
 */
import type { Member } from "../e2e/harness.js";
import type { EtcdConnection } from "../reliability/etcd_client.js";
import type { PhaseClock } from "./cluster_diagnosis.js";
import { killMember, startMember, waitForLine } from "./crash_checks.js";

/** Segment size the wal-cut case runs with: a cut every ~30 puts of 2 KiB. */
export const WAL_CUT_SEGMENT_BYTES = 64 * 1024;
export const WAL_CUT_ENV = { ETCETERA_WAL_SEGMENT_SIZE_BYTES: String(WAL_CUT_SEGMENT_BYTES) };

/** The follower's log lines of a snapshot catch-up, in order (snapshots.ts, transport/inbound.ts). */
export const INSTALL_STEPS = [
  "receiving database snapshot",
  "received and delivered incoming snapshot",
  "staged received database snapshot",
  "installed database snapshot",
] as const;

async function sleep(ms: number): Promise<void> {
  await new Promise((r) => setTimeout(r, ms));
}

/** The index of a member that is not the leader, by Status (seeded among the followers). */
export async function pickFollower(conns: readonly EtcdConnection[], rnd: () => number, timeoutMs: number): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  let last = "";
  while (Date.now() < deadline) {
    try {
      const statuses = await Promise.all(conns.map((c) => c.status(5_000)));
      const leader = statuses[0]!.leader;
      if (leader !== "0" && statuses.every((s) => s.leader === leader)) {
        const followers = statuses.map((s, i) => (s.memberId === leader ? -1 : i)).filter((i) => i >= 0);
        if (followers.length === 2) return followers[Math.floor(rnd() * followers.length)]!;
      }
      last = statuses.map((s) => `${s.memberId}→${s.leader}`).join(" ");
    } catch (e) {
      last = (e as Error).message;
    }
    await sleep(100);
  }
  throw new Error(`no agreed leader within ${timeoutMs} ms (${last})`);
}

export interface InstallCutOptions {
  members: Member[];
  follower: number;
  /** Acknowledged puts so far (the load runs meanwhile). */
  ackedCount: () => number;
  /** Puts to wait for while the follower is down: past the leader's retained log. */
  writesWhileDown: number;
  rnd: () => number;
  env?: Record<string, string>;
  args: string[];
  /** The run's phases (the report says which one a stalled run was in); stops the waits when abandoned. */
  clock: PhaseClock;
}

/**
 * Stops the follower, waits for the writes that push it out of the leader's log, restarts it and
 * returns once it logged the seeded step of its snapshot catch-up and a seeded 0–20 ms passed:
 * the caller cuts the power then. Returns what it waited for (for the report).
 */
export async function awaitInstallStep(o: InstallCutOptions): Promise<string> {
  const f = o.members[o.follower]!;
  o.clock.enter("follower down: writes past the leader's log");
  await killMember(f);
  const before = o.ackedCount();
  const deadline = Date.now() + 120_000;
  while (o.ackedCount() < before + o.writesWhileDown) {
    if (Date.now() > deadline) {
      const logs = o.members.filter((m) => m !== f).map((m) => `==== ${m.spec.name}\n${m.log.slice(-4000)}`);
      throw new Error(`only ${o.ackedCount() - before} of ${o.writesWhileDown} puts acknowledged within 120 s with ${f.spec.name} down\n${logs.join("\n")}`);
    }
    o.clock.check();
    await sleep(20);
  }
  o.clock.enter("waiting for the catch-up step");
  const step = Math.floor(o.rnd() * INSTALL_STEPS.length);
  const extraMs = Math.floor(o.rnd() * 20);
  const restarted = startMember(f.spec, o.args, o.env);
  o.members[o.follower] = restarted;
  const needle = `"msg":"${INSTALL_STEPS[step]}"`;
  const seen = await waitForLine(restarted, needle, 1, 90_000);
  await sleep(extraMs);
  if (!seen) return `${restarted.spec.name} restarted ${o.writesWhileDown} puts behind but never logged ${needle} (running: ${restarted.running})`;
  return `${extraMs} ms after ${restarted.spec.name} logged ${needle} (restarted ${o.writesWhileDown} puts behind the leader's log)`;
}

/** Returns a seeded 0–40 ms after the victim logged its seeded (1st–8th) segment cut. */
export async function awaitWalCut(victim: Member, rnd: () => number): Promise<string> {
  const occurrence = 1 + Math.floor(rnd() * 8);
  const extraMs = Math.floor(rnd() * 40);
  const needle = '"msg":"created a new WAL segment"';
  const seen = await waitForLine(victim, needle, occurrence, 120_000);
  await sleep(extraMs);
  return seen ? `${extraMs} ms after ${needle} #${occurrence} on ${victim.spec.name}` : `${needle} #${occurrence} never came on ${victim.spec.name}`;
}
