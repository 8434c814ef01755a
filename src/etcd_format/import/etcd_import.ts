/**
 * Import on first start: a --data-dir that holds etcd 3.4's data (made by `etcdctl snapshot
 * restore`, or left by a stopped etcd member: member/wal with etcd's segments, member/snap with its
 * `.snap` files and the bbolt `db`) becomes etcetera's own backend and WAL, keeping the member's
 * identity (member and cluster id from the WAL's metadata), its raft hard state, the consistent
 * index and term, the membership, and every entry after the consistent index for etcetera's
 * applier to apply (entries_import.ts).
 *
 * Crash safety: nothing of etcd's is modified. The new files are written in member.etcetera-import
 * beside member/, fsynced with their directories; then member/ is renamed to member.etcd-original
 * and member.etcetera-import to member/, and the data dir fsynced. A crash before the first rename
 * leaves etcd's member/ as it was and the next start imports again from scratch; one between the
 * two renames is finished by the next start (the import dir is complete by then).
 */
import { closeSync, existsSync, openSync, readSync, renameSync, rmSync, statSync } from "node:fs";
import { join, resolve } from "node:path";
import type { Logger } from "../../server/logger.js";
import { formatId, type Member } from "../../server/member.js";
import { fsyncDir } from "../../wal/segment.js";
import { EtcdBackendReader } from "../backend_reader.js";
import { etcdV2Cluster, readNewestEtcdSnap } from "../snap_reader.js";
import { readEtcdWal } from "../wal_reader.js";
import { importEntries } from "./entries_import.js";
import { ImportRefusedError, importNodeId } from "./ids.js";
import { writeMemberDir } from "./member_dir.js";

export const IMPORT_DIR = "member.etcetera-import";
export const ORIGINAL_DIR = "member.etcd-original";

const SQLITE_MAGIC = Buffer.from("SQLite format 3\0");

export interface ImportConfig {
  readonly dataDir: string;
  readonly walDir: string;
  readonly snapDir: string;
  /** etcd's SegmentSizeBytes (tests with short segments); 64 MB by default. */
  readonly etcdSegmentSizeBytes?: number;
}

/** True when `db` is a file that is not SQLite (etcd's bbolt; the bbolt reader refuses anything else). */
function isForeignBackend(db: string): boolean {
  if (!existsSync(db) || statSync(db).size === 0) return false;
  const head = Buffer.alloc(SQLITE_MAGIC.length);
  const fd = openSync(db, "r");
  try {
    readSync(fd, head, 0, head.length, 0);
  } finally {
    closeSync(fd);
  }
  return !head.equals(SQLITE_MAGIC);
}

/** True when the data dir holds etcd's data not yet imported. */
export function holdsEtcdData(c: ImportConfig): boolean {
  return isForeignBackend(join(c.snapDir, "db"));
}

/** Imports etcd's data dir if --data-dir holds one (or finishes an import a crash interrupted). Returns whether it did. */
export async function importEtcdDataDirIfPresent(c: ImportConfig, logger: Logger): Promise<boolean> {
  const member = join(c.dataDir, "member");
  const staged = join(c.dataDir, IMPORT_DIR);
  const original = join(c.dataDir, ORIGINAL_DIR);
  if (!existsSync(member) && existsSync(original) && existsSync(staged)) {
    logger.info({ dataDir: c.dataDir }, "finishing an etcd data dir import interrupted between its two renames");
    renameSync(staged, member);
    await fsyncDir(c.dataDir);
    return true;
  }
  if (!holdsEtcdData(c)) return false;
  if (resolve(c.walDir) !== resolve(member, "wal") || resolve(c.snapDir) !== resolve(member, "snap")) {
    throw new ImportRefusedError(`importing etcd's data needs its WAL in ${join(member, "wal")} (got --wal-dir ${c.walDir}): move it there first`);
  }
  if (existsSync(original)) throw new ImportRefusedError(`${original} exists from an earlier import: move it away before importing ${member}`);
  rmSync(staged, { recursive: true, force: true });
  try {
    await importInto(c, staged, logger);
  } catch (err) {
    // Refused: etcd's files are as they were; nothing of the attempt is left behind.
    rmSync(staged, { recursive: true, force: true });
    throw err;
  }
  await fsyncDir(staged);
  await fsyncDir(c.dataDir);
  renameSync(member, original);
  renameSync(staged, member);
  await fsyncDir(c.dataDir);
  logger.info({ dataDir: c.dataDir, original }, "imported etcd's data dir; etcd's files are kept in the original directory");
  return true;
}

