/**
 * One member loses power under a write load (issue 20): a real `node dist/server.js` with its data
 * dir on lazyfs, acknowledged puts recorded, the power cut at a seeded moment (a seeded delay, or
 * right after the member logs a raft snapshot or a released WAL segment), then a restart on what
 * is left and the checks:
 *
 *   - the member starts, or refuses with a message naming a file and an offset;
 *   - every acknowledged put is there with its value (one member: every ack was a majority's);
 *   - SQLite's integrity_check passes on the backend db as the power cut left it.
 *
 * Seeded: the seed picks the cut moment, the load's keys and values and lazyfs's torn write; the
 * report prints it and `npm run powerloss -- --seed N` replays it.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { type Member, SERVER_JS } from "../e2e/harness.js";
import { reservePorts } from "../ports.js";
import { mulberry32 } from "../prng.js";
import { EtcdConnection } from "../reliability/etcd_client.js";
import { integrityOf, killMember, listFiles, namesFileAndOffset, refusalLine, startMember, valueOf, waitForLine } from "./crash_checks.js";
import { LazyFs, scratch } from "./lazyfs.js";

export { stopAll } from "./crash_checks.js";

export type CutAt = "delay" | "snapshot" | "wal-purge" | "compact" | "defrag";
export const CUT_POINTS: readonly CutAt[] = ["delay", "snapshot", "wal-purge", "compact", "defrag"];

export interface CrashOptions {
  seed: number;
  /**
   * When the power goes: a seeded delay into the load; right after the n-th (seeded) log line of a
   * raft snapshot or a WAL segment release; or right after a Compact (at the newest acknowledged
   * revision) or a Defragment issued after a seeded delay returns.
   */
  cutAt: CutAt;
  valueBytes?: number;
  concurrency?: number;
  snapshotCount?: number;
  maxWals?: number;
  /** Upper bound of the seeded delay (cutAt "delay"), ms. */
  maxDelayMs?: number;
  /** Give up waiting for the trigger line after this long (the cut happens anyway), ms. */
  triggerTimeoutMs?: number;
  tear?: boolean;
  /** lazyfs --writeback: the share (%) of unsynced pages the OS had written back before the cut. */
  writebackPercent?: number;
  /** Keep the scratch dir (disk, work, logs) for a post-mortem. */
  keep?: boolean;
  log?: (line: string) => void;
}

export interface CrashReport {
  seed: number;
  cutAt: CutAt;
  /** What the cut waited for and when it came, for the report. */
  cutDescription: string;
  acked: number;
  maxAckedRevision: number;
  /** "started" or the refusal (the member's last log lines). */
  restart: "started" | "refused";
  refusal?: string;
  /** Whether the refusal names a file and an offset (the contract for refusing). */
  refusalNamesFileAndOffset?: boolean;
  /** Acknowledged puts missing or wrong after the restart (first few, and the count). */
  lost: { key: string; ackedRevision: number; got: string }[];
  lostCount: number;
  revisionAfter?: number;
  integrity: string;
  /** The files of the member's data dir as the power cut left them (path, bytes). */
  diskFiles: { path: string; bytes: number }[];
  /** lazyfs's log of what the cut dropped (trimmed). */
  cutLog: string;
  memberLogAfter: string;
  dir: string;
  ok: boolean;
}

const KEY_PREFIX = "pl/";

