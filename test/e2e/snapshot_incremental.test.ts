/**
 * Incremental snapshot catch-up (issue 19), real processes: a 3-member cluster with a ~30 MiB
 * backend; a follower stopped; a little more written (enough that the leader's raft log no
 * longer reaches the follower: --snapshot-count 100 and, on etcetera, 50 catch-up entries; etcd
 * 3.4 keeps 5,000 and has no flag for it, so more is written there), a few keys deleted, and a
 * compaction; the follower restarted.
 *
 * - Compacted at the follower's revision: etcetera's leader sends only what changed since: its
 *   etcd_network_snapshot_send_total_bytes grows by far less than the backend's size, and the
 *   send is counted as incremental. etcd always sends the full image
 *   (deviation: incremental-snapshots): there the snapshot is asserted, and the data, not the bytes.
 * - Compacted past the follower's revision: the delta cannot carry the deletions the compaction
 *   dropped, so the leader falls back to the full image (the bytes are about the backend's size).
 * - The receiver SIGKILLed inside the delta's install (etcetera only: the install's pages are
 *   slowed with the test-only ETCETERA_TEST_DELTA_PAGE_DELAY_MS): the restarted member applies the
 *   staged delta whole, in one transaction, before it replays its log.
 * In every case: HashKV equal on every member, and every key reads back from the follower as on
 * the leader (the deleted ones absent).
 */
import { afterEach, describe, expect, it } from "vitest";
import { EtcdConnection } from "../reliability/etcd_client.js";
import { Cluster, eventually, type Member, sleep, TARGET_ETCD } from "./harness.js";

const TIMEOUT_MS = 10_000;
const BIG = 480; // 64 KiB values: a ~30 MiB backend
const VALUE = "v".repeat(64 * 1024);
/** Past --snapshot-count 100 plus what each target keeps behind a snapshot (etcetera: 50 by flag; etcd 3.4: 5,000). */
const WRITES_WHILE_DOWN = TARGET_ETCD ? 5_600 : 400;
const DELETED = 5;

let cluster: Cluster | undefined;
const conns: EtcdConnection[] = [];
afterEach(async () => {
  for (const c of conns.splice(0)) c.close();
  await cluster?.destroy();
  cluster = undefined;
});

async function metric(m: Member, name: string): Promise<number> {
  if (m.proc === undefined) return 0;
  const text = await (await fetch(`${m.clientUrl}/metrics`, { signal: AbortSignal.timeout(5_000) })).text();
  let sum = 0;
  for (const x of text.matchAll(new RegExp(`^${name}(?:\\{[^}]*\\})? ([0-9.e+]+)$`, "gm"))) sum += Number(x[1]);
  return sum;
}

async function sumOver(members: readonly Member[], name: string): Promise<number> {
  let n = 0;
  for (const m of members) n += await metric(m, name).catch(() => 0);
  return n;
}

async function leaderIndex(members: readonly Member[], cs: readonly EtcdConnection[]): Promise<number> {
  return eventually(async () => {
    const ids = await Promise.all(cs.map(async (c, i) => (members[i]!.proc === undefined ? undefined : (await c.status(TIMEOUT_MS).catch(() => undefined))?.memberId)));
    for (let i = 0; i < cs.length; i++) {
      if (members[i]!.proc === undefined) continue;
      const s = await cs[i]!.status(TIMEOUT_MS).catch(() => undefined);
      if (s === undefined || s.leader === "0") continue;
      const at = ids.indexOf(s.leader);
      if (at >= 0) return at;
    }
    return undefined;
  }, 30_000, "a leader");
}

/** Puts with a few in flight at once; each retried (a put lost in an election is sent again). */
async function putAll(c: EtcdConnection, kvs: Array<[string, string]>, parallel = 16): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: parallel }, async () => {
      while (next < kvs.length) {
        const [key, value] = kvs[next++]!;
        await eventually(async () => (await c.execute({ kind: "put", key, value }, TIMEOUT_MS).catch(() => undefined)) && true, 30_000, `put ${key}`);
      }
    }),
  );
}

type Compaction = "at-follower" | "past-follower";