async function importInto(c: ImportConfig, staged: string, logger: Logger): Promise<void> {
  const startMs = Date.now();
  logger.info({ dataDir: c.dataDir }, "importing etcd's data dir");
  const snap = readNewestEtcdSnap(c.snapDir);
  const snapIndex = snap?.metadata.index ?? 0;
  const wal = readEtcdWal(c.walDir, { from: { index: snapIndex, term: snap?.metadata.term ?? 0 }, segmentSizeBytes: c.etcdSegmentSizeBytes });
  if (wal.repairedBy !== undefined) {
    logger.warn({ broken: wal.repairedBy, segment: wal.segments.at(-1) }, "etcd repaired this WAL (cut a torn last record off its last segment); importing the repaired log, etcd's .broken copy is kept with its files");
  }
  const dbPath = join(c.snapDir, "db");
  const source = EtcdBackendReader.open(dbPath);
  try {
    const ci = Number(source.consistentIndex());
    const lastIndex = wal.entries.length > 0 ? wal.entries[wal.entries.length - 1]!.index : snapIndex;
    if (ci < snapIndex) throw new ImportRefusedError(`${dbPath} is applied up to index ${ci}, older than the snapshot ${snap?.file} at ${snapIndex} (etcd would take a newer .snap.db): refusing`);
    if (ci > lastIndex) throw new ImportRefusedError(`${dbPath} is applied up to index ${ci}, beyond the WAL's last entry ${lastIndex}: the WAL is missing entries`);
    const term = ci === snapIndex ? (snap?.metadata.term ?? 0) : wal.entries[ci - snapIndex - 1]!.term;
    const memberId = importNodeId(wal.metadata.nodeId, "member id");
    const clusterId = importNodeId(wal.metadata.clusterId, "cluster id");
    // etcd 3.4 keeps the membership in the v2 store (the .snap) and mirrors it in the backend. At a
    // snapshot's index (a restored dir: its backend still lists the old cluster) the v2 store is the
    // record; past it, the backend has the conf changes the snapshot does not.
    const v2 = snap !== undefined && ci === snapIndex ? etcdV2Cluster(snap) : undefined;
    const etcdMembers = v2 ? v2.members : source.members();
    const removed = v2 ? v2.removedMemberIds : source.removedMemberIds();
    const members: Member[] = etcdMembers.map((m) => ({
      id: importNodeId(m.id, "member id"),
      name: m.name,
      peerUrls: [...m.peerURLs],
      clientUrls: [...m.clientURLs],
      isLearner: m.isLearner,
    }));
    if (!members.some((m) => m.id === memberId)) {
      throw new ImportRefusedError(`member ${formatId(memberId)} of the WAL is not among the members at index ${ci} (${members.map((m) => formatId(m.id)).join(", ")})`);
    }
    const tail = importEntries(wal.entries.filter((e) => e.index > ci));
    const hs = wal.hardState;
    const hardState = { term: Math.max(hs.term, term), vote: hs.vote === 0n ? 0n : importNodeId(hs.vote, "hard state vote"), commit: Math.max(hs.commit, ci) };
    const imported = await writeMemberDir({
      source,
      dir: staged,
      memberId,
      clusterId,
      members,
      removedMemberIds: removed,
      consistentIndex: ci,
      term,
      hardState,
      tail,
      progress: (n) => logger.info({ revisions: n }, "importing etcd's key revisions"),
    });
    logger.info(
      {
        memberId: formatId(memberId),
        clusterId: formatId(clusterId),
        consistentIndex: ci,
        term,
        commit: hardState.commit,
        entriesToApply: tail.length,
        members: members.length,
        ...imported,
        tookMs: Date.now() - startMs,
      },
      "imported etcd's backend and WAL",
    );
  } finally {
    source.close();
  }
}