export async function runMemberCrash(o: CrashOptions): Promise<CrashReport> {
  if (!existsSync(SERVER_JS)) throw new Error(`${SERVER_JS} missing: run 'npm run build' first`);
  const log = o.log ?? (() => {});
  const rnd = mulberry32(o.seed);
  const valueBytes = o.valueBytes ?? 2048;
  const concurrency = o.concurrency ?? 32;
  const s = scratch("etcetera-powerloss");
  const [clientPort, peerPort] = await reservePorts(2);
  const dataDir = join(s.mnt, "data");
  const args = [
    "--name=n1",
    `--data-dir=${dataDir}`,
    `--listen-client-urls=http://127.0.0.1:${clientPort}`,
    `--advertise-client-urls=http://127.0.0.1:${clientPort}`,
    `--listen-peer-urls=http://127.0.0.1:${peerPort}`,
    `--initial-advertise-peer-urls=http://127.0.0.1:${peerPort}`,
    `--initial-cluster=n1=http://127.0.0.1:${peerPort}`,
    "--initial-cluster-token=powerloss",
    "--initial-cluster-state=new",
    `--snapshot-count=${o.snapshotCount ?? 1000}`,
    `--max-wals=${o.maxWals ?? 1}`,
    "--log-level=info",
  ];
  const spec = { name: "n1", clientPort: clientPort!, peerPort: peerPort!, dataDir };
  let fs: LazyFs | undefined;
  let member: Member | undefined;
  let conn: EtcdConnection | undefined;
  try {
    fs = await LazyFs.mount({ disk: s.disk, work: s.work, mountpoint: s.mnt, log: s.log, seed: o.seed, tear: o.tear ?? true, writebackPercent: o.writebackPercent });
    member = startMember(spec, args);
    await member.waitReady();
    conn = new EtcdConnection(member.endpoint);

    // The load: puts of distinct keys; an ack is recorded the moment it arrives.
    const acked = new Map<number, number>();
    let next = 0;
    let stop = false;
    const worker = async () => {
      while (!stop) {
        const n = next++;
        try {
          const r = await conn!.execute({ kind: "put", key: `${KEY_PREFIX}${n}`, value: valueOf(o.seed, n, valueBytes) }, 10_000);
          acked.set(n, r.revision);
        } catch {
          if (!member!.running) return;
        }
      }
    };
    const workers = Array.from({ length: concurrency }, worker);

    // The cut's clock starts at the first acknowledgement: on a loaded machine the first puts can
    // take longer than a short seeded delay, and a cut with nothing acknowledged proves nothing.
    const ackDeadline = Date.now() + 30_000;
    while (acked.size === 0) {
      if (Date.now() > ackDeadline || !member.running) throw new Error(`no put acknowledged within 30 s:\n${member.log.slice(-3000)}`);
      await new Promise((r) => setTimeout(r, 5));
    }
    let cutDescription: string;
    const t0 = Date.now();
    if (o.cutAt === "delay") {
      const delayMs = Math.floor(200 + rnd() * ((o.maxDelayMs ?? 8000) - 200));
      await new Promise((r) => setTimeout(r, delayMs));
      cutDescription = `${delayMs} ms after the first acknowledged put`;
    } else if (o.cutAt === "compact" || o.cutAt === "defrag") {
      const delayMs = Math.floor(200 + rnd() * ((o.maxDelayMs ?? 8000) - 200));
      await new Promise((r) => setTimeout(r, delayMs));
      const at = Math.max(1, ...acked.values());
      if (o.cutAt === "compact") await conn.compact(at, 30_000);
      else await conn.defragment(60_000);
      cutDescription = `right after ${o.cutAt === "compact" ? `Compact(${at})` : "Defragment"} returned, issued ${delayMs} ms after the first acknowledged put`;
    } else {
      const needle = o.cutAt === "snapshot" ? '"msg":"saved snapshot"' : '"msg":"purged WAL segment"';
      const occurrence = 1 + Math.floor(rnd() * 3);
      const seen = await waitForLine(member, needle, occurrence, o.triggerTimeoutMs ?? 120_000);
      // Two "saved snapshot" lines per raft snapshot: the snapshotter's (snap file and its directory
      // synced, WAL marker not yet written) and the server's (marker written, WAL segments released).
      const which = o.cutAt === "snapshot" ? (occurrence % 2 === 1 ? " (the snap file's)" : " (the server's, after the WAL release)") : "";
      cutDescription = seen
        ? `right after ${needle} #${occurrence}${which} (${Date.now() - t0} ms after the first acknowledged put)`
        : `trigger ${needle} #${occurrence} never came (${Date.now() - t0} ms after the first acknowledged put)`;
    }
    // The power cut: the process dies with the machine; lazyfs drops what was not durable.
    await killMember(member);
    stop = true;
    await Promise.all(workers);
    const cutLog = await fs.powerCut();
    fs = undefined;
    const maxAckedRevision = Math.max(0, ...acked.values());
    log(`[powerloss] seed=${o.seed} cut ${cutDescription}: ${acked.size} puts acknowledged (max revision ${maxAckedRevision})`);
    const diskFiles = listFiles(join(s.disk, "data"));
    const integrity = integrityOf(join(s.disk, "data", "member", "snap", "db"), join(s.root, "integrity"));

    // Restart on what is left.
    fs = await LazyFs.mount({ disk: s.disk, work: s.work, mountpoint: s.mnt, log: join(s.root, "cut2.log") });
    const again = startMember(spec, args);
    member = again;
    let restart: "started" | "refused" = "started";
    let refusal: string | undefined;
    try {
      await again.waitReady(60_000);
    } catch (e) {
      restart = "refused";
      refusal = (e as Error).message.slice(-3000);
    }
    const lost: CrashReport["lost"] = [];
    let lostCount = 0;
    let revisionAfter: number | undefined;
    if (restart === "started") {
      conn.close();
      conn = new EtcdConnection(again.endpoint);
      revisionAfter = (await conn.status(10_000)).revision;
      const keys = [...acked.entries()];
      for (let i = 0; i < keys.length; i += 64) {
        await Promise.all(
          keys.slice(i, i + 64).map(async ([n, rev]) => {
            const r = await conn!.execute({ kind: "get", key: `${KEY_PREFIX}${n}` }, 10_000);
            const got = r.kind === "get" ? (r.kv ?? undefined) : undefined;
            if (got === undefined || got.value !== valueOf(o.seed, n, valueBytes)) {
              lostCount++;
              if (lost.length < 10) lost.push({ key: `${KEY_PREFIX}${n}`, ackedRevision: rev, got: got === undefined ? "(absent)" : `value of ${got.value.length} bytes` });
            }
          }),
        );
      }
    }
    const refusalNamesFileAndOffset = refusal === undefined ? undefined : namesFileAndOffset(refusalLine(refusal));
    const ok = integrity === "ok" && (restart === "started" ? lostCount === 0 : refusalNamesFileAndOffset === true);
    return {
      seed: o.seed,
      cutAt: o.cutAt,
      cutDescription,
      acked: acked.size,
      maxAckedRevision,
      restart,
      refusal,
      refusalNamesFileAndOffset,
      lost,
      lostCount,
      revisionAfter,
      integrity,
      diskFiles,
      cutLog: cutLog.length > 6000 ? `${cutLog.slice(0, 3000)}\n...\n${cutLog.slice(-3000)}` : cutLog,
      memberLogAfter: again.log.slice(-3000),
      dir: s.root,
      ok,
    };
  } finally {
    conn?.close();
    if (member !== undefined) await killMember(member);
    await fs?.unmount();
    if (o.keep !== true) s.remove();
  }
}