async function run(compaction: Compaction, opts: { killDuringInstall?: boolean } = {}): Promise<void> {
  const extra = ["--heartbeat-interval=50", "--election-timeout=1000", "--snapshot-count=100"];
  if (!TARGET_ETCD) extra.push("--experimental-snapshot-catchup-entries=50");
  cluster = await Cluster.create({ size: 3, extraArgs: extra });
  await cluster.start();
  const members = cluster.members;
  const cs = members.map((m) => new EtcdConnection(m.endpoint));
  conns.push(...cs);
  let lead = await leaderIndex(members, cs);
  await putAll(cs[lead]!, Array.from({ length: BIG }, (_, i): [string, string] => [`big/${i}`, VALUE]), 8);

  const fi = [0, 1, 2].find((i) => i !== lead)!;
  const follower = members[fi]!;
  await eventually(async () => ((await cs[fi]!.localRevision("big/", TIMEOUT_MS)) >= BIG + 1 ? true : undefined), 30_000, "the follower has every big put");
  const followerRev = await cs[fi]!.localRevision("big/", TIMEOUT_MS);
  await follower.kill("SIGKILL");

  // A little more while it is down: small puts, deletions, a compaction.
  lead = await leaderIndex(members, cs);
  await putAll(cs[lead]!, Array.from({ length: WRITES_WHILE_DOWN }, (_, i): [string, string] => [`small/${i % 300}`, `w${i}`]));
  for (let i = 0; i < DELETED; i++) await cs[lead]!.execute({ kind: "delete", key: `big/${i}` }, TIMEOUT_MS);
  const revNow = await cs[lead]!.localRevision("big/", TIMEOUT_MS);
  await cs[lead]!.compact(compaction === "at-follower" ? followerRev : revNow, TIMEOUT_MS);
  await putAll(cs[lead]!, [["after/compaction", "x"]]);

  const live = members.filter((_, i) => i !== fi);
  const backendBytes = await metric(members[lead]!, "etcd_mvcc_db_total_size_in_bytes");
  expect(backendBytes).toBeGreaterThan(25 * 1024 * 1024);
  const before = {
    sends: await sumOver(live, "etcd_network_snapshot_send_success"),
    bytes: await sumOver(live, "etcd_network_snapshot_send_total_bytes"),
    incremental: await sumOver(live, "etcd_network_snapshot_send_incremental_success"),
  };

  const logFrom = follower.log.length;
  if (opts.killDuringInstall === true && TARGET_ETCD) {
    // etcd sends the whole database: its follower is SIGKILLed once the snapshot starts arriving,
    // and the restart must still catch up to the same data (checked below as for etcetera).
    follower.start();
    await eventually(async () => (follower.log.slice(logFrom).includes("receiving database snapshot") ? true : undefined), 60_000, "the follower starts receiving a snapshot");
    await follower.kill("SIGKILL");
    follower.start();
    await follower.waitReady(60_000);
  } else if (opts.killDuringInstall === true) {
    follower.start({ ETCETERA_TEST_BUGS_ALLOWED: "1", ETCETERA_TEST_DELTA_PAGE_DELAY_MS: "400" });
    await eventually(async () => (follower.log.slice(logFrom).includes("applying incremental database snapshot") ? true : undefined), 60_000, "the follower starts installing a delta");
    await sleep(500);
    expect(follower.log.slice(logFrom), "killed inside the install").not.toContain("installed database snapshot");
    await follower.kill("SIGKILL");
    const restartFrom = follower.log.length;
    follower.start();
    await follower.waitReady(60_000);
    await eventually(async () => (follower.log.slice(restartFrom).includes("applying the snapshot's staged delta") ? true : undefined), 30_000, "the restart applies the staged delta");
  } else {
    follower.start();
    await follower.waitReady(60_000);
  }
  const lastRev = await cs[lead]!.localRevision("after/", TIMEOUT_MS);
  await eventually(async () => ((await cs[fi]!.localRevision("after/", TIMEOUT_MS).catch(() => 0)) >= lastRev ? true : undefined), 120_000, "the follower caught up").catch((e: unknown) => {
    throw new Error(`${String(e)}\n${follower.log.slice(-4000)}`);
  });
  await eventually(async () => ((await sumOver(live, "etcd_network_snapshot_send_success")) > before.sends ? true : undefined), 30_000, "a snapshot was sent");
  const sent = (await sumOver(live, "etcd_network_snapshot_send_total_bytes")) - before.bytes;
  const incremental = (await sumOver(live, "etcd_network_snapshot_send_incremental_success")) - before.incremental;
  console.log(`[snapshot incremental] ${compaction}${opts.killDuringInstall === true ? " (killed during install)" : ""}: backend ${backendBytes} bytes, snapshot bytes sent ${sent}, incremental sends ${incremental}`);
  if (!TARGET_ETCD) {
    if (compaction === "at-follower") {
      expect(incremental).toBeGreaterThanOrEqual(1);
      expect(sent).toBeLessThan(backendBytes / 10);
      expect(sent).toBeGreaterThan(0);
    } else {
      expect(incremental).toBe(0);
      // The whole image: every live value crosses. (Not a share of the backend's file size: that
      // counts free pages too, and measured 31.4 MB sent of a 63.5 MB file in one run.)
      expect(sent).toBeGreaterThanOrEqual((BIG - DELETED) * VALUE.length);
    }
  }

  // Same contents everywhere: HashKV at one revision, and every key on the follower as on the leader.
  const hashes = await Promise.all(cs.map((c) => c.hashKV(lastRev, TIMEOUT_MS)));
  expect(new Set(hashes.map((h) => h.hash)).size, JSON.stringify(hashes)).toBe(1);
  const keys = [...Array.from({ length: BIG }, (_, i) => `big/${i}`), ...Array.from({ length: 300 }, (_, i) => `small/${i}`), "after/compaction"];
  for (let i = 0; i < keys.length; i += 20) {
    const reads = keys.slice(i, i + 20).map((key) => ({ key, revision: lastRev }));
    const [mine, theirs] = await Promise.all([cs[fi]!.readAt(reads, TIMEOUT_MS), cs[lead]!.readAt(reads, TIMEOUT_MS)]);
    expect(mine).toEqual(theirs);
  }
  const gone = await cs[fi]!.readAt([{ key: "big/0", revision: lastRev }], TIMEOUT_MS);
  expect(gone[0]).toBeNull();
  const kept = await cs[fi]!.readAt([{ key: `big/${BIG - 1}`, revision: lastRev }], TIMEOUT_MS);
  expect(kept[0]?.value.length).toBe(VALUE.length);
}

describe("a restarted follower catches up incrementally", () => {
  it("compacted at the follower's revision: only the changes are sent (etcetera), same data everywhere", { timeout: 300_000 }, async () => {
    await run("at-follower");
  });
  it("compacted past the follower's revision: the full image is sent, same data everywhere", { timeout: 300_000 }, async () => {
    await run("past-follower");
  });
  it("the receiver SIGKILLed inside the delta's install (etcd: inside its snapshot's receipt): the restart applies the staged delta whole, same data everywhere", { timeout: 300_000 }, async () => {
    await run("at-follower", { killDuringInstall: true });
  });
});