/** A human summary of a report. */
export function describeReport(r: CrashReport, replay = `npm run powerloss -- --seed ${r.seed} --cut-at ${r.cutAt}`): string {
  const lines = [
    `seed=${r.seed} cut-at=${r.cutAt}: ${r.ok ? "OK" : "FAILED"} (replay: ${replay})`,
    `  cut ${r.cutDescription}; ${r.acked} puts acknowledged, max revision ${r.maxAckedRevision}`,
    `  disk after the cut: ${r.diskFiles.map((f) => `${f.path} (${f.bytes} B)`).join(", ") || "(nothing)"}`,
    `  integrity_check of the backend as left: ${r.integrity}`,
  ];
  if (r.restart === "started") {
    lines.push(`  restarted: revision ${r.revisionAfter}; acknowledged puts lost: ${r.lostCount}`);
    for (const l of r.lost) lines.push(`    ${l.key} (acked at revision ${l.ackedRevision}): ${l.got}`);
  } else {
    lines.push(`  refused to start (names a file and an offset: ${r.refusalNamesFileAndOffset}):`);
    lines.push(...(r.refusal ?? "").split("\n").slice(-8).map((l) => `    ${l}`));
  }
  if (!r.ok) {
    lines.push("  lazyfs dropped:");
    lines.push(...r.cutLog.split("\n").filter((l) => l.length > 0).slice(0, 40).map((l) => `    ${l}`));
  }
  return lines.join("\n");
}
